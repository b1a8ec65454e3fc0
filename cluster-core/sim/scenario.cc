#include "cluster-core/sim/scenario.h"

#include <algorithm>
#include <vector>

namespace estuary::sim {

SimOptions DefaultSimOptions(uint64_t seed, size_t voters, size_t spares, raft::Mode mode) {
  SimOptions options;
  options.seed = seed;
  options.voters = voters;
  options.spares = spares;
  options.mode = mode;
  options.drop_per_mille = 20;
  options.duplicate_per_mille = 10;
  options.raft.heartbeat_interval_ms = 50;
  options.raft.election_timeout_ms = 300;
  options.raft.max_clock_drift_ms = 30;  // > 2 * 2% of 300 ms
  options.raft.max_append_entries = 8;
  options.raft.max_inflight = 4;
  options.raft.max_snapshot_chunk_bytes = 3;  // the 8-byte snapshots go in 3 chunks
  options.max_disk_delay_ms = 10;
  options.slow_disk_per_mille = 30;
  return options;
}

namespace {

class Driver {
 public:
  Driver(SimCluster& cluster, std::FILE* trace, bool retries)
      : cluster_(cluster), trace_(trace), retries_(retries) {}

  void Step(bool faults) {
    const uint64_t roll = cluster_.Random() % 100;
    if (trace_) {
      std::fprintf(trace_, "t=%llu roll %llu\n%s", static_cast<unsigned long long>(cluster_.now()),
                   static_cast<unsigned long long>(roll), cluster_.Describe().c_str());
    }
    if (roll < 40) {
      ProposeBurst();
    } else if (!faults) {
      // no fault this step
    } else if (roll < 44) {
      CrashOne();
    } else if (roll < 50) {
      RestartOne();
    } else if (roll < 53) {
      PartitionRandom();
    } else if (roll < 58) {
      cluster_.Heal();
    } else if (roll < 59) {
      CutRandom();
    } else if (roll < 62) {
      TransferRandom();
    } else if (roll < 66) {
      cluster_.Compact(Pick(cluster_.ids()));
    } else if (roll < 69) {
      ChangeMembership();
    } else if (roll < 74 && retries_) {
      RetryUnacked();
    }
    cluster_.RunFor(cluster_.Random() % 60);
  }

 private:
  NodeId Pick(const std::vector<NodeId>& ids) { return ids[cluster_.Random() % ids.size()]; }

  // Clients may reach a stale leader: pick any live leader.
  void ProposeBurst() {
    auto leaders = cluster_.LiveLeaders();
    if (leaders.empty()) return;
    const NodeId leader = Pick(leaders);
    const uint64_t count = 1 + cluster_.Random() % 4;
    for (uint64_t i = 0; i < count; ++i) cluster_.Propose(leader);
  }

  void CrashOne() {
    std::vector<NodeId> live;
    for (NodeId id : cluster_.ids()) {
      if (cluster_.up(id)) live.push_back(id);
    }
    if (!live.empty()) cluster_.Crash(Pick(live));
  }

  void RestartOne() {
    for (NodeId id : cluster_.ids()) {
      if (!cluster_.up(id)) {
        cluster_.Restart(id);
        return;
      }
    }
  }

  void PartitionRandom() {
    std::set<NodeId> side;
    for (NodeId id : cluster_.ids()) {
      if (cluster_.Random() % 2 == 0) side.insert(id);
    }
    cluster_.Isolate(side);
  }

  void CutRandom() { cluster_.Cut(Pick(cluster_.ids()), Pick(cluster_.ids())); }

  void TransferRandom() {
    auto leader = cluster_.Leader();
    if (!leader) return;
    const auto& voters = cluster_.raft(*leader).config().voters;
    if (!voters.empty()) (void)cluster_.Transfer(*leader, Pick(voters));
  }

