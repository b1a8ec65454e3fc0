// The metadata group on simulated time (SimLoop + SimTransport, seeded, no
// sleeps): bootstrap, route convergence, batching, crashes, restarts with
// and without stored state, a minority partition, snapshots.
#include "cluster-core/meta/meta_group.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <random>
#include <memory>
#include <optional>
#include <string>

#include "cluster-core/meta/sim_cluster_support.h"

namespace estuary::meta {
namespace {

RouteKey R(std::string filter, std::string share = "") { return {std::move(filter), std::move(share)}; }

// The metadata group alone on each node (sim_cluster_support.h).
class MetaCluster : public SimCluster<SimNode> {
 public:
  explicit MetaCluster(uint64_t seed, uint64_t snapshot_every = 1024, bool all_seeded = false)
      : SimCluster({.seed = seed, .partitions = 64, .snapshot_every = snapshot_every, .all_seeded = all_seeded}) {}

  void Start(NodeId id) {
    ASSERT_TRUE(StartMeta(id));
    FinishStart(id);
  }
  void WipeDisk(NodeId id) { WipeMetaDisk(id); }

  MetaGroup& group(NodeId id) { return meta(id); }
  const raft::Raft& raft(NodeId id) { return nodes_.at(id).meta->group().raft(); }

  std::optional<NodeId> Leader() { return LeaderBy(MetaRaft); }
  std::vector<raft::NodeId> Voters() { return VotersBy(MetaRaft); }
  // Every live node's copy holds exactly every live node's local routes
  // (and `node`'s boot), and every node's local routes are committed.
  bool Converged() {
    for (auto& [id, node] : nodes_) {
      if (!node.up) continue;
      if (!node.meta->routes_committed()) return false;
      for (auto& [other, peer] : nodes_) {
        if (!peer.up) continue;
        const NodeRoutes* routes = node.meta->state().RoutesOf(other);
        if (!routes || routes->boot != peer.boot || routes->routes != peer.meta->local_routes()) {
          return false;
        }
      }
    }
    return true;
  }
  std::string Describe() {
    std::string out;
    for (auto& [id, node] : nodes_) {
      if (!node.up) {
        out += "node " + std::to_string(id) + " down\n";
        continue;
      }
      const raft::Raft& r = raft(id);
      out += "node " + std::to_string(id) + " boot " + std::to_string(node.boot) + " role " +
             std::to_string(static_cast<int>(r.role())) + " term " + std::to_string(r.term()) + " leader " +
             std::to_string(r.leader()) + " last " + std::to_string(r.log().LastIndex()) + " commit " +
             std::to_string(r.commit()) + " applied " + std::to_string(node.meta->group().applied()) +
             " voters " + std::to_string(r.config().voters.size()) + " learners " +
             std::to_string(r.config().learners.size()) + " committed " +
             std::to_string(node.meta->routes_committed()) + " refused " +
             std::to_string(node.meta->group().counters().votes_refused) + "\n";
      for (auto& [other, record] : node.meta->state().routes()) {
        out += "   routes of " + std::to_string(other) + " boot " + std::to_string(record.boot) + " n " +
               std::to_string(record.routes.size()) + " fresh " + std::to_string(record.fresh) + "\n";
      }
    }
    return out;
  }
  bool Repaired(size_t voters) {
    auto leader = Leader();
    if (!leader || Voters().size() != voters) return false;
    const raft::Raft& r = raft(*leader);
    if (r.log().config_index() > r.commit()) return false;
    for (auto& [node, record] : group(*leader).state().routes()) {
      if (record.fresh) return false;
    }
    return true;
  }
  bool AllMembersKnown() {
    for (auto& [id, node] : nodes_) {
      if (!node.up) continue;
      for (auto& [other, peer] : nodes_) {
        if (peer.up && node.meta->state().members().count(other) == 0) return false;
      }
    }
    return true;
  }

