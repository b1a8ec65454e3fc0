// Partitions as raft groups on simulated time (SimLoop + SimTransport,
// seeded, no sleeps): opening on first write, proposals from replicas and
// from other nodes, the client-id registry's answers, a leader crash, a
// minority cut off, placement changes, restarts with stored state.
#include "cluster-core/partition/partition_host.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "cluster-core/links/sim_transport.h"
#include "cluster-core/partition/client_registry.h"
#include "io/sim/sim_loop.h"
#include "persistence/memory_engine.h"

namespace estuary::partition {
namespace {

std::string Address(NodeId id) { return "node" + std::to_string(id); }

class Dispatch final : public cluster::LinkHandler {
 public:
  Dispatch(meta::RaftHost& host, PartitionHost*& partitions) : host_(host), partitions_(partitions) {}
  void OnPeerUp(const cluster::PeerInfo&) override {}
  void OnPeerDown(cluster::NodeId) override {}
  void OnFrame(cluster::NodeId from, uint8_t type, std::string_view body) override {
    if (type >= 0x40 && type <= 0x4F) host_.OnFrame(from, type, body);
    if (type >= 0x50 && type <= 0x5F && partitions_ != nullptr) partitions_->OnFrame(from, type, body);
  }

 private:
  meta::RaftHost& host_;
  PartitionHost*& partitions_;
};

struct Node {
  std::unique_ptr<persistence::MemoryEngine> meta_engine;
  std::unique_ptr<persistence::MemoryEngine> engine;
  std::unique_ptr<cluster::SimTransport> transport;
  std::unique_ptr<meta::RaftHost> host;
  std::unique_ptr<Dispatch> dispatch;
  std::unique_ptr<meta::MetaGroup> meta;
  std::unique_ptr<PartitionHost> partitions;
  PartitionHost* partitions_ptr = nullptr;
  uint64_t boot = 0;
  int starts = 0;
  bool up = false;
};

struct Outcome {
  bool done = false;
  PartitionResult result{};
};

class PartitionCluster {
 public:
  explicit PartitionCluster(uint64_t seed, uint32_t partitions = 64)
      : network_(loop_, cluster::SimNetworkConfig{.delay_ms = 2, .seed = seed}), seed_(seed), partitions_(partitions) {}
  ~PartitionCluster() {
    for (auto& [id, node] : nodes_) Stop(node);
  }

  void Start(NodeId id) {
    Node& node = nodes_[id];
    if (!node.engine) {
      node.engine = std::make_unique<persistence::MemoryEngine>();
      node.meta_engine = std::make_unique<persistence::MemoryEngine>();
    }
    node.boot = ++boots_ * 1000 + id;
    node.transport = std::make_unique<cluster::SimTransport>(network_, id, Address(id), "secret");
    node.host = std::make_unique<meta::RaftHost>(loop_, *node.transport, 10);
    node.partitions_ptr = nullptr;
    node.dispatch = std::make_unique<Dispatch>(*node.host, node.partitions_ptr);
    node.transport->set_handler(node.dispatch.get());
    meta::MetaGroupConfig config;
    config.self = id;
    config.cluster_address = Address(id);
    config.boot_id = node.boot;
    config.has_seeds = id != 1 || node.starts > 0;
    config.partitions = partitions_;
    config.raft.random_seed = seed_ * 100 + id * 7 + boots_;
    node.meta = std::make_unique<meta::MetaGroup>(*node.host, *node.meta_engine, config);
    ASSERT_TRUE(node.meta->Start());
    PartitionHostConfig partition_config;
    partition_config.self = id;
    partition_config.boot_id = node.boot;
    partition_config.raft.random_seed = seed_ * 1000 + id * 13 + boots_;
    node.partitions =
        std::make_unique<PartitionHost>(*node.host, *node.transport, *node.meta, *node.engine, partition_config,
                                        [](PartitionId) { return std::make_unique<ClientRegistry>(); });
    node.partitions->Start();
    node.partitions_ptr = node.partitions.get();
    node.up = true;
    ++node.starts;
    for (auto& [other, peer] : nodes_) {
      if (other != id) node.transport->AddPeerAddress(Address(other));
    }
    InformMembership();
  }
  void Crash(NodeId id, bool gone = true) {
    Stop(nodes_.at(id));
    InformMembership(gone);
  }
  void InformMembership(bool crashed_are_gone = false) {
    for (auto& [id, node] : nodes_) {
      if (!node.up) continue;
      for (auto& [other, peer] : nodes_) {
        // Node-level liveness for quiescent groups, as the agent gives it.
        if (other != id) peer.up ? node.host->OnPeerUp(other) : node.host->OnPeerDown(other);
        if (peer.up) {
          node.meta->OnMemberLive(other, Address(other), peer.boot);
        } else if (crashed_are_gone) {
          node.meta->OnMemberGone(other);
        }
      }
    }
  }

