// estuary-sim: runs random fault scenarios over simulated raft clusters.
//   estuary-sim [--seeds K] [--seed N] [--voters 3|5] [--mode plain|timestamp]
//               [--steps S] [--quiet]
// Runs seeds N..N+K-1, prints each failing seed with its first violation,
// and exits 1 if any failed. `--seed N` alone replays one seed exactly.
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "cluster-core/sim/scenario.h"

namespace {

constexpr const char* kUsage =
    "usage: estuary-sim [--seeds K] [--seed N] [--voters V] [--mode plain|timestamp]\n"
    "                   [--steps S] [--quiet] [--trace]\n"
    "Runs K random fault scenarios (seeds N..N+K-1; default K=1000, N=1) over\n"
    "a simulated raft cluster of V voters (default 3) and reports failing seeds.\n";

bool ParseNumber(std::string_view text, uint64_t& out) {
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  return error == std::errc() && end == text.data() + text.size();
}

// A raft check aborts the process; say which seed did it, so it replays.
volatile std::sig_atomic_t g_current_seed = 0;

extern "C" void OnAbort(int) {
  char line[96];
  const int n = std::snprintf(line, sizeof line, "FAIL seed %llu: aborted by a check (above)\n",
                              static_cast<unsigned long long>(g_current_seed));
  std::fwrite(line, 1, static_cast<size_t>(n), stdout);
  std::fflush(stdout);
  std::_Exit(1);
}

int BadFlag(const std::string& what) {
  std::fprintf(stderr, "estuary-sim: %s\n", what.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t seeds = 1000;
  uint64_t first_seed = 1;
  bool seed_given = false;
  bool seeds_given = false;
  bool quiet = false;
  estuary::sim::ScenarioOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (flag == "--quiet") {
      quiet = true;
      continue;
    }
    if (flag == "--trace") {
      options.trace = stdout;
      continue;
    }
    if (i + 1 >= argc) return BadFlag("missing value for " + std::string(flag));
    const std::string_view value = argv[++i];
    uint64_t number = 0;
    if (flag == "--mode") {
      if (value == "plain") {
        options.mode = estuary::raft::Mode::kPlain;
      } else if (value == "timestamp") {
        options.mode = estuary::raft::Mode::kTimestamp;
      } else {
        return BadFlag("bad --mode " + std::string(value));
      }
    } else if (!ParseNumber(value, number)) {
      return BadFlag("bad value for " + std::string(flag) + ": " + std::string(value));
    } else if (flag == "--seeds") {
      seeds = number;
      seeds_given = true;
    } else if (flag == "--seed") {
      first_seed = number;
      seed_given = true;
    } else if (flag == "--voters") {
      if (number < 1 || number > 9) return BadFlag("--voters must be 1..9");
      options.voters = number;
    } else if (flag == "--steps") {
      options.steps = number;
    } else {
      return BadFlag("unknown flag " + std::string(flag));
    }
  }
  if (seed_given && !seeds_given) seeds = 1;
  std::signal(SIGABRT, OnAbort);
  uint64_t failed = 0;
  estuary::sim::SimCluster::Stats total;
  uint64_t acked = 0;
  for (uint64_t seed = first_seed; seed < first_seed + seeds; ++seed) {
    options.seed = seed;
    g_current_seed = static_cast<std::sig_atomic_t>(seed);
    const auto result = estuary::sim::RunScenario(options);
    acked += result.acked;
    total.crashes += result.stats.crashes;
    total.snapshots_installed += result.stats.snapshots_installed;
    total.messages_sent += result.stats.messages_sent;
    total.messages_dropped += result.stats.messages_dropped;
    total.leader_terms += result.stats.leader_terms;
    total.writes_held += result.stats.writes_held;
    total.held_forward_failed += result.stats.held_forward_failed;
    if (!result.ok) {
      ++failed;
      std::printf("FAIL %s\n", result.failure.c_str());
    } else if (!quiet && seeds == 1) {
      std::printf("ok seed %llu: %zu acknowledged, %zu committed, %llu ms simulated\n",
                  static_cast<unsigned long long>(seed), result.acked, result.committed,
                  static_cast<unsigned long long>(result.simulated_ms));
    }
  }
  std::printf("estuary-sim: %llu seeds from %llu, mode %s, %zu voters: %llu failed\n",
              static_cast<unsigned long long>(seeds), static_cast<unsigned long long>(first_seed),
              options.mode == estuary::raft::Mode::kTimestamp ? "timestamp" : "plain",
              options.voters, static_cast<unsigned long long>(failed));
  std::printf("  acknowledged %llu, leader terms %zu, crashes %llu, snapshots installed %llu, "
              "messages %llu (%llu dropped or cut)\n",
              static_cast<unsigned long long>(acked), total.leader_terms,
              static_cast<unsigned long long>(total.crashes),
              static_cast<unsigned long long>(total.snapshots_installed),
              static_cast<unsigned long long>(total.messages_sent),
              static_cast<unsigned long long>(total.messages_dropped));
  if (options.mode == estuary::raft::Mode::kTimestamp) {
    std::printf("  writes held during transfers %llu, of which the new leader did not take %llu\n",
                static_cast<unsigned long long>(total.writes_held),
                static_cast<unsigned long long>(total.held_forward_failed));
  }
  return failed == 0 ? 0 : 1;
}