 private:
  static const raft::Raft* MetaRaft(SimNode& node) { return &node.meta->group().raft(); }
};

void StartAll(MetaCluster& cluster, NodeId count) {
  for (NodeId id = 1; id <= count; ++id) cluster.Start(id);
}

std::vector<raft::NodeId> Ids(std::initializer_list<raft::NodeId> ids) { return ids; }

TEST(MetaGroup, ThreeNodesBootstrapThreeVoters) {
  for (uint64_t seed : {1, 2, 3}) {
    SCOPED_TRACE(seed);
    MetaCluster cluster(seed);
    StartAll(cluster, 3);
    ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Voters() == Ids({1, 2, 3}); }, 20'000));
    ASSERT_TRUE(cluster.RunUntil([&] { return cluster.AllMembersKnown() && cluster.Converged(); }, 10'000));
    // Every copy computed the same placement from the same members.
    for (NodeId id : {2, 3}) {
      EXPECT_EQ(cluster.group(id).state().placement().assignment,
                cluster.group(1).state().placement().assignment);
      EXPECT_EQ(cluster.group(id).state().placement().epoch, cluster.group(1).state().placement().epoch);
    }
    EXPECT_EQ(cluster.group(1).state().placement().nodes, (std::vector<NodeId>{1, 2, 3}));
  }
}

// Issue 24 point 1 (--bootstrap-expect): every node seeded, none founds
// until one is told to; the founder's late bootstrap forms the same three
// voters, and no group with state bootstraps again.
TEST(MetaGroup, Issue24LateBootstrapOfOneSeededNodeFormsOneCluster) {
  for (uint64_t seed : {1, 2}) {
    SCOPED_TRACE(seed);
    MetaCluster cluster(seed, 1024, /*all_seeded=*/true);
    StartAll(cluster, 3);
    cluster.RunFor(3000);
    EXPECT_FALSE(cluster.Leader().has_value());
    for (NodeId id : {1, 2, 3}) EXPECT_FALSE(cluster.group(id).HasState()) << id;
    ASSERT_TRUE(cluster.group(1).Bootstrap());
    EXPECT_TRUE(cluster.group(1).HasState());
    EXPECT_FALSE(cluster.group(1).Bootstrap());  // once
    ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Voters() == Ids({1, 2, 3}); }, 20'000));
    ASSERT_TRUE(cluster.RunUntil([&] { return cluster.AllMembersKnown() && cluster.Converged(); }, 10'000));
    for (NodeId id : {2, 3}) {
      EXPECT_TRUE(cluster.group(id).HasState()) << id;
      EXPECT_FALSE(cluster.group(id).Bootstrap()) << id;  // a joined node never founds
    }
    // A restart with its store keeps the founder's config and needs no decision.
    cluster.Crash(1);
    cluster.RunFor(500);
    cluster.Start(1);
    EXPECT_TRUE(cluster.group(1).HasState());
    EXPECT_FALSE(cluster.group(1).Bootstrap());
    ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Voters() == Ids({1, 2, 3}) && cluster.Converged(); }, 20'000));
  }
}

TEST(MetaGroup, FiveNodesHaveFiveVotersAndSixthIsALearner) {
  MetaCluster cluster(4);
  StartAll(cluster, 6);
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Voters() == Ids({1, 2, 3, 4, 5}); }, 30'000));
  ASSERT_TRUE(cluster.RunUntil(
      [&] {
        auto leader = cluster.Leader();
        return leader && cluster.raft(*leader).config().learners == Ids({6});
      },
      10'000));
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Converged(); }, 10'000));
}

TEST(MetaGroup, RoutesFromEveryNodeConvergeEverywhere) {
  MetaCluster cluster(5);
  StartAll(cluster, 3);
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Voters().size() == 3; }, 20'000));
  for (NodeId id = 1; id <= 3; ++id) {
    cluster.group(id).UpdateRoutes({R("sensors/" + std::to_string(id) + "/#"), R("all/+", "g")}, {});
  }
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Converged(); }, 10'000));
  EXPECT_EQ(cluster.group(3).state().route_count(), 6u);
  cluster.group(2).UpdateRoutes({}, {R("all/+", "g")});
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Converged(); }, 10'000));
  EXPECT_EQ(cluster.group(1).state().RoutesOf(2)->routes, (std::set<RouteKey>{R("sensors/2/#")}));
}