  template <typename Pred>
  bool RunUntil(Pred pred, int64_t ms) {
    const int64_t deadline = clock_.NowMs() + ms;
    while (!pred() && clock_.NowMs() < deadline) loop_.AdvanceBy(10);
    return pred();
  }

  // Every live node knows every live node as a member (the placement then
  // names them all).
  bool MembersKnown(size_t count) {
    for (auto& [id, node] : nodes_) {
      if (node.up && node.meta->state().members().size() != count) return false;
    }
    return true;
  }

  std::shared_ptr<Outcome> Claim(NodeId on, const std::string& client, uint64_t connection) {
    auto outcome = std::make_shared<Outcome>();
    Node& node = nodes_.at(on);
    const RegistryCommand command = ClaimClient{client, ClientOwner{on, node.boot, connection}};
    node.partitions->Propose(node.partitions->PartitionOf(client), EncodeRegistryCommand(command),
                             [outcome](PartitionResult result) {
                               outcome->done = true;
                               outcome->result = std::move(result);
                             });
    return outcome;
  }
  // Runs until the claim is answered; the previous owner it names.
  std::optional<ClientOwner> ClaimOk(NodeId on, const std::string& client, uint64_t connection) {
    auto outcome = Claim(on, client, connection);
    EXPECT_TRUE(RunUntil([&] { return outcome->done; }, 10'000)) << "claim on node " << on << " never answered";
    EXPECT_EQ(outcome->result.status, meta::ProposeStatus::kOk) << "claim on node " << on;
    EXPECT_TRUE(outcome->result.result.has_value()) << "no result for index " << outcome->result.index;
    if (!outcome->result.result) return std::nullopt;
    auto previous = DecodeClaimResult(*outcome->result.result);
    EXPECT_TRUE(previous.has_value()) << "malformed claim result";
    return previous ? *previous : std::nullopt;
  }

  void WipeDisk(NodeId id) {
    nodes_.at(id).engine = std::make_unique<persistence::MemoryEngine>();
    nodes_.at(id).meta_engine = std::make_unique<persistence::MemoryEngine>();
  }
  PartitionHost& partitions(NodeId id) { return *nodes_.at(id).partitions; }
  meta::RaftHost& host(NodeId id) { return *nodes_.at(id).host; }
  meta::MetaGroup& meta(NodeId id) { return *nodes_.at(id).meta; }
  const ClientRegistry* registry(NodeId id, PartitionId partition) {
    return dynamic_cast<const ClientRegistry*>(nodes_.at(id).partitions->machine(partition));
  }
  uint64_t boot(NodeId id) { return nodes_.at(id).boot; }
  bool up(NodeId id) { return nodes_.at(id).up; }
  cluster::SimNetwork& network() { return network_; }
  std::vector<NodeId> ids() {
    std::vector<NodeId> out;
    for (auto& [id, node] : nodes_) out.push_back(id);
    return out;
  }

  std::optional<NodeId> Leader(PartitionId partition) {
    std::optional<NodeId> best;
    for (auto& [id, node] : nodes_) {
      if (!node.up) continue;
      meta::RaftGroup* group = node.partitions->group(partition);
      if (group != nullptr && group->raft().role() == raft::Role::kLeader &&
          (!best || group->raft().term() > nodes_.at(*best).partitions->group(partition)->raft().term())) {
        best = id;
      }
    }
    return best;
  }
  std::vector<raft::NodeId> Voters(PartitionId partition) {
    auto leader = Leader(partition);
    if (!leader) return {};
    auto voters = nodes_.at(*leader).partitions->group(partition)->raft().config().voters;
    std::sort(voters.begin(), voters.end());
    return voters;
  }

 private:
  void Stop(Node& node) {
    if (!node.up) return;
    node.partitions_ptr = nullptr;
    node.partitions.reset();
    node.meta.reset();
    node.host.reset();
    node.dispatch.reset();
    node.transport.reset();
    node.up = false;
  }

  io::ManualClock clock_;
  io::SimLoop loop_{clock_};
  cluster::SimNetwork network_;
  uint64_t seed_;
  uint32_t partitions_;
  uint64_t boots_ = 0;
  std::map<NodeId, Node> nodes_;
};

void StartAll(PartitionCluster& cluster, NodeId count) {
  for (NodeId id = 1; id <= count; ++id) cluster.Start(id);
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.MembersKnown(count); }, 20'000));
}

// ESTUARY_PARTITION_SEEDS=N runs every cluster test with seeds 1..N
// instead of its own few.
std::vector<uint64_t> Seeds(std::initializer_list<uint64_t> defaults) {
  if (const char* count = std::getenv("ESTUARY_PARTITION_SEEDS")) {
    std::vector<uint64_t> seeds;
    for (uint64_t seed = 1; seed <= std::strtoull(count, nullptr, 10); ++seed) seeds.push_back(seed);
    return seeds;
  }
  return defaults;
}

std::vector<NodeId> Sorted(std::vector<NodeId> nodes) {
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

TEST(ClientRegistry, ClaimReplacesAndNamesThePreviousOwnerReleaseOnlyByTheOwner) {
  ClientRegistry registry;
  const ClientOwner a{1, 10, 5}, b{2, 20, 6};
  auto first = DecodeClaimResult(registry.ApplyCommand(ClaimClient{"c", a}));
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(*first, std::nullopt);
  auto second = DecodeClaimResult(registry.ApplyCommand(ClaimClient{"c", b}));
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(*second, std::optional<ClientOwner>{a});
  EXPECT_EQ(registry.ApplyCommand(ReleaseClient{"c", a}), "0") << "a late release after a takeover";
  EXPECT_EQ(registry.owners().at("c"), b);
  EXPECT_EQ(registry.ApplyCommand(ReleaseClient{"c", b}), "1");
  EXPECT_TRUE(registry.owners().empty());

  registry.ApplyCommand(ClaimClient{"x", a});
  registry.ApplyCommand(ClaimClient{"y", b});
  ClientRegistry copy;
  ASSERT_TRUE(copy.Restore(registry.Snapshot()));
  EXPECT_EQ(copy.owners(), registry.owners());
  auto bytes = registry.Snapshot();
  bytes.pop_back();
  EXPECT_FALSE(copy.Restore(bytes)) << "a truncated snapshot is refused";
  EXPECT_EQ(copy.owners(), registry.owners()) << "and changes nothing";
  EXPECT_FALSE(DecodeRegistryCommand("\x09junk").has_value());
}

TEST(PartitionHost, APartitionOpensOnItsFirstWriteOnEveryReplica) {
  for (uint64_t seed : Seeds({1})) {
    SCOPED_TRACE(seed);
    PartitionCluster cluster(seed);
    StartAll(cluster, 3);
    const PartitionId partition = cluster.partitions(1).PartitionOf("sensor-17");
    EXPECT_EQ(cluster.partitions(1).group(partition), nullptr) << "nothing is open before a write";

    EXPECT_EQ(cluster.ClaimOk(1, "sensor-17", 1), std::nullopt) << "a first claim replaces nobody";
    const auto& open = cluster.meta(2).state().open_partitions();
    ASSERT_EQ(open.count(partition), 1u);
    EXPECT_EQ(Sorted(open.at(partition).replicas), (std::vector<NodeId>{1, 2, 3}));
    EXPECT_EQ(open.size(), 1u) << "only the written partition is open";
    ASSERT_TRUE(cluster.RunUntil(
        [&] {
          for (NodeId id : {1, 2, 3}) {
            const ClientRegistry* registry = cluster.registry(id, partition);
            if (registry == nullptr || registry->owners().count("sensor-17") == 0) return false;
          }
          return true;
        },
        5'000))
        << "every replica applies the claim";

    // A second node's claim replaces the first connection and says so.
    auto previous = cluster.ClaimOk(2, "sensor-17", 9);
    ASSERT_TRUE(previous.has_value());
    EXPECT_EQ(*previous, (ClientOwner{1, cluster.boot(1), 1}));

    // Idle, the partition's group goes quiet on every replica (no ticks,
    // no heartbeats), and a write wakes it.
    EXPECT_TRUE(cluster.RunUntil(
        [&] {
          for (NodeId id : {1, 2, 3}) {
            if (cluster.host(id).quiescent_groups() != 1) return false;
          }
          return true;
        },
        5'000))
        << "the idle partition group kept heartbeating";
    EXPECT_EQ(cluster.ClaimOk(3, "sensor-17", 4)->connection, 9u);
  }
}

TEST(PartitionHost, ANodeWithoutAReplicaProposesThroughOne) {
  for (uint64_t seed : Seeds({2})) {
    SCOPED_TRACE(seed);
    PartitionCluster cluster(seed);
    StartAll(cluster, 5);
    // A client id whose partition node 5 holds no replica of.
    std::string client;
    for (int i = 0; client.empty(); ++i) {
      const std::string candidate = "c" + std::to_string(i);
      const auto& placed =
          cluster.meta(5).state().placement().assignment.at(cluster.partitions(5).PartitionOf(candidate));
      if (std::find(placed.begin(), placed.end(), NodeId{5}) == placed.end()) client = candidate;
    }
    EXPECT_EQ(cluster.ClaimOk(5, client, 3), std::nullopt);
    EXPECT_GT(cluster.partitions(5).counters().proposals_remote, 0u);
    EXPECT_EQ(cluster.partitions(5).group(cluster.partitions(5).PartitionOf(client)), nullptr);
    auto previous = cluster.ClaimOk(5, client, 4);
    ASSERT_TRUE(previous.has_value()) << "the remote answer carries the result";
    EXPECT_EQ(previous->connection, 3u);
  }
}

TEST(PartitionHost, ClaimsCommitAgainAfterThePartitionLeaderDies) {
  for (uint64_t seed : Seeds({3, 4})) {
    SCOPED_TRACE(seed);
    PartitionCluster cluster(seed);
    StartAll(cluster, 3);
    const PartitionId partition = cluster.partitions(1).PartitionOf("failover");
    cluster.ClaimOk(1, "failover", 1);
    ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Voters(partition).size() == 3; }, 5'000));
    const NodeId leader = *cluster.Leader(partition);
    cluster.Crash(leader, /*gone=*/false);
    const NodeId survivor = leader == 1 ? 2 : 1;
    auto previous = cluster.ClaimOk(survivor, "failover", 2);
    ASSERT_TRUE(previous.has_value()) << "the claim acknowledged before the crash survived it";
    EXPECT_EQ(previous->node, 1);
    EXPECT_EQ(previous->connection, 1u);
  }
}

TEST(PartitionHost, ANodeCutOffFromTheOthersCannotClaim) {
  for (uint64_t seed : Seeds({5})) {
    SCOPED_TRACE(seed);
    PartitionCluster cluster(seed);
    StartAll(cluster, 3);
    const PartitionId partition = cluster.partitions(1).PartitionOf("split");
    cluster.ClaimOk(1, "split", 1);
    ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Voters(partition).size() == 3; }, 5'000));
    cluster.network().Partition(3, 1);
    cluster.network().Partition(3, 2);
    auto minority = cluster.Claim(3, "split", 7);
    ASSERT_TRUE(cluster.RunUntil([&] { return minority->done; }, 10'000));
    EXPECT_NE(minority->result.status, meta::ProposeStatus::kOk) << "a minority committed a claim";
    auto previous = cluster.ClaimOk(1, "split", 2);
    ASSERT_TRUE(previous.has_value());
    EXPECT_EQ(previous->connection, 1u) << "the minority's claim never took effect";
  }
}

TEST(PartitionHost, GroupsFollowThePlacementWhenNodesJoinAndLeave) {
  for (uint64_t seed : Seeds({6})) {
    SCOPED_TRACE(seed);
    PartitionCluster cluster(seed, 16);
    StartAll(cluster, 3);
    std::set<PartitionId> touched;
    for (int i = 0; i < 24; ++i) {
      const std::string client = "j" + std::to_string(i);
      touched.insert(cluster.partitions(1).PartitionOf(client));
      cluster.ClaimOk(1 + i % 3, client, 1);
    }
    for (NodeId id : {4, 5}) cluster.Start(id);
    ASSERT_TRUE(cluster.RunUntil([&] { return cluster.MembersKnown(5); }, 20'000));
    auto settled = [&] {
      for (PartitionId partition : touched) {
        const std::vector<NodeId> placed = Sorted(cluster.meta(1).state().placement().assignment.at(partition));
        if (std::vector<raft::NodeId>(placed.begin(), placed.end()) != cluster.Voters(partition)) return false;
      }
      return true;
    };
    ASSERT_TRUE(cluster.RunUntil(settled, 30'000)) << "configs did not reach the placement after joins";
    bool moved = false;
    for (PartitionId partition : touched) {
      const auto& placed = cluster.meta(1).state().placement().assignment.at(partition);
      moved |= std::find(placed.begin(), placed.end(), NodeId{4}) != placed.end() ||
               std::find(placed.begin(), placed.end(), NodeId{5}) != placed.end();
    }
    EXPECT_TRUE(moved) << "the joins moved no written partition: the test proves nothing";

    cluster.Crash(2, /*gone=*/true);
    ASSERT_TRUE(cluster.RunUntil(settled, 30'000)) << "configs did not reach the placement after a node left";
    for (int i = 0; i < 24; ++i) {
      const std::string client = "j" + std::to_string(i);
      auto previous = cluster.ClaimOk(1, client, 2);
      if (!previous) {
        for (NodeId id : {1, 3, 4, 5})
          std::cerr << "node " << id << ": " << cluster.partitions(id).StatusJson() << "\n";
        std::cerr << "partition " << cluster.partitions(1).PartitionOf(client) << "\n";
      }
      ASSERT_TRUE(previous.has_value()) << client << " lost its owner through the moves";
      EXPECT_EQ(previous->node, 1 + i % 3);
    }
  }
}

TEST(PartitionHost, ARestartedNodeKeepsItsPartitionsFromItsStore) {
  for (uint64_t seed : Seeds({7})) {
    SCOPED_TRACE(seed);
    PartitionCluster cluster(seed);
    StartAll(cluster, 3);
    for (int i = 0; i < 10; ++i) cluster.ClaimOk(1, "r" + std::to_string(i), i);
    const PartitionId partition = cluster.partitions(1).PartitionOf("r3");
    cluster.Crash(3, /*gone=*/false);
    cluster.Start(3);
    ASSERT_TRUE(cluster.RunUntil(
        [&] {
          const ClientRegistry* registry = cluster.registry(3, partition);
          return registry != nullptr && registry->owners().count("r3") != 0;
        },
        10'000))
        << "node 3 did not get its partition back";
    EXPECT_EQ(cluster.registry(3, partition)->owners().at("r3").connection, 3u);
  }
}

// A node killed and restarted at once with empty state (no data dir):
// membership never calls it down, its old groups' followers only see the
// link drop. Claims through it work again within the claim deadline, for
// partitions it held before and new ones.
TEST(PartitionHost, ANodeRestartedAtOnceWithEmptyStateClaimsAgain) {
  for (uint64_t seed : Seeds({8, 9, 10})) {
    SCOPED_TRACE(seed);
    PartitionCluster cluster(seed);
    StartAll(cluster, 3);
    for (int i = 0; i < 8; ++i) cluster.ClaimOk(3, "before" + std::to_string(i), 1);
    cluster.RunUntil([] { return false; }, 2'000);  // everything quiescent
    cluster.Crash(3, /*gone=*/false);
    cluster.WipeDisk(3);
    cluster.Start(3);
    for (int i = 0; i < 8; ++i) {
      auto previous = cluster.ClaimOk(3, "before" + std::to_string(i), 2);
      ASSERT_TRUE(previous.has_value()) << "before" << i;
      EXPECT_EQ(previous->connection, 1u);
    }
    for (int i = 0; i < 8; ++i) EXPECT_EQ(cluster.ClaimOk(3, "after" + std::to_string(i), 1), std::nullopt);
  }
}

}  // namespace
}  // namespace estuary::partition
