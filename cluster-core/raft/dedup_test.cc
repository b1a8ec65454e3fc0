// The de-duplication window on its own, and retried writes across a leader
// change on a simulated cluster.
#include "cluster-core/raft/dedup.h"

#include <gtest/gtest.h>

#include "cluster-core/sim/scenario.h"
#include "cluster-core/sim/sim_cluster.h"
#include "model/hlc.h"

namespace estuary::raft {
namespace {

Entry Write(Index index, uint64_t ms, uint64_t producer, uint64_t sequence) {
  return Entry{.term = 1,
               .index = index,
               .timestamp = HybridLogicalClock::Pack(ms, 0),
               .type = EntryType::kNormal,
               .write_id = WriteId{producer, sequence},
               .data = {}};
}

TEST(DedupWindow, SameIdWithinTheWindowIsADuplicate) {
  DedupWindow window(1'000);
  EXPECT_FALSE(window.Apply(Write(1, 10'000, 7, 1)));
  EXPECT_FALSE(window.Apply(Write(2, 10'001, 7, 2)));  // next sequence
  EXPECT_FALSE(window.Apply(Write(3, 10'002, 8, 1)));  // other producer
  EXPECT_TRUE(window.Apply(Write(4, 10'500, 7, 1)));   // retry
  EXPECT_TRUE(window.Apply(Write(5, 11'000, 7, 1)));   // retry at the edge
  EXPECT_FALSE(window.Apply(Write(6, 11'000, 0, 1)));  // no id: never a duplicate
  EXPECT_FALSE(window.Apply(Write(7, 11'000, 0, 1)));
}

TEST(DedupWindow, ExpiresByEntryTimestamp) {
  DedupWindow window(1'000);
  EXPECT_FALSE(window.Apply(Write(1, 10'000, 7, 1)));
  EXPECT_FALSE(window.Apply(Write(2, 10'600, 7, 2)));
  // 1,001 ms after the first write (by entry timestamps): forgotten.
  EXPECT_FALSE(window.Apply(Write(3, 11'001, 7, 1)));
  EXPECT_TRUE(window.Apply(Write(4, 11'002, 7, 2)));
  EXPECT_EQ(window.size(), 2u);  // (7,2) and the re-admitted (7,1)
}

TEST(DedupWindow, RecordsRestoreTheSameAnswers) {
  DedupWindow window(1'000);
  window.Apply(Write(1, 10'000, 7, 1));
  window.Apply(Write(2, 10'400, 9, 3));
  DedupWindow copy(1'000);
  copy.Restore(window.Records());
  EXPECT_EQ(copy.Records(), window.Records());
  EXPECT_TRUE(copy.Apply(Write(3, 10'900, 9, 3)));
  EXPECT_FALSE(copy.Apply(Write(4, 11'200, 7, 1)));  // expired in the copy too
}

// A write reaches a majority but its acknowledgement never reaches the
// leader, which then crashes; the client retries on the new leader.
// Returns how many times the value took effect.
// Calls `attempt` every 10 ms until it succeeds (at most `ms`); RunUntil
// would evaluate it once more after success.
template <typename Attempt>
bool Eventually(sim::SimCluster& cluster, Attempt attempt, uint64_t ms) {
  for (uint64_t waited = 0; waited <= ms; waited += 10) {
    if (attempt()) return true;
    cluster.RunFor(10);
  }
  return false;
}

size_t RetryAfterLostAcknowledgement(Mode mode) {
  sim::SimOptions options = sim::DefaultSimOptions(11, 3, 0, mode);
  options.drop_per_mille = 0;
  options.duplicate_per_mille = 0;
  sim::SimCluster cluster(options);
  EXPECT_TRUE(cluster.RunUntil([&] { return cluster.Leader().has_value(); }, 10'000));
  cluster.RunFor(500);  // every follower in the replicate state
  const NodeId old_leader = *cluster.Leader();
  std::optional<uint64_t> value;
  EXPECT_TRUE(Eventually(cluster, [&] { return (value = cluster.Propose(old_leader)).has_value(); },
                         2'000));
  for (NodeId id : cluster.ids()) {
    if (id != old_leader) cluster.Cut(id, old_leader);  // acknowledgements are lost
  }
  cluster.RunFor(100);  // the entry reaches both followers
  EXPECT_FALSE(cluster.acked().contains(*value));
  cluster.Crash(old_leader);
  cluster.Heal();
  EXPECT_TRUE(cluster.RunUntil(
      [&] {
        auto leader = cluster.Leader();
        return leader && *leader != old_leader;
      },
      10'000));
  const NodeId new_leader = *cluster.Leader();
  // The new leader commits the old entry with its no-op; the client,
  // having heard nothing, retries with the same write id.
  EXPECT_TRUE(Eventually(cluster, [&] { return cluster.Retry(new_leader, *value); }, 2'000));
  EXPECT_TRUE(cluster.RunUntil([&] { return cluster.acked().contains(*value); }, 5'000));
  cluster.Restart(old_leader);
  cluster.RunFor(1'000);
  EXPECT_TRUE(cluster.ok()) << (cluster.ok() ? "" : cluster.violations().front());
  return cluster.AppliedCount(*value);
}

TEST(RaftDedup, RetryAcrossALeaderChangeIsAppliedOnce) {
  EXPECT_EQ(RetryAfterLostAcknowledgement(Mode::kTimestamp), 1u);
}

// The same schedule without de-duplication applies the write twice: this
// is what the window prevents (and shows the test can fail).
TEST(RaftDedup, PlainModeAppliesTheRetryAgain) {
  EXPECT_EQ(RetryAfterLostAcknowledgement(Mode::kPlain), 2u);
}

// A retry of a write that never reached the log takes effect once, and a
// write retried while held in a leadership transfer takes effect once.
TEST(RaftDedup, RetryOfALostWriteAndOfAHeldWriteTakeEffectOnce) {
  sim::SimOptions options = sim::DefaultSimOptions(12, 3, 0, Mode::kTimestamp);
  options.drop_per_mille = 0;
  options.duplicate_per_mille = 0;
  sim::SimCluster cluster(options);
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Leader().has_value(); }, 10'000));
  const NodeId leader = *cluster.Leader();
  std::optional<uint64_t> lost;
  ASSERT_TRUE(Eventually(cluster, [&] { return (lost = cluster.Propose(leader)).has_value(); },
                         2'000));
  cluster.Crash(leader);  // before the entry was written anywhere
  ASSERT_TRUE(cluster.RunUntil(
      [&] {
        auto next = cluster.Leader();
        return next && *next != leader;
      },
      10'000));
  const NodeId next = *cluster.Leader();
  ASSERT_TRUE(Eventually(cluster, [&] { return cluster.Retry(next, *lost); }, 2'000));
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.acked().contains(*lost); }, 5'000));
  EXPECT_EQ(cluster.AppliedCount(*lost), 1u);

  cluster.Restart(leader);
  cluster.RunFor(500);
  const NodeId target = next % 3 + 1;
  ASSERT_TRUE(cluster.Transfer(next, target).has_value());
  auto held = cluster.Propose(next);
  ASSERT_TRUE(held.has_value());
  ASSERT_TRUE(cluster.Retry(next, *held));  // impatient client: twice
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.acked().contains(*held); }, 5'000));
  cluster.RunFor(500);
  EXPECT_EQ(cluster.AppliedCount(*held), 1u);
  cluster.CheckLogs();
  cluster.CheckAcked();
  EXPECT_TRUE(cluster.ok()) << (cluster.ok() ? "" : cluster.violations().front());
}

}  // namespace
}  // namespace estuary::raft