TEST(MetaGroup, RouteChangesAreBatchedOneProposalInFlight) {
  MetaCluster cluster(6);
  StartAll(cluster, 3);
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Voters().size() == 3 && cluster.Converged(); }, 20'000));
  const uint64_t before = cluster.group(3).counters().route_deltas;
  // 200 changes in one loop iteration, then 200 more while the first batch
  // is in flight: two proposals, not 400.
  for (int i = 0; i < 200; ++i) cluster.group(3).UpdateRoutes({R("t/" + std::to_string(i))}, {});
  cluster.RunFor(1);
  for (int i = 0; i < 200; ++i) {
    cluster.group(3).UpdateRoutes({R("u/" + std::to_string(i))}, {R("t/" + std::to_string(i))});
  }
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Converged(); }, 10'000));
  EXPECT_EQ(cluster.group(3).counters().route_deltas - before, 2u);
  EXPECT_EQ(cluster.group(1).state().RoutesOf(3)->routes.size(), 200u);
}

TEST(MetaGroup, LeaderCrashElectsAnotherWithRoutesIntact) {
  MetaCluster cluster(7);
  StartAll(cluster, 3);
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Voters().size() == 3; }, 20'000));
  for (NodeId id = 1; id <= 3; ++id) cluster.group(id).UpdateRoutes({R("n" + std::to_string(id))}, {});
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Converged(); }, 10'000));
  const NodeId old_leader = *cluster.Leader();
  const raft::Term old_term = cluster.raft(old_leader).term();
  cluster.Crash(old_leader);
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Leader().has_value(); }, 10'000));
  const NodeId leader = *cluster.Leader();
  EXPECT_NE(leader, old_leader);
  EXPECT_GT(cluster.raft(leader).term(), old_term);
  // The survivors still hold everybody's routes, the crashed node's too
  // until Membership calls it gone; and new changes commit.
  for (NodeId id = 1; id <= 3; ++id) {
    if (id == old_leader) continue;
    EXPECT_EQ(cluster.group(id).state().route_count(), 3u);
    cluster.group(id).UpdateRoutes({R("after/" + std::to_string(id))}, {});
  }
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Converged(); }, 10'000));
  cluster.InformMembership(/*crashed_are_gone=*/true);
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.group(leader).state().RoutesOf(old_leader) == nullptr; },
                               10'000));
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Converged(); }, 10'000));
}

TEST(MetaGroup, RestartWithStoredStateEndsWithExactlyItsNewRoutes) {
  MetaCluster cluster(8);
  StartAll(cluster, 3);
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Voters().size() == 3; }, 20'000));
  cluster.group(3).UpdateRoutes({R("old/a"), R("old/b"), R("kept")}, {});
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Converged(); }, 10'000));
  cluster.Crash(3);
  cluster.RunFor(500);
  cluster.Start(3);  // same disk, new boot id, a new process's routes
  cluster.group(3).UpdateRoutes({R("kept"), R("new/c")}, {});
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Converged(); }, 20'000));
  for (NodeId id = 1; id <= 3; ++id) {
    EXPECT_EQ(cluster.group(id).state().RoutesOf(3)->routes, (std::set<RouteKey>{R("kept"), R("new/c")}));
  }
  EXPECT_FALSE(cluster.group(3).group().started_empty());
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Voters() == Ids({1, 2, 3}); }, 10'000));
}

