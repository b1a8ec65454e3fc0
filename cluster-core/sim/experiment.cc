#include "cluster-core/sim/experiment.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <vector>

#include "cluster-core/sim/scenario.h"

namespace estuary::sim {

std::string_view DisruptionName(Disruption disruption) {
  switch (disruption) {
    case Disruption::kSwitch: return "switch";
    case Disruption::kCrash: return "crash";
    case Disruption::kCut: return "cut";
  }
  return "unknown";
}

namespace {

// Clients talk to the node they believe leads; an error sends them to the
// current leader; a write unanswered for retry_after_ms is retried there
// with the same write id.
class Clients {
 public:
  Clients(SimCluster& cluster, const ExperimentOptions& options)
      : cluster_(cluster), options_(options) {}

  void Write() {
    const uint64_t value = cluster_.NewValue();
    submitted_at_[value] = cluster_.now();
    Submit(value);
  }

  // Retries what went unanswered.
  void Retry() {
    std::vector<uint64_t> due;
    for (auto it = last_try_.begin(); it != last_try_.end();) {
      if (cluster_.acked().contains(it->first)) {
        it = last_try_.erase(it);
        continue;
      }
      if (cluster_.now() >= it->second + options_.retry_after_ms) due.push_back(it->first);
      ++it;
    }
    for (uint64_t value : due) Submit(value);
  }

  uint64_t SubmittedAt(uint64_t value) const { return submitted_at_.at(value); }
  const std::map<uint64_t, uint64_t>& submitted() const { return submitted_at_; }
  // Writes answered with an error at least once (the client retried them).
  uint64_t failed() const { return failed_.size(); }

 private:
  void Submit(uint64_t value) {
    last_try_[value] = cluster_.now();
    if (!target_ || !cluster_.up(*target_)) target_ = cluster_.Leader();
    if (target_ && cluster_.Submit(*target_, value)) return;
    failed_.insert(value);
    target_ = cluster_.Leader();  // rediscover; the retry goes there soon
    last_try_[value] = cluster_.now() + 20 - options_.retry_after_ms;
  }

  SimCluster& cluster_;
  const ExperimentOptions& options_;
  std::optional<NodeId> target_;
  std::map<uint64_t, uint64_t> submitted_at_;
  std::map<uint64_t, uint64_t> last_try_;
  std::set<uint64_t> failed_;
};

// Runs `ms` of client traffic.
void Drive(SimCluster& cluster, Clients& clients, const ExperimentOptions& options, uint64_t ms) {
  for (uint64_t t = 0; t < ms && cluster.ok(); t += options.write_interval_ms) {
    clients.Write();
    clients.Retry();
    cluster.RunFor(options.write_interval_ms);
  }
}

}  // namespace

ExperimentResult RunExperiment(const ExperimentOptions& options) {
  SimOptions sim_options = DefaultSimOptions(options.seed, options.voters, 0, options.mode);
  sim_options.drop_per_mille = 0;
  sim_options.duplicate_per_mille = 0;
  sim_options.min_delay_ms = options.min_delay_ms;
  sim_options.max_delay_ms = options.max_delay_ms;
  sim_options.max_disk_delay_ms = options.max_disk_delay_ms;
  sim_options.slow_disk_per_mille = options.slow_disk_per_mille;
  SimCluster cluster(sim_options);
  Clients clients(cluster, options);
  ExperimentResult result;
  if (!cluster.RunUntil([&] { return cluster.Leader().has_value(); }, 10'000)) {
    result.ok = false;
    result.failure = "no leader at start";
    return result;
  }
  const uint64_t load_start = cluster.now();
  Drive(cluster, clients, options, 1'000);
  const uint64_t load_end = cluster.now();
  const NodeId leader = *cluster.Leader();
  const uint64_t held_before = cluster.stats().writes_held;
  // A planned switch goes to a follower caught up to the leader's newest
  // entry: the operator waits (under load) for one, at most 500 ms.
  NodeId target = leader;
  for (uint64_t waited = 0; waited < 500 && target == leader; ++waited) {
    const raft::Raft& raft = cluster.raft(leader);
    for (const auto& [id, progress] : raft.progress()) {
      if (raft.config().IsVoter(id) && progress.match >= raft.log().LastIndex()) target = id;
    }
    if (target == leader) cluster.RunFor(1);
  }
  if (target == leader) target = leader % options.voters + 1;
  const uint64_t start = cluster.now();
  const uint64_t failed_before = clients.failed() + cluster.stats().held_forward_failed;
  switch (options.disruption) {
    case Disruption::kSwitch: (void)cluster.Transfer(leader, target); break;
    case Disruption::kCrash: cluster.Crash(leader); break;
    case Disruption::kCut: cluster.Isolate({leader}); break;
  }
  uint64_t new_leader_at = 0;
  for (uint64_t t = 0; t < 3'000 && cluster.ok(); t += options.write_interval_ms) {
    clients.Write();
    clients.Retry();
    cluster.RunFor(options.write_interval_ms);
    auto now_leader = cluster.Leader();
    const bool moved = now_leader && *now_leader != leader &&
                       (options.disruption != Disruption::kSwitch || *now_leader == target);
    if (new_leader_at == 0 && moved) new_leader_at = cluster.now();
  }
  // Recovery: the crashed node restarts, the cut heals; retries settle.
  cluster.Heal();
  cluster.Restart(leader);
  Drive(cluster, clients, options, 1'000);
  for (uint64_t t = 0; t < 3'000 && cluster.ok(); t += options.write_interval_ms) {
    clients.Retry();
    cluster.RunFor(options.write_interval_ms);
  }
  cluster.CheckLogs();
  result.ok = cluster.ok();
  if (!result.ok) result.failure = cluster.violations().front();
  uint64_t first_ack = UINT64_MAX;
  for (const auto& [value, at] : clients.submitted()) {
    if (at >= start && cluster.AckTime(value) != 0) {
      first_ack = std::min(first_ack, cluster.AckTime(value));
    }
  }
  result.unavailable_ms = first_ack == UINT64_MAX ? UINT64_MAX : first_ack - start;
  const uint64_t held_until = new_leader_at == 0 ? start + 3'000 : new_leader_at;
  std::vector<uint64_t> latencies;
  for (const auto& [value, at] : clients.submitted()) {
    if (at >= start && at <= held_until) {
      const uint64_t in_log = cluster.InLogTime(value);
      result.held_ms = std::max(result.held_ms, in_log == 0 ? UINT64_MAX : in_log - at);
    }
    if (at >= load_start && at < load_end && cluster.AckTime(value) != 0) {
      latencies.push_back(cluster.AckTime(value) - at);
    }
  }
  if (!latencies.empty()) {
    std::nth_element(latencies.begin(), latencies.begin() + latencies.size() / 2, latencies.end());
    result.write_latency_ms = latencies[latencies.size() / 2];
  }
  result.new_leader_ms = new_leader_at == 0 ? UINT64_MAX : new_leader_at - start;
  const SimCluster::Outcome outcome = cluster.CheckOutcome();
  result.lost = outcome.lost;
  result.duplicated = outcome.duplicated;
  result.failed = clients.failed() + cluster.stats().held_forward_failed - failed_before;
  result.held = cluster.stats().writes_held - held_before;
  return result;
}

}  // namespace estuary::sim
