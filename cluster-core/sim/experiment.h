#pragma once
// The plain-against-timestamp experiment of docs/raft.md: one disruption
// (a planned leader switch, a leader crash, or the leader cut off from the
// others) under a steady stream of client writes with retries, measured
// in simulated time. Deterministic from the seed.
#include <cstdint>
#include <string_view>

#include "cluster-core/sim/sim_cluster.h"

namespace estuary::sim {

enum class Disruption { kSwitch, kCrash, kCut };
std::string_view DisruptionName(Disruption disruption);

struct ExperimentOptions {
  uint64_t seed = 1;
  size_t voters = 3;
  raft::Mode mode = raft::Mode::kPlain;
  Disruption disruption = Disruption::kSwitch;
  uint64_t write_interval_ms = 5;   // one new client write every interval
  uint64_t retry_after_ms = 600;    // a client retries a write unanswered this long
  // Network and disk (defaults as in the scenarios; --delay and --disk on
  // estuary-sim fix them to count round trips exactly).
  uint64_t min_delay_ms = 1;
  uint64_t max_delay_ms = 20;
  uint64_t max_disk_delay_ms = 10;
  uint32_t slow_disk_per_mille = 30;
};

struct ExperimentResult {
  bool ok = true;
  std::string failure;
  // From the disruption until the first write submitted after it is
  // acknowledged: the window in which no new write is acknowledged.
  uint64_t unavailable_ms = 0;
  // The longest any write submitted between the disruption and the new
  // leader's election waited before it entered a leader's log: how long
  // writes were held (switch) or had nowhere to go. The rest of
  // unavailable_ms is the commit of a write like any other.
  uint64_t held_ms = 0;
  // Median from submission to acknowledgement of the writes of the second
  // before the disruption: what a write costs when nothing happens.
  uint64_t write_latency_ms = 0;
  // From the disruption until another node leads (switch: the target).
  uint64_t new_leader_ms = 0;
  uint64_t lost = 0;        // acknowledged writes that never took effect
  uint64_t duplicated = 0;  // writes that took effect more than once
  uint64_t failed = 0;      // writes answered with an error at least once
  uint64_t held = 0;        // submissions held (and forwarded) instead of failed
};

ExperimentResult RunExperiment(const ExperimentOptions& options);

}  // namespace estuary::sim
