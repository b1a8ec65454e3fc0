// MetaState: the commands' rules, deterministic snapshots, observers.
#include "cluster-core/meta/meta_state.h"

#include <gtest/gtest.h>

namespace estuary::meta {
namespace {

RouteKey R(std::string filter, std::string share = "") { return {std::move(filter), std::move(share)}; }

raft::Entry EntryOf(const Command& command) {
  raft::Entry entry;
  entry.data = EncodeCommand(command);
  return entry;
}

TEST(MetaState, CommandsRoundTrip) {
  std::vector<Command> commands = {
      RouteReset{2, 7, 1, true, {R("a/#"), R("b", "g")}},
      RouteDelta{2, 7, 2, {R("c")}, {R("a/#")}},
      MemberUpsert{{3, "127.0.0.1:7000", 5}},
      MemberGone{3},
      FreshCleared{2, 7},
      CommitNotice{},
      PartitionOpen{5, {1, 2, 3}},
      PartitionLeaderPin{5, 2},
      PartitionLeaderPin{5, 0},
      NodeDrain{3, true},
      NodeDrain{3, false},
  };
  for (const Command& command : commands) {
    auto decoded = DecodeCommand(EncodeCommand(command));
    ASSERT_TRUE(decoded);
    EXPECT_EQ(EncodeCommand(*decoded), EncodeCommand(command));
  }
  EXPECT_FALSE(DecodeCommand({}));
  EXPECT_FALSE(DecodeCommand({9}));
  auto bytes = EncodeCommand(commands[0]);
  bytes.pop_back();
  EXPECT_FALSE(DecodeCommand(bytes));
}

TEST(MetaState, DeltaNeedsMatchingBootAndNextSequence) {
  MetaState state;
  std::vector<std::tuple<NodeId, uint64_t, uint64_t>> refused;
  state.set_refused_observer([&](NodeId node, uint64_t boot, uint64_t seq) { refused.emplace_back(node, boot, seq); });
  EXPECT_FALSE(state.ApplyCommand(RouteDelta{2, 7, 1, {R("x")}, {}}));  // no reset yet
  EXPECT_TRUE(state.ApplyCommand(RouteReset{2, 7, 1, false, {R("a")}}));
  EXPECT_TRUE(state.ApplyCommand(RouteDelta{2, 7, 2, {R("b")}, {R("a")}}));
  EXPECT_FALSE(state.ApplyCommand(RouteDelta{2, 7, 4, {R("c")}, {}}));  // a gap
  EXPECT_FALSE(state.ApplyCommand(RouteDelta{2, 6, 3, {R("c")}, {}}));  // an old boot
  EXPECT_EQ(refused.size(), 3u);
  EXPECT_EQ(state.RoutesOf(2)->routes, (std::set<RouteKey>{R("b")}));
  EXPECT_FALSE(state.ApplyCommand(RouteReset{2, 7, 1, false, {R("old")}}));  // a late retry
  EXPECT_EQ(state.RoutesOf(2)->routes, (std::set<RouteKey>{R("b")}));
}

TEST(MetaState, ResetFromANewBootReplacesEverything) {
  MetaState state;
  std::vector<RouteKey> added, removed;
  state.set_route_observer([&](NodeId, const std::vector<RouteKey>& a, const std::vector<RouteKey>& r) {
    added.insert(added.end(), a.begin(), a.end());
    removed.insert(removed.end(), r.begin(), r.end());
  });
  state.ApplyCommand(RouteReset{2, 7, 1, false, {R("a"), R("b")}});
  state.ApplyCommand(RouteDelta{2, 7, 2, {R("c")}, {}});
  added.clear();
  state.ApplyCommand(RouteReset{2, 8, 1, true, {R("b"), R("d")}});
  EXPECT_EQ(state.RoutesOf(2)->routes, (std::set<RouteKey>{R("b"), R("d")}));
  EXPECT_TRUE(state.RoutesOf(2)->fresh);
  EXPECT_EQ(added, (std::vector<RouteKey>{R("d")}));
  EXPECT_EQ(removed, (std::vector<RouteKey>{R("a"), R("c")}));
  // `fresh` belongs to the boot: a later reset of it keeps the flag.
  state.ApplyCommand(RouteReset{2, 8, 2, false, {R("b")}});
  EXPECT_TRUE(state.RoutesOf(2)->fresh);
  EXPECT_TRUE(state.ApplyCommand(FreshCleared{2, 8}));
  EXPECT_FALSE(state.RoutesOf(2)->fresh);
}

TEST(MetaState, MemberGoneDropsRoutesAndPlacementFollowsMembers) {
  MetaState state(64, 2);
  EXPECT_EQ(state.placement().epoch, 0u);
  for (NodeId node = 1; node <= 3; ++node) state.ApplyCommand(MemberUpsert{{node, "n", 1}});
  EXPECT_EQ(state.placement().nodes, (std::vector<NodeId>{1, 2, 3}));
  ASSERT_EQ(state.placement().assignment.size(), 64u);
  EXPECT_EQ(state.placement().assignment[0].size(), 2u);
  const uint64_t epoch = state.placement().epoch;
  state.ApplyCommand(MemberUpsert{{2, "n2", 2}});  // an address change moves nothing
  EXPECT_EQ(state.placement().epoch, epoch);
  state.ApplyCommand(RouteReset{3, 1, 1, false, {R("t")}});
  std::vector<RouteKey> removed;
  state.set_route_observer([&](NodeId node, const std::vector<RouteKey>&, const std::vector<RouteKey>& r) {
    if (node == 3) removed = r;
  });
  state.ApplyCommand(MemberGone{3});
  EXPECT_EQ(removed, (std::vector<RouteKey>{R("t")}));
  EXPECT_EQ(state.RoutesOf(3), nullptr);
  EXPECT_EQ(state.placement().epoch, epoch + 1);
  EXPECT_EQ(state.placement().nodes, (std::vector<NodeId>{1, 2}));
}

TEST(MetaState, SnapshotRestoresEqualStateAndTellsTheDifference) {
  MetaState a(32, 3);
  a.Apply(EntryOf(MemberUpsert{{1, "n1", 1}}));
  a.Apply(EntryOf(MemberUpsert{{2, "n2", 1}}));
  a.Apply(EntryOf(RouteReset{1, 5, 1, false, {R("x"), R("y", "g")}}));
  a.Apply(EntryOf(RouteReset{2, 6, 3, true, {R("z")}}));
  MetaState b(32, 3);
  b.ApplyCommand(RouteReset{2, 1, 1, false, {R("stale")}});
  std::map<NodeId, std::pair<size_t, size_t>> seen;
  b.set_route_observer([&](NodeId node, const std::vector<RouteKey>& added, const std::vector<RouteKey>& removed) {
    seen[node] = {added.size(), removed.size()};
  });
  ASSERT_TRUE(b.Restore(a.Snapshot()));
  EXPECT_EQ(b.Snapshot(), a.Snapshot());
  EXPECT_EQ(b.routes(), a.routes());
  EXPECT_EQ(b.placement().assignment, a.placement().assignment);
  EXPECT_EQ(b.placement().epoch, a.placement().epoch);
  EXPECT_EQ(seen[1], (std::pair<size_t, size_t>{2, 0}));
  EXPECT_EQ(seen[2], (std::pair<size_t, size_t>{1, 1}));
  auto bytes = a.Snapshot();
  bytes.push_back(0);
  EXPECT_FALSE(b.Restore(bytes));
}

// Planned leadership moves (docs/partitions.md): a pin needs an open
// partition, survives snapshots, and dies with its node; so does a drain.
TEST(MetaState, LeaderPinsAndDrainsFollowTheirRulesAndSurviveSnapshots) {
  MetaState state(16, 3);
  for (NodeId node = 1; node <= 3; ++node) state.ApplyCommand(MemberUpsert{{node, "n", 1}});
  int observed = 0;
  state.set_partitions_observer([&] { ++observed; });
  EXPECT_FALSE(state.ApplyCommand(PartitionLeaderPin{4, 2})) << "a pin for a partition not open";
  EXPECT_EQ(state.LeaderPinOf(4), 0);
  ASSERT_TRUE(state.ApplyCommand(PartitionOpen{4, {1, 2, 3}}));
  ASSERT_TRUE(state.ApplyCommand(PartitionOpen{7, {2, 3, 1}}));
  observed = 0;
  EXPECT_TRUE(state.ApplyCommand(PartitionLeaderPin{4, 2}));
  EXPECT_TRUE(state.ApplyCommand(PartitionLeaderPin{7, 3}));
  EXPECT_TRUE(state.ApplyCommand(NodeDrain{1, true}));
  EXPECT_TRUE(state.ApplyCommand(NodeDrain{3, true}));
  EXPECT_TRUE(state.ApplyCommand(NodeDrain{3, true})) << "draining twice is no error";
  EXPECT_EQ(observed, 4) << "the observer hears every change, not the repeat";
  EXPECT_FALSE(state.ApplyCommand(NodeDrain{0, true}));
  EXPECT_EQ(state.LeaderPinOf(4), 2);
  EXPECT_EQ(state.draining(), (std::set<NodeId>{1, 3}));

  MetaState copy(16, 3);
  ASSERT_TRUE(copy.Restore(state.Snapshot()));
  EXPECT_EQ(copy.Snapshot(), state.Snapshot());
  EXPECT_EQ(copy.LeaderPinOf(4), 2);
  EXPECT_EQ(copy.LeaderPinOf(7), 3);
  EXPECT_TRUE(copy.IsDraining(1));

  // The node leaves: its pins and its drain go with it.
  EXPECT_TRUE(state.ApplyCommand(MemberGone{3}));
  EXPECT_EQ(state.LeaderPinOf(7), 0);
  EXPECT_EQ(state.LeaderPinOf(4), 2);
  EXPECT_EQ(state.draining(), (std::set<NodeId>{1}));
  EXPECT_TRUE(state.ApplyCommand(NodeDrain{1, false}));
  EXPECT_TRUE(state.ApplyCommand(PartitionLeaderPin{4, 0}));
  EXPECT_EQ(state.LeaderPinOf(4), 0);
  EXPECT_TRUE(state.draining().empty());
}

// A version 2 snapshot (before pins and drains) is still read.
TEST(MetaState, AVersionTwoSnapshotIsStillRead) {
  MetaState state(16, 3);
  state.ApplyCommand(MemberUpsert{{1, "n1", 1}});
  state.ApplyCommand(RouteReset{1, 5, 1, false, {R("x")}});
  state.ApplyCommand(PartitionOpen{3, {1}});
  std::vector<uint8_t> bytes = state.Snapshot();
  ASSERT_EQ(bytes[0], 3);
  // Version 3 adds the open partition's u32 pin, then an empty u32 count of
  // draining nodes: both at the end here.
  bytes[0] = 2;
  bytes.resize(bytes.size() - 8);
  MetaState old(16, 3);
  ASSERT_TRUE(old.Restore(bytes));
  EXPECT_EQ(old.Snapshot(), state.Snapshot());
  EXPECT_EQ(old.open_partitions().at(3).replicas, (std::vector<NodeId>{1}));
  bytes[0] = 4;
  EXPECT_FALSE(old.Restore(bytes)) << "a version from the future";
}

}  // namespace
}  // namespace estuary::meta
