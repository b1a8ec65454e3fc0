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
#include <optional>
#include <string>
#include <string_view>

#include <algorithm>
#include <vector>

#include "cluster-core/sim/experiment.h"
#include "cluster-core/sim/scenario.h"

namespace {

constexpr const char* kUsage =
    "usage: estuary-sim [--seeds K] [--seed N] [--voters V] [--mode plain|timestamp]\n"
    "                   [--steps S] [--quiet] [--trace]\n"
    "                   [--experiment switch|crash|cut|all] [--delay MS] [--disk MS]\n"
    "Runs K random fault scenarios (seeds N..N+K-1; default K=1000, N=1) over\n"
    "a simulated raft cluster of V voters (default 3) and reports failing seeds.\n"
    "--experiment runs one disruption per seed under client load instead and\n"
    "prints the unavailability window, time to a new leader and write outcomes\n"
    "(`all`: both modes, 3 and 5 voters, every disruption; docs/raft.md).\n"
    "--delay fixes the experiment's one-way network delay (default 1-20 ms),\n"
    "--disk its disk writes to 0..MS ms with no stalls (default 0-10, 3% stall).\n";

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

uint64_t Percentile(std::vector<uint64_t> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(rank, values.size() - 1)];
}

// One row of the experiment table; returns the number of failed seeds.
uint64_t RunExperimentRow(estuary::sim::ExperimentOptions options, uint64_t first_seed,
                          uint64_t seeds) {
  std::vector<uint64_t> unavailable;
  std::vector<uint64_t> new_leader;
  std::vector<uint64_t> held_ms;
  std::vector<uint64_t> latency;
  uint64_t lost = 0, duplicated = 0, failed = 0, held = 0, bad = 0;
  for (uint64_t seed = first_seed; seed < first_seed + seeds; ++seed) {
    options.seed = seed;
    g_current_seed = static_cast<std::sig_atomic_t>(seed);
    const auto result = estuary::sim::RunExperiment(options);
    if (!result.ok) {
      ++bad;
      std::printf("FAIL %s\n", result.failure.c_str());
    }
    unavailable.push_back(result.unavailable_ms);
    new_leader.push_back(result.new_leader_ms);
    held_ms.push_back(result.held_ms);
    latency.push_back(result.write_latency_ms);
    lost += result.lost;
    duplicated += result.duplicated;
    failed += result.failed;
    held += result.held;
  }
  std::printf("| %-9s | %-6s | %zu | %5llu | %5llu | %5llu | %5llu | %5llu | %5llu | %5llu | %4llu | "
              "%5llu | %6llu | %5llu |\n",
              options.mode == estuary::raft::Mode::kTimestamp ? "timestamp" : "plain",
              std::string(estuary::sim::DisruptionName(options.disruption)).c_str(),
              options.voters,
              static_cast<unsigned long long>(Percentile(latency, 0.5)),
              static_cast<unsigned long long>(Percentile(held_ms, 0.5)),
              static_cast<unsigned long long>(Percentile(held_ms, 0.99)),
              static_cast<unsigned long long>(Percentile(unavailable, 0.5)),
              static_cast<unsigned long long>(Percentile(unavailable, 0.99)),
              static_cast<unsigned long long>(Percentile(new_leader, 0.5)),
              static_cast<unsigned long long>(Percentile(new_leader, 0.99)),
              static_cast<unsigned long long>(lost), static_cast<unsigned long long>(duplicated),
              static_cast<unsigned long long>(failed), static_cast<unsigned long long>(held));
  std::fflush(stdout);
  return bad;
}

int RunExperiments(std::string_view which, estuary::sim::ExperimentOptions base,
                   bool all_shapes, uint64_t first_seed, uint64_t seeds) {
  using estuary::sim::Disruption;
  std::vector<Disruption> disruptions;
  if (which == "switch" || which == "all") disruptions.push_back(Disruption::kSwitch);
  if (which == "crash" || which == "all") disruptions.push_back(Disruption::kCrash);
  if (which == "cut" || which == "all") disruptions.push_back(Disruption::kCut);
  std::printf("seeds %llu..%llu; milliseconds of simulated time; outcomes summed over seeds\n",
              static_cast<unsigned long long>(first_seed),
              static_cast<unsigned long long>(first_seed + seeds - 1));
  std::printf("| mode      | event  | V | write p50 | held p50 | p99 | unavailable p50 | p99 | "
              "new leader p50 | p99 | lost | duplicated | failed | held |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::vector<estuary::raft::Mode> modes{base.mode};
  std::vector<size_t> shapes{base.voters};
  if (all_shapes) {
    modes = {estuary::raft::Mode::kPlain, estuary::raft::Mode::kTimestamp};
    shapes = {3, 5};
  }
  uint64_t bad = 0;
  for (Disruption disruption : disruptions) {
    for (size_t voters : shapes) {
      for (estuary::raft::Mode mode : modes) {
        base.disruption = disruption;
        base.voters = voters;
        base.mode = mode;
        bad += RunExperimentRow(base, first_seed, seeds);
      }
    }
  }
  return bad == 0 ? 0 : 1;
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
  std::string experiment;
  std::optional<uint64_t> delay;
  std::optional<uint64_t> disk;
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
    if (flag == "--experiment") {
      if (value != "switch" && value != "crash" && value != "cut" && value != "all") {
        return BadFlag("bad --experiment " + std::string(value));
      }
      experiment = value;
    } else if (flag == "--mode") {
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
    } else if (flag == "--delay") {
      delay = number;
    } else if (flag == "--disk") {
      disk = number;
    } else {
      return BadFlag("unknown flag " + std::string(flag));
    }
  }
  if (seed_given && !seeds_given) seeds = 1;
  std::signal(SIGABRT, OnAbort);
  if (!experiment.empty()) {
    estuary::sim::ExperimentOptions base{.voters = options.voters, .mode = options.mode};
    if (delay) base.min_delay_ms = base.max_delay_ms = std::max<uint64_t>(*delay, 1);
    if (disk) {
      base.max_disk_delay_ms = *disk;
      base.slow_disk_per_mille = 0;
    }
    return RunExperiments(experiment, base, experiment == "all", first_seed, seeds);
  }
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
    total.retries += result.stats.retries;
    total.duplicates_suppressed += result.stats.duplicates_suppressed;
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
    std::printf("  client retries %llu, committed retries suppressed by de-duplication %llu\n",
                static_cast<unsigned long long>(total.retries),
                static_cast<unsigned long long>(total.duplicates_suppressed));
  }
  return failed == 0 ? 0 : 1;
}
