// The Raft paper's Figure 8, scripted message by message on bare Raft
// nodes: a leader must not commit an entry of an earlier term by counting
// the replicas that hold it, because a later leader may still overwrite
// it. If MaybeCommit counted old-term entries, node 1 would report index 2
// committed in step (c) and node 5 would overwrite it in step (d).
#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <map>
#include <memory>

#include "cluster-core/raft/raft.h"

namespace estuary::raft {
namespace {

// Five bare nodes; every Ready is persisted at once, messages wait in a
// queue until the test delivers or drops them.
class Harness {
 public:
  Harness() {
    for (NodeId id = 1; id <= 5; ++id) Start(id);
  }

  void Start(NodeId id) {
    Options options;
    options.id = id;
    options.pre_vote = false;
    options.check_quorum = false;  // no stickiness: votes follow the log rule only
    options.max_append_entries = 1;  // one entry per append, so the test picks which land
    options.random_seed = id;
    Disk& disk = disks_[id];
    Storage storage{disk.hard_state, disk.snapshot, disk.log, Config{.voters = {1, 2, 3, 4, 5}}};
    nodes_[id] = std::make_unique<Raft>(options, storage, now_);
    Handle(id, nodes_[id]->Tick(now_));
  }

  void Crash(NodeId id) { nodes_.erase(id); }
  Raft& node(NodeId id) { return *nodes_.at(id); }

  // Times out `id`'s election at once.
  void Campaign(NodeId id) {
    now_ += 10'000;
    Handle(id, nodes_.at(id)->Tick(now_));
  }

  Index Propose(NodeId id, uint8_t byte) {
    auto proposed = nodes_.at(id)->Propose({byte}, now_);
    EXPECT_TRUE(proposed.has_value());
    if (!proposed) return 0;
    const Index index = proposed->index;
    Handle(id, std::move(proposed->ready));
    return index;
  }

  // Delivers queued messages that `allow` accepts (and those they cause)
  // until none is left; drops the others and those to crashed nodes.
  void Deliver(const std::function<bool(const Message&)>& allow) {
    while (!queue_.empty()) {
      Message message = std::move(queue_.front());
      queue_.pop_front();
      if (!nodes_.contains(message.to) || !allow(message)) continue;
      Handle(message.to, nodes_.at(message.to)->Step(message, now_));
    }
  }

  // Everything any node ever reported committed, by index: (node, term).
  const std::multimap<Index, std::pair<NodeId, Term>>& committed() const { return committed_; }

  Term DiskTermAt(NodeId id, Index index) const {
    const Disk& disk = disks_.at(id);
    return index >= 1 && index <= disk.log.size() ? disk.log[index - 1].term : 0;
  }

 private:
  struct Disk {
    HardState hard_state{};
    Snapshot snapshot{};
    std::vector<Entry> log{};  // no compaction in this test: index i at log[i-1]
  };

  void Handle(NodeId id, Ready ready) {
    while (!ready.Empty()) {
      Disk& disk = disks_[id];
      if (ready.hard_state) disk.hard_state = *ready.hard_state;
      if (!ready.entries.empty()) {
        disk.log.resize(ready.entries.front().index - 1);
        for (const Entry& entry : ready.entries) disk.log.push_back(entry);
      }
      for (Message& message : ready.messages) queue_.push_back(std::move(message));
      for (const Entry& entry : ready.committed) {
        committed_.insert({entry.index, {id, entry.term}});
      }
      ready = nodes_.at(id)->Advance(ready);
    }
  }

