// Planned leadership moves on simulated time (docs/partitions.md
// "Leadership"): hot switching across a transfer, the leader pin through a
// crash and a restart, refusals with a reason, drain and undrain, and the
// admin API's answers.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cluster-core/partition/partition_admin.h"
#include "cluster-core/partition/partition_sim_cluster.h"

namespace estuary::partition {
namespace {

using namespace sim;  // NOLINT(google-build-using-namespace): test support

// Claims of one client id proposed every `every_ms` from each node in
// `from`, while the test drives the cluster: how many were answered and
// how many failed, and the slowest answer.
struct SteadyWrites {
  PartitionCluster& cluster;
  std::string client;
  std::vector<NodeId> from;
  int64_t every_ms = 2;
  uint64_t sent = 0, ok = 0, failed = 0;
  int64_t slowest_ms = 0;  // to within every_ms

  // Runs the cluster for `ms`, proposing as it goes.
  void RunFor(int64_t ms) {
    for (int64_t t = 0; t < ms; t += every_ms) {
      for (NodeId node : from) Send(node);
      cluster.RunFor(every_ms);
      Note();
    }
  }
  void Send(NodeId node) {
    const int64_t start = cluster.now_ms();
    auto outcome = cluster.Claim(node, client, ++sent);
    outcomes.push_back({start, -1, outcome, node});
  }
  void Note() {
    for (Write& write : outcomes) {
      if (write.took_ms >= 0 || !write.outcome->done) continue;
      write.took_ms = cluster.now_ms() - write.start_ms;
      slowest_ms = std::max(slowest_ms, write.took_ms);
    }
  }
  // Waits for every answer; true if all came.
  bool Settle() {
    const bool answered = cluster.RunUntil(
        [&] {
          Note();
          return std::all_of(outcomes.begin(), outcomes.end(), [](const Write& w) { return w.outcome->done; });
        },
        10'000);
    for (const Write& write : outcomes) {
      if (!write.outcome->done) continue;
      (write.outcome->result.status == meta::ProposeStatus::kOk ? ok : failed) += 1;
    }
    return answered;
  }
  struct Write {
    int64_t start_ms;
    int64_t took_ms;
    std::shared_ptr<Outcome> outcome;
    NodeId node;
  };
  std::vector<Write> outcomes{};
};

// Opens the client's partition with three voters and a settled leader (the
// placement's first replica); the partition.
PartitionId OpenSettled(PartitionCluster& cluster, const std::string& client) {
  const PartitionId partition = cluster.partitions(1).PartitionOf(client);
  cluster.ClaimOk(1, client, 1);
  const NodeId front = cluster.meta(1).state().placement().assignment.at(partition).front();
  EXPECT_TRUE(cluster.RunUntil(
      [&] { return cluster.Voters(partition).size() == 3 && cluster.Leader(partition) == front; }, 10'000))
      << "partition " << partition << " never settled on its preferred leader " << front;
  EXPECT_TRUE(cluster.RunUntil(
      [&] {
        const raft::Raft& raft = cluster.partitions(front).group(partition)->raft();
        for (const auto& [node, progress] : raft.progress()) {
          if (progress.match < raft.commit()) return false;
        }
        return true;
      },
      5'000))
      << "the followers never caught up";
  return partition;
}

// Hot switching: writes proposed from every node, every 2 ms, across a
// requested transfer are held and then applied: none fails. The new leader
// is the one asked for, and it stays (the pin beats the placement).
TEST(PartitionLeadership, WritesAcrossATransferAreHeldNotFailed) {
  for (uint64_t seed : Seeds({21, 22, 23})) {
    SCOPED_TRACE(seed);
    PartitionCluster cluster(seed);
    StartAll(cluster, 3);
    const PartitionId partition = OpenSettled(cluster, "hot");
    const auto& placed = cluster.meta(1).state().placement().assignment.at(partition);
    const NodeId leader = placed.front();
    const NodeId target = placed.at(1);

    cluster.RunFor(1'000);  // past the leader's settle period (leader_settle_ms)
    SteadyWrites writes{cluster, "hot", {1, 2, 3}};
    writes.RunFor(200);
    auto accepted = cluster.partitions(leader).RequestLeader(partition, target);
    ASSERT_TRUE(accepted) << accepted.error().message;
    EXPECT_EQ(accepted->from, leader);
    EXPECT_EQ(accepted->to, target);
    const int64_t asked = cluster.now_ms();
    int64_t moved_ms = -1;
    for (int i = 0; i < 250; ++i) {
      writes.RunFor(4);
      if (moved_ms < 0 && cluster.Leader(partition) == target) moved_ms = cluster.now_ms() - asked;
    }
    ASSERT_TRUE(writes.Settle()) << "writes were still unanswered 10 s after the transfer";
    EXPECT_EQ(writes.failed, 0u) << "of " << writes.sent << " writes";
    EXPECT_EQ(writes.ok, writes.sent);
    EXPECT_GE(moved_ms, 0) << "node " << target << " never led";
    // Held for about a round trip and answered from the new leader, not
    // at the 1 s attempt timeout (what the group alone would give).
    EXPECT_LT(writes.slowest_ms, 200);
    EXPECT_EQ(cluster.Leader(partition), target);
    cluster.RunFor(3'000);  // many reconciles and settle periods
    EXPECT_EQ(cluster.Leader(partition), target) << "leadership went back to the placement's choice";
    for (NodeId id : {1, 2, 3}) EXPECT_EQ(cluster.meta(id).state().LeaderPinOf(partition), target);
    std::cout << "[ figures  ] seed " << seed << ": leader " << leader << " -> " << target << " in " << moved_ms
              << " ms (simulated, 2 ms links); " << writes.sent << " writes across it, " << writes.failed
              << " failed, slowest " << writes.slowest_ms << " ms\n";
  }
}

// The pin outlives the pinned leader's crash and restart: a survivor leads
// meanwhile, then hands back to the pinned node once it has caught up.
// Clearing the pin gives the partition back to the placement's choice.
TEST(PartitionLeadership, ThePinSurvivesACrashAndARestartUntilCleared) {
  for (uint64_t seed : Seeds({24, 25})) {
    SCOPED_TRACE(seed);
    PartitionCluster cluster(seed);
    StartAll(cluster, 3);
    const PartitionId partition = OpenSettled(cluster, "pinned");
    const auto& placed = cluster.meta(1).state().placement().assignment.at(partition);
    const NodeId front = placed.front();
    const NodeId target = placed.at(2);
    ASSERT_TRUE(cluster.partitions(front).RequestLeader(partition, target));
    ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Leader(partition) == target; }, 5'000));

    cluster.Crash(target, /*gone=*/false);
    ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Leader(partition).has_value(); }, 5'000));
    EXPECT_NE(cluster.Leader(partition), target);
    cluster.Start(target);
    EXPECT_TRUE(cluster.RunUntil([&] { return cluster.Leader(partition) == target; }, 10'000))
        << "the restarted pinned node did not get its leadership back";
    EXPECT_EQ(cluster.ClaimOk(front, "pinned", 50)->connection, 1u) << "the first claim survived the moves";

    ASSERT_TRUE(cluster.partitions(1).ClearLeaderPin(partition));
    EXPECT_TRUE(cluster.RunUntil([&] { return cluster.Leader(partition) == front; }, 10'000))
        << "with the pin cleared, the placement's first replica did not lead again";
  }
}

TEST(PartitionLeadership, RequestsAreRefusedWithAReason) {
  PartitionCluster cluster(26, 16);
  StartAll(cluster, 4);
  std::string client;
  PartitionId partition = 0;
  NodeId outsider = 0;
  for (int i = 0; outsider == 0; ++i) {  // a client whose partition node 4 or another does not hold
    client = "refuse" + std::to_string(i);
    partition = cluster.partitions(1).PartitionOf(client);
    const auto& placed = cluster.meta(1).state().placement().assignment.at(partition);
    for (NodeId id = 1; id <= 4; ++id) {
      if (std::find(placed.begin(), placed.end(), id) == placed.end()) outsider = id;
    }
  }
  auto error_of = [](const auto& result) { return result ? TransferError{} : result.error().error; };
  EXPECT_EQ(error_of(cluster.partitions(1).RequestLeader(16, 2)), TransferError::kUnknownPartition);
  EXPECT_EQ(error_of(cluster.partitions(1).RequestLeader(partition, 2)), TransferError::kNotOpen);

  const NodeId first = cluster.meta(1).state().placement().assignment.at(partition).front();
  cluster.ClaimOk(first, client, 1);
  const auto& placed = cluster.meta(1).state().placement().assignment.at(partition);
  ASSERT_TRUE(cluster.RunUntil(
      [&] { return cluster.Voters(partition).size() == 3 && cluster.Leader(partition) == placed.front(); }, 10'000));
  const NodeId leader = placed.front();
  ASSERT_TRUE(cluster.RunUntil(
      [&] {
        const raft::Raft& raft = cluster.partitions(leader).group(partition)->raft();
        for (NodeId id : placed) {
          if (id != leader && raft.progress().at(id).match < raft.commit()) return false;
        }
        return true;
      },
      5'000))
      << "the followers never caught up";

  auto outside = cluster.partitions(outsider).RequestLeader(partition, 0);
  ASSERT_FALSE(outside);
  EXPECT_EQ(outside.error().error, TransferError::kNoReplica);
  EXPECT_EQ(Sorted(outside.error().replicas), Sorted(placed));

  auto follower = cluster.partitions(placed.at(1)).RequestLeader(partition, placed.at(2));
  ASSERT_FALSE(follower);
  EXPECT_EQ(follower.error().error, TransferError::kNotLeader);
  EXPECT_EQ(follower.error().leader, leader) << follower.error().message;

  auto not_voter = cluster.partitions(leader).RequestLeader(partition, outsider);
  ASSERT_FALSE(not_voter);
  EXPECT_EQ(not_voter.error().error, TransferError::kNotVoter) << not_voter.error().message;

  cluster.partitions(placed.at(1)).SetDraining(true);
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.meta(leader).state().IsDraining(placed.at(1)); }, 5'000));
  auto draining = cluster.partitions(leader).RequestLeader(partition, placed.at(1));
  ASSERT_FALSE(draining);
  EXPECT_EQ(draining.error().error, TransferError::kDraining);
  // Without a target: the other caught-up voter that is not draining.
  auto any = cluster.partitions(leader).RequestLeader(partition, 0);
  ASSERT_TRUE(any) << any.error().message;
  EXPECT_EQ(any->to, placed.at(2));
  EXPECT_TRUE(cluster.RunUntil([&] { return cluster.Leader(partition) == placed.at(2); }, 5'000));
}

// Drain: the draining node hands every partition it leads to another
// caught-up voter, writes meanwhile fail none, no leadership comes back
// while it drains, and it gets its share back when the drain ends.
TEST(PartitionLeadership, ADrainMovesEveryLeadershipAwayAndBack) {
  for (uint64_t seed : Seeds({27, 28})) {
    SCOPED_TRACE(seed);
    PartitionCluster cluster(seed, 32);
    StartAll(cluster, 3);
    for (int i = 0; i < 48; ++i) cluster.ClaimOk(1 + i % 3, "d" + std::to_string(i), 1);
    auto settled = [&] {
      for (const auto& [partition, record] : cluster.meta(1).state().open_partitions()) {
        if (cluster.Voters(partition).size() != 3) return false;
        if (cluster.Leader(partition) != cluster.meta(1).state().placement().assignment.at(partition).front()) {
          return false;
        }
      }
      return true;
    };
    ASSERT_TRUE(cluster.RunUntil(settled, 20'000));
    const size_t led_before = cluster.partitions(1).leading();
    ASSERT_GT(led_before, 0u) << "node 1 leads nothing: the test proves nothing";

    SteadyWrites writes{cluster, "d0", {2, 3}};
    cluster.partitions(1).SetDraining(true);
    const int64_t start = cluster.now_ms();
    int64_t drained_ms = -1;
    for (int i = 0; i < 500 && drained_ms < 0; ++i) {
      writes.RunFor(4);
      if (cluster.partitions(1).draining() && cluster.partitions(1).leading() == 0) drained_ms = cluster.now_ms() - start;
    }
    ASSERT_GE(drained_ms, 0) << "node 1 still leads " << cluster.partitions(1).leading();
    writes.RunFor(100);
    ASSERT_TRUE(writes.Settle());
    EXPECT_EQ(writes.failed, 0u) << "of " << writes.sent;
    EXPECT_LT(writes.slowest_ms, 200);
    cluster.RunFor(3'000);
    EXPECT_EQ(cluster.partitions(1).leading(), 0u) << "leadership went back to a draining node";
    EXPECT_EQ(cluster.partitions(1).counters().drain_transfers, led_before);
    std::cout << "[ figures  ] seed " << seed << ": drain moved " << led_before << " leaderships off node 1 in "
              << drained_ms << " ms (simulated, 2 ms links, 3 nodes, 32 partitions); slowest write "
              << writes.slowest_ms << " ms\n";

    cluster.partitions(1).SetDraining(false);
    EXPECT_TRUE(cluster.RunUntil(settled, 10'000)) << "node 1 did not get its leaderships back after the drain";
    EXPECT_EQ(cluster.partitions(1).leading(), led_before);
  }
}

// The drain is kept in the metadata: a drained node that restarts (with
// its data) stays drained and gets no leadership back until undrained.
TEST(PartitionLeadership, ADrainOutlivesARestartOfTheDrainedNode) {
  for (uint64_t seed : Seeds({30})) {
    SCOPED_TRACE(seed);
    PartitionCluster cluster(seed, 16);
    StartAll(cluster, 3);
    for (int i = 0; i < 24; ++i) cluster.ClaimOk(1 + i % 3, "r" + std::to_string(i), 1);
    ASSERT_TRUE(cluster.RunUntil([&] { return cluster.partitions(2).leading() > 0; }, 10'000));
    cluster.partitions(2).SetDraining(true);
    ASSERT_TRUE(cluster.RunUntil(
        [&] { return cluster.partitions(2).draining() && cluster.partitions(2).leading() == 0; }, 5'000));
    cluster.Crash(2, /*gone=*/false);
    cluster.Start(2);
    cluster.RunFor(5'000);
    EXPECT_TRUE(cluster.partitions(2).draining());
    EXPECT_EQ(cluster.partitions(2).leading(), 0u) << "a restarted drained node led again";
    for (int i = 0; i < 24; ++i) {
      auto previous = cluster.ClaimOk(2, "r" + std::to_string(i), 2);
      ASSERT_TRUE(previous.has_value());
      EXPECT_EQ(previous->connection, 1u);
    }
    cluster.partitions(2).SetDraining(false);
    EXPECT_TRUE(cluster.RunUntil([&] { return cluster.partitions(2).leading() > 0; }, 10'000));
  }
}

// A graceful stop (SIGTERM) ends a drain, however soon the node is started
// again: its own MemberGone is applied before it goes (MetaGroup::Leave).
// The race this pins: the drained node led the metadata group, so nobody
// else proposed its MemberGone before its new process registered again,
// and it came back draining (deploy_check, 1 run in 3). Both a metadata
// leader and a follower are stopped, over several seeds; no leadership
// comes back to the node while it leaves.
TEST(PartitionLeadership, AGracefulStopEndsADrainEvenWithAnImmediateRestart) {
  for (uint64_t seed : Seeds({41, 42, 43, 44})) {
    for (bool stop_the_meta_leader : {true, false}) {
      SCOPED_TRACE(fmt::format("seed {} meta leader {}", seed, stop_the_meta_leader));
      PartitionCluster cluster(seed, 16);
      StartAll(cluster, 3);
      for (int i = 0; i < 24; ++i) cluster.ClaimOk(1 + i % 3, "g" + std::to_string(i), 1);
      const auto meta_leader = cluster.MetaLeader();
      ASSERT_TRUE(meta_leader.has_value());
      const NodeId drained = stop_the_meta_leader ? *meta_leader : static_cast<NodeId>(*meta_leader % 3 + 1);
      ASSERT_TRUE(cluster.RunUntil([&] { return cluster.partitions(drained).leading() > 0; }, 10'000));
      cluster.partitions(drained).SetDraining(true);
      ASSERT_TRUE(cluster.RunUntil(
          [&] { return cluster.partitions(drained).draining() && cluster.partitions(drained).leading() == 0; },
          5'000));
      // The others keep it live meanwhile (no membership news here): its
      // MemberGone must not be undone by a MemberUpsert while it stops.
      size_t led_while_leaving = 0;
      bool admitted_again = false;
      std::set<NodeId> saw_it_gone;
      EXPECT_TRUE(cluster.GracefulStop(drained, 2000, /*linger_ms=*/300, [&] {
        led_while_leaving = std::max(led_while_leaving, cluster.partitions(drained).leading());
        for (NodeId node = 1; node <= 3; ++node) {
          if (cluster.meta(node).state().members().count(drained) == 0) {
            saw_it_gone.insert(node);
          } else if (saw_it_gone.count(node) != 0) {
            admitted_again = true;
          }
        }
      })) << "the metadata leave timed out";
      EXPECT_EQ(led_while_leaving, 0u) << "leadership came back to the node while it was leaving";
      EXPECT_FALSE(admitted_again) << "the node was made a member again while it stopped";
      for (NodeId node = 1; node <= 3; ++node) {
        if (node == drained) continue;
        EXPECT_FALSE(cluster.meta(node).state().IsDraining(drained)) << "on node " << node;
      }
      cluster.Start(drained);  // at once: before anyone else could act on its leave
      EXPECT_TRUE(cluster.RunUntil(
          [&] { return !cluster.partitions(drained).draining() && cluster.partitions(drained).leading() > 0; },
          10'000))
          << "draining " << cluster.partitions(drained).draining();
      for (NodeId node = 1; node <= 3; ++node) {
        EXPECT_FALSE(cluster.meta(node).state().IsDraining(drained)) << "on node " << node;
        EXPECT_EQ(cluster.meta(node).state().members().size(), 3u) << "on node " << node;
      }
    }
  }
}

// The admin API's answers (partition_admin.h): statuses and JSON.
TEST(PartitionLeadership, TheAdminApiAnswersTransfersWithStatusesAndJson) {
  PartitionCluster cluster(29, 16);
  StartAll(cluster, 3);
  const PartitionId partition = OpenSettled(cluster, "admin");
  const auto& placed = cluster.meta(1).state().placement().assignment.at(partition);
  auto serve = [&](NodeId on, const std::string& method, const std::string& path) {
    auto response = ServePartitionAdmin(cluster.partitions(on), method, path);
    EXPECT_TRUE(response.has_value()) << path;
    return response ? *response : io::HttpResponse{};
  };
  const std::string base = "/api/cluster/partitions/transfer";
  EXPECT_FALSE(ServePartitionAdmin(cluster.partitions(1), "GET", "/api/cluster/partitions"));
  EXPECT_EQ(serve(1, "GET", base + "?partition=1").status, 405);
  EXPECT_EQ(serve(1, "POST", base).status, 400);
  EXPECT_EQ(serve(1, "POST", base + "?partition=x").status, 400);
  EXPECT_EQ(serve(1, "POST", base + fmt::format("?partition={}&to=70000", partition)).status, 400);
  EXPECT_EQ(serve(1, "POST", base + "?partition=16").status, 404);

  auto misdirected = serve(placed.at(1), "POST", base + fmt::format("?partition={}&to={}", partition, placed.at(2)));
  EXPECT_EQ(misdirected.status, 421) << misdirected.body;
  EXPECT_EQ(nlohmann::json::parse(misdirected.body).at("leader"), placed.front());

  auto accepted = serve(placed.front(), "POST", base + fmt::format("?partition={}&to={}", partition, placed.at(2)));
  EXPECT_EQ(accepted.status, 202) << accepted.body;
  EXPECT_EQ(nlohmann::json::parse(accepted.body),
            (nlohmann::json{{"partition", partition}, {"from", placed.front()}, {"to", placed.at(2)}}));
  EXPECT_TRUE(cluster.RunUntil([&] { return cluster.Leader(partition) == placed.at(2); }, 5'000));
  const auto status = nlohmann::json::parse(cluster.partitions(placed.at(2)).StatusJson());
  EXPECT_EQ(status.at("open").at(0).at("pin"), placed.at(2));
  EXPECT_EQ(status.at("open").at(0).at("leader"), placed.at(2));

  EXPECT_EQ(serve(3, "DELETE", base + fmt::format("?partition={}", partition)).status, 202);
  EXPECT_TRUE(cluster.RunUntil([&] { return cluster.Leader(partition) == placed.front(); }, 5'000))
      << "the cleared pin left leadership off the placement's choice";
}

}  // namespace
}  // namespace estuary::partition
