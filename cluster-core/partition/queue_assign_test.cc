// queue_assign.h: a group's K queues over the nodes holding its members.
// Complete, balanced (floor or ceil of each node's weighted share), sticky
// (a join or leave moves exactly as many queues as balance requires,
// checked against a brute-force minimum), deterministic and independent of
// input order; and the Assign writes with their epochs, applied to a
// QueueMachine.
#include "cluster-core/partition/queue_assign.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "cluster-core/partition/queue_machine.h"
#include "model/hlc.h"

namespace estuary::partition {
namespace {

// A draw in [0, n), the same on every platform (mt19937's output is fixed
// by the standard, its distributions are not).
uint32_t Draw(std::mt19937& random, uint32_t n) { return static_cast<uint32_t>(random() % n); }

std::vector<GroupNode> Equal(std::vector<NodeId> nodes) {
  std::vector<GroupNode> out;
  for (NodeId node : nodes) out.push_back({node, 1});
  return out;
}

std::map<NodeId, uint32_t> Counts(const QueueAssignment& assignment) {
  std::map<NodeId, uint32_t> counts;
  for (const auto& [queue, node] : assignment) ++counts[node];
  return counts;
}

// Every node gets floor or ceil of K * weight / total, and every queue one
// of the nodes.
void ExpectBalanced(const QueueAssignment& assignment, const std::vector<GroupNode>& nodes) {
  std::map<NodeId, uint64_t> weights;
  uint64_t total = 0;
  for (const GroupNode& node : nodes) {
    weights[node.node] += node.members;
    total += node.members;
  }
  const uint64_t count = assignment.size();
  auto counts = Counts(assignment);
  for (const auto& [node, weight] : weights) {
    const uint64_t floor = count * weight / total;
    const uint64_t ceil = floor + (count * weight % total != 0 ? 1 : 0);
    EXPECT_GE(counts[node], floor) << "node " << node << " weight " << weight << " of " << total;
    EXPECT_LE(counts[node], ceil) << "node " << node << " weight " << weight << " of " << total;
  }
  for (const auto& [queue, node] : assignment) EXPECT_TRUE(weights.contains(node)) << queue << " on " << node;
}

// The fewest queues any balanced assignment must move away from
// `previous`: over every choice of which nodes get their ceiling, a node
// keeps at most min(its previous queues, its quota).
size_t MinimumMoves(const std::vector<std::string>& queues, const std::vector<GroupNode>& nodes,
                    const QueueAssignment& previous) {
  std::vector<uint64_t> weight;
  std::vector<uint32_t> held;
  uint64_t total = 0;
  for (const GroupNode& node : nodes) {
    weight.push_back(node.members);
    total += node.members;
    uint32_t count = 0;
    for (const std::string& queue : queues) {
      auto it = previous.find(queue);
      if (it != previous.end() && it->second == node.node) ++count;
    }
    held.push_back(count);
  }
  const uint64_t k = queues.size();
  size_t best = k;
  for (uint32_t mask = 0; mask < (1u << nodes.size()); ++mask) {
    uint64_t sum = 0;
    size_t kept = 0;
    bool valid = true;
    for (size_t i = 0; i < nodes.size(); ++i) {
      uint64_t quota = k * weight[i] / total;
      if (mask & (1u << i)) {
        if (k * weight[i] % total == 0) valid = false;
        ++quota;
      }
      sum += quota;
      kept += std::min<uint64_t>(quota, held[i]);
    }
    if (valid && sum == k) best = std::min(best, k - kept);
  }
  return best;
}

TEST(QueueAssign, EveryQueueHasOneConsumerWhenAnyNodeAndNoneWithout) {
  const auto queues = GroupQueueNames("g/f", 8);
  ASSERT_EQ(queues.size(), 8u);
  EXPECT_EQ(queues[3], "g/f/3");
  auto assignment = AssignQueues(queues, Equal({4, 9}), {});
  ASSERT_EQ(assignment.size(), 8u);
  for (const auto& [queue, node] : assignment) EXPECT_TRUE(node == 4 || node == 9) << queue;

  auto nobody = AssignQueues(queues, {}, assignment);
  ASSERT_EQ(nobody.size(), 8u);
  for (const auto& [queue, node] : nobody) EXPECT_EQ(node, 0) << queue;
  EXPECT_EQ(AssignQueues(queues, {{0, 5}, {3, 0}}, assignment), nobody) << "node 0 and weight 0 are no nodes";
  EXPECT_TRUE(AssignQueues({}, Equal({1}), {}).empty());
  EXPECT_EQ(AssignQueues({"a", "a", "b"}, Equal({1}), {}).size(), 2u) << "a name listed twice is one queue";
}

TEST(QueueAssign, EqualWeightsGiveFloorOrCeilOfKOverN) {
  for (uint32_t k = 1; k <= 20; ++k) {
    for (NodeId n = 1; n <= 7; ++n) {
      std::vector<NodeId> ids;
      for (NodeId i = 1; i <= n; ++i) ids.push_back(static_cast<NodeId>(i * 3));
      auto assignment = AssignQueues(GroupQueueNames("grp", k), Equal(ids), {});
      auto counts = Counts(assignment);
      for (NodeId id : ids) {
        EXPECT_GE(counts[id], k / n) << k << " queues over " << n;
        EXPECT_LE(counts[id], (k + n - 1) / n) << k << " queues over " << n;
      }
    }
  }
}

TEST(QueueAssign, WeightsGiveFloorOrCeilOfTheWeightedShare) {
  std::mt19937 random(7);
  for (int round = 0; round < 300; ++round) {
    const uint32_t k = 1 + Draw(random, 24);
    std::vector<GroupNode> nodes;
    const uint32_t n = 1 + Draw(random, 6);
    for (uint32_t i = 0; i < n; ++i) nodes.push_back({static_cast<NodeId>(1 + i), 1 + Draw(random, 9)});
    ExpectBalanced(AssignQueues(GroupQueueNames("w", k), nodes, {}), nodes);
  }
  // 10 queues, weights 3:1: 7.5 and 2.5 -> 7 or 8, 2 or 3.
  auto counts = Counts(AssignQueues(GroupQueueNames("w", 10), {{1, 3}, {2, 1}}, {}));
  EXPECT_TRUE((counts[1] == 8 && counts[2] == 2) || (counts[1] == 7 && counts[2] == 3));
}

TEST(QueueAssign, AJoinTakesOnlyItsShareAndALeaveMovesOnlyTheLeaversQueues) {
  const auto queues = GroupQueueNames("orders", 12);
  auto three = AssignQueues(queues, Equal({1, 2, 3}), {});
  auto four = AssignQueues(queues, Equal({1, 2, 3, 4}), three);
  EXPECT_EQ(CountMoved(three, four), 3u);
  for (const auto& [queue, node] : four) {
    if (node != 4) {
      EXPECT_EQ(three[queue], node) << queue << " moved between two nodes that stayed";
    }
  }
  auto back = AssignQueues(queues, Equal({1, 2, 3}), four);
  EXPECT_EQ(CountMoved(four, back), 3u) << "only node 4's queues move";
  for (const auto& [queue, node] : four) {
    if (node != 4) {
      EXPECT_EQ(back[queue], node);
    }
  }
  EXPECT_EQ(AssignQueues(queues, Equal({1, 2, 3}), back), back) << "nothing changed: nothing moves";
}

// Random joins, leaves and weight changes: every step balanced, and no
// more moves than the brute-force minimum over all balanced assignments.
TEST(QueueAssign, MovesAreMinimalForTheBalance) {
  const uint32_t seed = 20261130;
  std::mt19937 random(seed);
  for (int run = 0; run < 40; ++run) {
    const auto queues = GroupQueueNames("run" + std::to_string(run), 1 + Draw(random, 16));
    std::map<NodeId, uint32_t> present;
    QueueAssignment assignment;
    for (int step = 0; step < 25; ++step) {
      const NodeId node = static_cast<NodeId>(1 + Draw(random, 8));
      if (present.contains(node) && Draw(random, 2) == 0) {
        present.erase(node);
      } else {
        present[node] = run % 2 == 0 ? 1 : 1 + Draw(random, 5);
      }
      std::vector<GroupNode> nodes;
      for (const auto& [id, weight] : present) nodes.push_back({id, weight});
      auto next = AssignQueues(queues, nodes, assignment);
      if (!nodes.empty()) {
        ExpectBalanced(next, nodes);
        EXPECT_EQ(CountMoved(assignment, next), MinimumMoves(queues, nodes, assignment))
            << "seed " << seed << " run " << run << " step " << step;
      }
      assignment = std::move(next);
    }
  }
}

TEST(QueueAssign, TheSameInputInAnyOrderGivesTheSameAssignment) {
  std::mt19937 random(11);
  auto queues = GroupQueueNames("$share/g/f", 13);
  const std::vector<GroupNode> nodes = {{5, 2}, {1, 1}, {9, 3}, {2, 1}};
  QueueAssignment previous = {{"$share/g/f/0", 9}, {"$share/g/f/1", 9}, {"$share/g/f/7", 7}, {"other", 1}};
  const auto expected = AssignQueues(queues, nodes, previous);
  for (int round = 0; round < 20; ++round) {
    std::shuffle(queues.begin(), queues.end(), random);
    // The same weights listed as one row per member, shuffled.
    std::vector<GroupNode> rows;
    for (const GroupNode& node : nodes) {
      for (uint32_t i = 0; i < node.members; ++i) rows.push_back({node.node, 1});
    }
    std::shuffle(rows.begin(), rows.end(), random);
    EXPECT_EQ(AssignQueues(queues, rows, previous), expected) << "round " << round;
  }
}

// Pins the hash contract: every node and build must compute this exact
// answer (a change here changes where every group's queues are consumed
// during a rolling upgrade).
TEST(QueueAssign, AnswerIsPinnedAcrossBuilds) {
  auto assignment = AssignQueues(GroupQueueNames("g", 5), Equal({1, 2, 3}), {});
  std::string pinned;
  for (const auto& [queue, node] : assignment) pinned += queue + "=" + std::to_string(node) + " ";
  EXPECT_EQ(pinned, "g/0=2 g/1=1 g/2=3 g/3=2 g/4=1 ");
}

TEST(QueueAssign, WritesRaiseTheEpochOnlyWhereTheConsumerChanges) {
  const std::map<std::string, QueueConsumer, std::less<>> recorded = {
      {"g/0", {1, 4}}, {"g/1", {2, 9}}, {"g/2", {0, 3}}};
  const QueueAssignment next = {{"g/0", 1}, {"g/1", 3}, {"g/2", 2}, {"g/3", 2}};
  const std::vector<QueueAssignWrite> expected = {{"g/1", 3, 10}, {"g/2", 2, 4}, {"g/3", 2, 1}};
  EXPECT_EQ(AssignWrites(recorded, next), expected);
  const QueueAssignment nobody = {{"g/0", 0}, {"g/1", 2}};
  EXPECT_EQ(AssignWrites(recorded, nobody), (std::vector<QueueAssignWrite>{{"g/0", 0, 5}}));
}

raft::Entry EntryOf(const std::string& bytes) {
  raft::Entry entry;
  entry.index = 1;
  entry.term = 1;
  entry.timestamp = HybridLogicalClock::Pack(1'800'000'000'000, 0);
  entry.data.assign(bytes.begin(), bytes.end());
  return entry;
}

// The writes applied to the machine take, and a write computed from a state
// that has changed since is refused: the epoch is a compare-and-set.
TEST(QueueAssign, WritesApplyAndAStaleOneIsRefused) {
  QueueMachine machine([] { return int64_t{1'800'000'000'000}; });
  const auto queues = GroupQueueNames("g", 4);
  auto recorded = [&] {
    std::map<std::string, QueueConsumer, std::less<>> out;
    for (const QueueStats& stats : machine.Stats()) out[stats.name] = {stats.consumer, stats.epoch};
    return out;
  };
  auto first = AssignQueues(queues, Equal({1, 2}), {});
  for (const QueueAssignWrite& write : AssignWrites(recorded(), first)) {
    EXPECT_EQ(machine.Apply(EntryOf(EncodeQueueAssign(write.queue, write.node, write.epoch))), "1");
  }
  auto before = recorded();
  auto second = AssignQueues(queues, Equal({1, 2, 3}), first);
  auto writes = AssignWrites(before, second);
  ASSERT_EQ(writes.size(), 1u) << "one queue moves to the new node";
  // Another node computed a different change from the same state and
  // committed first: ours must not undo it.
  const QueueAssignWrite& ours = writes.front();
  const NodeId theirs = ours.node == 3 ? 2 : 3;
  EXPECT_EQ(machine.Apply(EntryOf(EncodeQueueAssign(ours.queue, theirs, ours.epoch))), "1");
  EXPECT_EQ(machine.Apply(EntryOf(EncodeQueueAssign(ours.queue, ours.node, ours.epoch))), "0");
  EXPECT_EQ(recorded()[ours.queue].node, theirs);
}

}  // namespace
}  // namespace estuary::partition
