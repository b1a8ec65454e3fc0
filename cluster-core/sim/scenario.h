#pragma once
// Random fault scenarios over a SimCluster, and the checks that end one.
#include <cstdint>
#include <cstdio>
#include <string>

#include "cluster-core/sim/sim_cluster.h"

namespace estuary::sim {

struct ScenarioOptions {
  uint64_t seed = 1;
  size_t voters = 3;
  size_t spares = 2;  // for membership changes
  raft::Mode mode = raft::Mode::kPlain;
  size_t steps = 300;
  bool faults = true;
  std::FILE* trace = nullptr;  // if set: every step's action and the node states
};

struct ScenarioResult {
  bool ok = true;
  std::string failure;  // first violation, with its seed
  size_t acked = 0;
  size_t committed = 0;
  uint64_t simulated_ms = 0;
  SimCluster::Stats stats;
};

// Runs `steps` random actions (proposals, crashes, restarts, partitions,
// heals, transfers, compactions, membership changes) with time passing in
// between, then heals everything and checks that the cluster converges
// and every acknowledged value is committed exactly once.
ScenarioResult RunScenario(const ScenarioOptions& options);

SimOptions DefaultSimOptions(uint64_t seed, size_t voters, size_t spares, raft::Mode mode);

}  // namespace estuary::sim