  // Keeps at least three voters; spares come in as learners, then voters.
  void ChangeMembership() {
    auto leader = cluster_.Leader();
    if (!leader) return;
    const raft::Config& config = cluster_.raft(*leader).config();
    const NodeId node = Pick(cluster_.ids());
    raft::ConfigChange change{.type = raft::ConfigChangeType::kAddLearner, .node = node};
    if (config.IsLearner(node)) {
      change.type = raft::ConfigChangeType::kPromoteLearner;
    } else if (config.IsVoter(node)) {
      if (config.voters.size() <= 3 || node == *leader) return;
      change.type = raft::ConfigChangeType::kRemove;
    }
    (void)cluster_.ChangeConfig(*leader, change);
  }

  // Clients that heard nothing back retry on the current leader with the
  // same write id (timestamp mode de-duplicates them).
  void RetryUnacked() {
    auto leader = cluster_.Leader();
    if (!leader) return;
    const std::vector<uint64_t> unacked = cluster_.Unacked();
    const size_t count = std::min<size_t>(unacked.size(), 1 + cluster_.Random() % 4);
    for (size_t i = 0; i < count; ++i) cluster_.Retry(*leader, Pick(unacked));
  }

  SimCluster& cluster_;
  std::FILE* trace_;
  bool retries_;
};

// True when a leader exists and every voter of its config has applied
// everything it committed.
bool Converged(const SimCluster& cluster) {
  auto leader = cluster.Leader();
  if (!leader) return false;
  const Index commit = cluster.raft(*leader).commit();
  for (NodeId id : cluster.raft(*leader).config().voters) {
    if (cluster.applied(id) < commit) return false;
  }
  return true;
}

// After the faults: everything restarted and connected must elect a
// leader, acknowledge a fresh proposal and bring every voter up to it.
bool Converge(SimCluster& cluster, std::FILE* trace) {
  cluster.Heal();
  for (NodeId id : cluster.ids()) cluster.Restart(id);
  cluster.TraceMessages(trace);
  bool acked = false;
  for (int attempt = 0; attempt < 20 && !acked && cluster.ok(); ++attempt) {
    cluster.RunUntil([&] { return cluster.Leader().has_value(); }, 5'000);
    if (trace) {
      std::fprintf(trace, "converge t=%llu\n%s", static_cast<unsigned long long>(cluster.now()),
                   cluster.Describe().c_str());
    }
    auto leader = cluster.Leader();
    if (!leader) continue;
    auto value = cluster.Propose(*leader);
    if (!value) {
      cluster.RunFor(100);
      continue;
    }
    acked = cluster.RunUntil([&] { return cluster.acked().contains(*value); }, 3'000);
  }
  return acked && cluster.RunUntil([&] { return Converged(cluster); }, 10'000);
}

}  // namespace

ScenarioResult RunScenario(const ScenarioOptions& options) {
  SimOptions sim_options = DefaultSimOptions(options.seed, options.voters, options.spares,
                                             options.mode);
  // Each seed also picks the election variant, so the safety rules are
  // checked without PreVote and CheckQuorum covering for them.
  sim_options.raft.pre_vote = options.seed % 2 == 0;
  sim_options.raft.check_quorum = options.seed / 2 % 2 == 0;
  SimCluster cluster(sim_options);
  // Retries only where de-duplication can keep them from applying twice.
  Driver driver(cluster, options.trace, options.mode == raft::Mode::kTimestamp);
  for (size_t i = 0; i < options.steps && cluster.ok(); ++i) {
    driver.Step(options.faults);
    if (i % 50 == 0) cluster.CheckLogs();
  }
  ScenarioResult result;
  bool converged = false;
  if (cluster.ok()) {
    converged = Converge(cluster, options.trace);
    cluster.CheckLogs();
    cluster.CheckAcked();
  }
  result.ok = cluster.ok();
  if (!cluster.ok()) {
    result.failure = cluster.violations().front();
  } else if (!converged) {
    result.ok = false;
    result.failure = "seed " + std::to_string(options.seed) +
                     ": no convergence after heal (no leader or members behind)\n" +
                     cluster.Describe();
  }
  result.acked = cluster.acked().size();
  result.committed = cluster.committed_count();
  result.simulated_ms = cluster.now();
  result.stats = cluster.stats();
  return result;
}

}  // namespace estuary::sim
