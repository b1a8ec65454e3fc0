#pragma once
// Internal to partition_host.cc and partition_leadership.cc (not a public
// header): PartitionHost::Replica, one partition's group on this node.
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cluster-core/partition/partition_host.h"

namespace estuary::partition {

// One partition's group on this node: the machine, the results of recent
// entries, and the callbacks waiting for an index to be applied here.
class PartitionHost::Replica final : public meta::StateMachine {
 public:
  Replica(PartitionHost& host, std::unique_ptr<PartitionMachine> machine) : host_(host), machine_(std::move(machine)) {}

  void Apply(const raft::Entry& entry) override {
    std::string result = machine_->Apply(entry);
    // Kept by write id: a write retried across a leader change may be
    // answered with the index of its de-duplicated copy, never applied.
    if (entry.write_id.producer != 0 || entry.write_id.sequence != 0) {
      results_.emplace_back(entry.write_id, std::move(result));
      if (results_.size() > kResultsKept) results_.pop_front();
    }
    Fire(entry.index);
  }
  std::vector<uint8_t> Snapshot() const override { return machine_->Snapshot(); }
  bool Restore(const std::vector<uint8_t>& data) override {
    results_.clear();
    return machine_->Restore(data);
  }

  std::optional<std::string> ResultOf(const raft::WriteId& id) const {
    for (auto it = results_.rbegin(); it != results_.rend(); ++it) {
      if (it->first == id) return it->second;
    }
    return std::nullopt;
  }
  // `fn` runs on the loop once `index` is applied here.
  void WhenApplied(raft::Index index, std::function<void()> fn) {
    waiters_.emplace(index, std::move(fn));
    Fire(group->applied());
  }
  // Entries that never reach Apply (config changes, de-duplicated
  // retries) still move applied().
  void Sweep() { Fire(group->applied()); }

  PartitionMachine& machine() { return *machine_; }
  meta::RaftGroup* group = nullptr;
  // When this node was first seen leading in led_term (Reconcile).
  raft::Term led_term = 0;
  int64_t led_since_ms = 0;
  // Answers of writes proposed here, not given yet, with the term and role
  // (and leader) they were proposed in. A write a leadership transfer held (on the old
  // leader, or on the target while it campaigns) is applied by the new
  // leader but answered by the group only at its propose timeout (1 s):
  // once any of those has changed, ReleaseStranded answers it
  // not-leader instead, and the asker retries at once at the new leader,
  // where the write id finds the applied copy.
  struct Stranded {
    std::weak_ptr<PartitionCallback> once;
    raft::Term term;
    raft::Role role;
    raft::NodeId leader;
  };
  std::vector<Stranded> stranded;
  size_t stranded_pruned_at = 0;

 private:
  void Fire(raft::Index applied) {
    while (!waiters_.empty() && waiters_.begin()->first <= applied) {
      host_.host_.loop().Post(std::move(waiters_.begin()->second));
      waiters_.erase(waiters_.begin());
    }
  }

  PartitionHost& host_;
  std::unique_ptr<PartitionMachine> machine_;
  std::deque<std::pair<raft::WriteId, std::string>> results_;
  std::multimap<raft::Index, std::function<void()>> waiters_;
};

}  // namespace estuary::partition