// MetaGroup::Leave (a graceful stop): the node's own MemberGone, applied in
// its copy before it goes, whichever node leads; it is not re-admitted or
// re-registered while it stops (the others still hold it live: no
// membership news here), and a new process on its disk is admitted again.
TEST(MetaGroup, LeaveCommitsTheNodesOwnMemberGoneAndANewProcessRejoins) {
  for (uint64_t seed : {61, 62, 63}) {
    for (bool leader : {true, false}) {
      SCOPED_TRACE(testing::Message() << "seed " << seed << " leader " << leader);
      MetaCluster cluster(seed);
      StartAll(cluster, 3);
      ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Voters().size() == 3 && cluster.AllMembersKnown(); }, 20'000));
      const NodeId leaving = leader ? *cluster.Leader() : static_cast<NodeId>(*cluster.Leader() % 3 + 1);
      cluster.group(leaving).UpdateRoutes({R("mine/#")}, {});
      ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Converged(); }, 10'000));
      std::optional<bool> left;
      cluster.group(leaving).Leave(2000, [&](bool ok) { left = ok; });
      cluster.group(leaving).UpdateRoutes({R("late/#")}, {});  // not proposed any more
      ASSERT_TRUE(cluster.RunUntil([&] { return left.has_value(); }, 3'000));
      EXPECT_TRUE(*left);
      EXPECT_EQ(cluster.group(leaving).state().members().count(leaving), 0u);
      EXPECT_EQ(cluster.group(leaving).state().RoutesOf(leaving), nullptr);
      cluster.RunFor(500);  // membership's leave would take this long at most
      for (NodeId id = 1; id <= 3; ++id) {
        EXPECT_EQ(cluster.group(id).state().members().count(leaving), 0u) << "re-admitted on node " << id;
        EXPECT_EQ(cluster.group(id).state().RoutesOf(leaving), nullptr) << "re-registered on node " << id;
      }
      cluster.Crash(leaving);
      cluster.Start(leaving);  // the new process, on the same disk, at once
      ASSERT_TRUE(cluster.RunUntil([&] { return cluster.AllMembersKnown() && cluster.Converged(); }, 20'000))
          << cluster.Describe();
    }
  }
}

// Without a majority the leave gives up after its timeout and says so.
TEST(MetaGroup, LeaveWithoutAMajorityTimesOut) {
  MetaCluster cluster(64);
  StartAll(cluster, 3);
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Voters().size() == 3 && cluster.AllMembersKnown(); }, 20'000));
  cluster.Crash(2);
  cluster.Crash(3);
  std::optional<bool> left;
  const int64_t start = cluster.now_ms();
  cluster.group(1).Leave(1000, [&](bool ok) { left = ok; });
  ASSERT_TRUE(cluster.RunUntil([&] { return left.has_value(); }, 3'000));
  EXPECT_FALSE(*left);
  EXPECT_GE(cluster.now_ms() - start, 1000);
  EXPECT_LE(cluster.now_ms() - start, 1100);
  EXPECT_EQ(cluster.group(1).state().members().count(1), 1u);
}

// The last nodes of a cluster stopped at once: membership says the other
// voters are gone, so nothing can commit the leave and it ends at once.
TEST(MetaGroup, LeaveWithTheOtherVotersGoneEndsAtOnce) {
  MetaCluster cluster(65);
  StartAll(cluster, 3);
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Voters().size() == 3 && cluster.AllMembersKnown(); }, 20'000));
  cluster.Crash(2, /*gone=*/true);
  cluster.Crash(3, /*gone=*/true);
  std::optional<bool> left;
  const int64_t start = cluster.now_ms();
  cluster.group(1).Leave(1000, [&](bool ok) { left = ok; });
  ASSERT_TRUE(cluster.RunUntil([&] { return left.has_value(); }, 3'000));
  EXPECT_FALSE(*left);
  EXPECT_LE(cluster.now_ms() - start, 10);
}

TEST(MetaGroup, RestartWithEmptyStateIsReaddedAsLearnerFirst) {
  MetaCluster cluster(9);
  StartAll(cluster, 3);
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Voters().size() == 3; }, 20'000));
  const NodeId victim = *cluster.Leader() == 3 ? 2 : 3;
  cluster.group(victim).UpdateRoutes({R("stale/1"), R("stale/2")}, {});
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Converged(); }, 10'000));
  const NodeId leader = *cluster.Leader();
  const uint64_t changes_before = cluster.group(leader).counters().config_changes;
  cluster.Crash(victim);
  cluster.WipeDisk(victim);
  cluster.RunFor(500);
  cluster.Start(victim);
  EXPECT_TRUE(cluster.group(victim).group().started_empty());
  cluster.group(victim).UpdateRoutes({R("fresh/1")}, {});
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Converged(); }, 20'000));
  for (NodeId id = 1; id <= 3; ++id) {
    EXPECT_EQ(cluster.group(id).state().RoutesOf(victim)->routes, (std::set<RouteKey>{R("fresh/1")}));
  }
  // Removed, added as a learner, promoted: three config changes, and a voter
  // again. (The leader may catch the wiped voter up before it removes it:
  // raft resets the progress of a follower that lost acknowledged entries.)
  ASSERT_TRUE(cluster.RunUntil(
      [&] {
        auto leader_now = cluster.Leader();
        return cluster.Voters() == Ids({1, 2, 3}) && leader_now &&
               !cluster.group(*leader_now).state().RoutesOf(victim)->fresh;
      },
      20'000));
  ASSERT_TRUE(cluster.Leader());
  EXPECT_GE(cluster.group(*cluster.Leader()).counters().config_changes - changes_before, 3u);
  EXPECT_FALSE(cluster.group(*cluster.Leader()).state().RoutesOf(victim)->fresh);
}

TEST(MetaGroup, EmptyLogNeverGrantsAVote) {
  MetaCluster cluster(10);
  StartAll(cluster, 3);
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Voters().size() == 3 && cluster.Converged(); }, 20'000));
  const NodeId leader = *cluster.Leader();
  const NodeId victim = leader == 3 ? 2 : 3;
  const NodeId other = 6 - leader - victim;
  // The victim loses its disk; the leader dies before it can re-add it as a
  // learner. The third node asks for votes: the victim (empty log) refuses
  // them, so no leader is elected from one real vote.
  cluster.Crash(victim);
  cluster.WipeDisk(victim);
  cluster.Start(victim);
  cluster.Crash(leader);
  cluster.RunFor(5'000);
  EXPECT_FALSE(cluster.Leader().has_value());
  EXPECT_GT(cluster.group(victim).group().counters().votes_refused, 0u);
  EXPECT_NE(cluster.raft(other).role(), raft::Role::kLeader);
  cluster.Start(leader);
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Leader().has_value() && cluster.Converged(); }, 20'000));
}

TEST(MetaGroup, MinorityPartitionRetriesWhileMajorityWorks) {
  MetaCluster cluster(11);
  StartAll(cluster, 5);
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Voters().size() == 5 && cluster.Converged(); }, 30'000));
  const NodeId leader = *cluster.Leader();
  std::vector<NodeId> minority;
  for (NodeId id = 5; id >= 1 && minority.size() < 2; --id) {
    if (id != leader) minority.push_back(id);
  }
  for (NodeId a : minority) {
    for (NodeId b = 1; b <= 5; ++b) {
      if (std::find(minority.begin(), minority.end(), b) == minority.end()) cluster.network().Partition(a, b);
    }
  }
  cluster.group(minority[0]).UpdateRoutes({R("cut/off")}, {});
  cluster.group(leader).UpdateRoutes({R("majority/1")}, {});
  const NodeId follower = leader == 1 ? 2 : 1;
  cluster.group(follower).UpdateRoutes({R("majority/2")}, {});
  ASSERT_TRUE(cluster.RunUntil(
      [&] {
        return cluster.group(leader).routes_committed() && cluster.group(follower).routes_committed() &&
               cluster.group(leader).state().RoutesOf(follower)->routes.count(R("majority/2")) == 1;
      },
      10'000));
  cluster.RunFor(5'000);
  EXPECT_FALSE(cluster.group(minority[0]).routes_committed());
  EXPECT_GT(cluster.group(minority[0]).counters().route_retries, 0u);
  EXPECT_EQ(cluster.group(leader).state().RoutesOf(minority[0])->routes.count(R("cut/off")), 0u);
  cluster.network().HealAll();
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Converged(); }, 20'000));
  EXPECT_EQ(cluster.group(leader).state().RoutesOf(minority[0])->routes.count(R("cut/off")), 1u);
}

TEST(MetaGroup, LaggingLearnerCatchesUpBySnapshot) {
  MetaCluster cluster(12, /*snapshot_every=*/16);
  StartAll(cluster, 4);
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Voters().size() == 3 && cluster.Converged(); }, 30'000));
  ASSERT_EQ(cluster.raft(*cluster.Leader()).config().learners, Ids({4}));
  for (NodeId id = 1; id <= 3; ++id) cluster.network().Partition(4, id);
  // Far more entries than a snapshot interval, one batch at a time.
  for (int round = 0; round < 60; ++round) {
    cluster.group(1 + round % 3).UpdateRoutes({R("r/" + std::to_string(round))}, {});
    cluster.RunFor(30);
  }
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.group(1).routes_committed() && cluster.group(2).routes_committed() && cluster.group(3).routes_committed(); }, 10'000));
  const NodeId leader = *cluster.Leader();
  EXPECT_GT(cluster.raft(leader).log().snapshot()->index, cluster.group(4).group().applied());
  cluster.network().HealAll();
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Converged(); }, 20'000));
  EXPECT_GE(cluster.group(4).group().counters().snapshots_installed, 1u);
  EXPECT_EQ(cluster.group(4).state().Snapshot(), cluster.group(leader).state().Snapshot());
}