  uint64_t now_ = 1'000;
  std::map<NodeId, Disk> disks_;
  std::map<NodeId, std::unique_ptr<Raft>> nodes_;
  std::deque<Message> queue_;
  std::multimap<Index, std::pair<NodeId, Term>> committed_;
};

bool Between(const Message& message, std::initializer_list<NodeId> nodes) {
  bool from = false;
  bool to = false;
  for (NodeId id : nodes) {
    from = from || message.from == id;
    to = to || message.to == id;
  }
  return from && to;
}

bool CarriesIndex(const Message& message, Index index) {
  for (const Entry& entry : message.entries) {
    if (entry.index == index) return true;
  }
  return false;
}

TEST(RaftFigure8, LeaderDoesNotCommitAnOldTermEntryByCountingReplicas) {
  Harness h;
  // Term 1: node 1 leads; its no-op (index 1) commits everywhere.
  h.Campaign(1);
  h.Deliver([](const Message&) { return true; });
  ASSERT_EQ(h.node(1).role(), Role::kLeader);
  const Term first_term = h.node(1).term();
  ASSERT_EQ(h.node(1).commit(), 1u);

  // (a) Node 1 replicates X at index 2 to node 2 only, then crashes.
  ASSERT_EQ(h.Propose(1, 'X'), 2u);
  h.Deliver([](const Message& m) { return Between(m, {1, 2}); });
  ASSERT_EQ(h.DiskTermAt(2, 2), first_term);
  h.Crash(1);

  // (b) Node 5 wins with votes from 3 and 4, appends its no-op at index 2
  // (a later term) locally only, and crashes.
  h.Campaign(5);
  h.Deliver([](const Message& m) {
    return m.type == MessageType::kVote || m.type == MessageType::kVoteResponse;
  });
  ASSERT_EQ(h.node(5).role(), Role::kLeader);
  const Term second_term = h.node(5).term();
  ASSERT_EQ(h.DiskTermAt(5, 2), second_term);
  h.Deliver([](const Message&) { return false; });
  h.Crash(5);

  // (c) Node 1 restarts and wins a later term with votes from 2, 3 and 4.
  // It brings node 3 up to index 2 (X, from the first term) but nobody
  // past that: X is now on a majority (1, 2, 3), its own no-op at index 3
  // on nodes 1 and 2 only.
  h.Start(1);
  // Node 3 rejects the first probe (it lacks index 2), takes index 2 alone,
  // and every later append carrying index 3 to it is lost.
  const auto step_c = [&h](const Message& m) {
    if (m.type == MessageType::kVote || m.type == MessageType::kVoteResponse) return true;
    if (Between(m, {1, 2})) return true;
    return Between(m, {1, 3}) && (h.DiskTermAt(3, 2) == 0 || !CarriesIndex(m, 3));
  };
  for (int attempt = 0; attempt < 3 && h.node(1).role() != Role::kLeader; ++attempt) {
    h.Campaign(1);
    h.Deliver(step_c);
  }
  ASSERT_EQ(h.node(1).role(), Role::kLeader);
  const Term third_term = h.node(1).term();
  ASSERT_GT(third_term, second_term);
  ASSERT_EQ(h.DiskTermAt(1, 2), first_term);
  ASSERT_EQ(h.DiskTermAt(2, 2), first_term);
  ASSERT_EQ(h.DiskTermAt(3, 2), first_term);  // the dangerous state: X on a majority
  ASSERT_EQ(h.DiskTermAt(3, 3), 0u);
  // Raft 5.4.2: X is not committed by counting; only an entry of the
  // leader's own term could commit it.
  EXPECT_EQ(h.node(1).commit(), 1u);

  // (d) Node 1 crashes; node 5 (last entry from the second term) wins with
  // votes from 3 and 4 and overwrites index 2 everywhere it reaches.
  h.Crash(1);
  h.Start(5);
  for (int attempt = 0; attempt < 4 && h.node(5).role() != Role::kLeader; ++attempt) {
    h.Campaign(5);
    h.Deliver([](const Message&) { return true; });
  }
  ASSERT_EQ(h.node(5).role(), Role::kLeader);
  for (NodeId id : {3, 4, 5}) EXPECT_EQ(h.DiskTermAt(id, 2), second_term) << "node " << id;
  ASSERT_GE(h.node(5).commit(), 3u);

  // Safety: every node that reported index i committed reported the same
  // term for it. A weakened commit rule fails here (node 1 reported X).
  for (const auto& [index, who] : h.committed()) {
    const auto [first, last] = h.committed().equal_range(index);
    for (auto it = first; it != last; ++it) {
      EXPECT_EQ(it->second.second, who.second)
          << "index " << index << " committed with term " << who.second << " on node "
          << who.first << " and term " << it->second.second << " on node " << it->second.first;
    }
  }
  const auto x = h.committed().equal_range(2);
  for (auto it = x.first; it != x.second; ++it) EXPECT_EQ(it->second.second, second_term);
}

}  // namespace
}  // namespace estuary::raft
