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
};

struct ExperimentResult {
  bool ok = true;
  std::string failure;
  // From the disruption until the first write submitted after it is
  // acknowledged: the window in which no new write is acknowledged.
  uint64_t unavailable_ms = 0;
  // From the disruption until another node leads (switch: the target).
  uint64_t new_leader_ms = 0;
  uint64_t lost = 0;        // acknowledged writes that never took effect
  uint64_t duplicated = 0;  // writes that took effect more than once
  uint64_t failed = 0;      // writes answered with an error at least once
  uint64_t held = 0;        // submissions held (and forwarded) instead of failed
};

ExperimentResult RunExperiment(const ExperimentOptions& options);

}  // namespace estuary::sim