// Seeded sweep: one node at a time crashes (its disk kept or wiped) and
// restarts with new routes while the others change theirs; after each
// round every copy holds exactly every node's current routes.
TEST(MetaGroup, RandomCrashesAndRestartsKeepRoutesExact) {
  // ESTUARY_META_SEEDS=N runs N seeds instead of 20.
  const char* seeds = std::getenv("ESTUARY_META_SEEDS");
  const uint64_t runs = seeds ? std::strtoull(seeds, nullptr, 10) : 20;
  for (uint64_t seed = 100; seed < 100 + runs; ++seed) {
    SCOPED_TRACE(seed);
    MetaCluster cluster(seed, /*snapshot_every=*/8);
    const NodeId count = seed % 2 == 0 ? 3 : 5;
    StartAll(cluster, count);
    std::mt19937_64 random(seed);
    ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Voters().size() == count && cluster.Converged(); }, 30'000));
    for (int round = 0; round < 6; ++round) {
      const NodeId victim = static_cast<NodeId>(1 + random() % count);
      for (NodeId id = 1; id <= count; ++id) {
        cluster.group(id).UpdateRoutes({R("r" + std::to_string(round) + "/" + std::to_string(id))},
                                       {R("r" + std::to_string(round - 1) + "/" + std::to_string(id))});
      }
      cluster.RunFor(static_cast<int64_t>(random() % 200));
      cluster.Crash(victim);
      if (random() % 2 == 0) cluster.WipeDisk(victim);
      cluster.RunFor(static_cast<int64_t>(random() % 3000));
      cluster.Start(victim);
      cluster.group(victim).UpdateRoutes({R("v" + std::to_string(round))}, {});
      ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Converged() && cluster.AllMembersKnown(); }, 60'000))
          << "round " << round << " victim " << victim << "\n" << cluster.Describe();
      // Repaired before the next fault: full voter set, committed, no
      // voter still marked as restarted empty (two lost voters out of
      // three is beyond what raft tolerates).
      ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Repaired(count); }, 60'000))
          << "round " << round << "\n" << cluster.Describe();
    }
  }
}

}  // namespace
}  // namespace estuary::meta
