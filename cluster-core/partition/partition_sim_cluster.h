#pragma once
// Test support: a simulated cluster (SimLoop + SimTransport, seeded, no
// sleeps) with a metadata group and a PartitionHost on each node, for the
// partition tests (partition_host_test.cc, partition_leadership_test.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cluster-core/meta/sim_cluster_support.h"
#include "cluster-core/partition/client_registry.h"
#include "cluster-core/partition/partition_host.h"
#include "cluster-core/partition/partition_state.h"
#include "cluster-core/partition/retained_machine.h"
#include "model/hlc.h"
#include "persistence/memory_engine.h"

namespace estuary::partition::sim {

// A metadata group and a PartitionHost (with a PartitionState: registry and retained messages, per
// partition) on each node.
struct Node : meta::SimNode {
  std::unique_ptr<persistence::MemoryEngine> engine;
  std::unique_ptr<PartitionHost> partitions;

  void StopUpperLayers() {
    dispatch->other_frames = nullptr;
    partitions.reset();
  }
};

struct Outcome {
  bool done = false;
  PartitionResult result{};
};

class PartitionCluster : public meta::SimCluster<Node> {
 public:
  explicit PartitionCluster(uint64_t seed, uint32_t partitions = 64,
                            uint32_t dead_after_ms = cluster::SimNetworkConfig{}.dead_after_ms)
      : SimCluster({.seed = seed, .partitions = partitions, .inform_hosts = true, .dead_after_ms = dead_after_ms}) {}

  // PartitionHostConfig::attempt_timeout_ms of the nodes started from now on.
  uint32_t attempt_timeout_ms = PartitionHostConfig{}.attempt_timeout_ms;

  void Start(NodeId id) {
    Node& node = nodes_[id];
    if (!node.engine) node.engine = std::make_unique<persistence::MemoryEngine>();
    ASSERT_TRUE(StartMeta(id));
    PartitionHostConfig partition_config;
    partition_config.self = id;
    partition_config.boot_id = node.boot;
    partition_config.raft.random_seed = options_.seed * 1000 + id * 13 + boots_;
    partition_config.attempt_timeout_ms = attempt_timeout_ms;
    node.partitions =
        std::make_unique<PartitionHost>(*node.host, *node.transport, *node.meta, *node.engine, partition_config,
                                        [this](PartitionId) {
                                          return std::make_unique<PartitionState>(
                                              [this] { return clock_.WallMs(); });
                                        });
    node.partitions->Start();
    node.dispatch->other_frames = [partitions = node.partitions.get()](NodeId from, uint8_t type,
                                                                         std::string_view body) {
      if (cluster::kPartitionFrames.Contains(type)) partitions->OnFrame(from, type, body);
    };
    FinishStart(id);
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

  // A retained Put proposed from node `on` to the topic's partition; true
  // once committed.
  bool PutRetained(NodeId on, const std::string& topic, const std::string& payload) {
    Message message;
    message.topic = topic;
    message.payload = MakePayload(payload);
    message.retain = true;
    message.id = MessageId{static_cast<uint16_t>(on), HybridLogicalClock::Pack(++retained_clock_, 0), 1};
    auto outcome = std::make_shared<Outcome>();
    PartitionHost& host = *nodes_.at(on).partitions;
    host.Propose(host.PartitionOf(RetainedKey(topic)), EncodeRetainedPut(message), [outcome](PartitionResult result) {
      outcome->done = true;
      outcome->result = std::move(result);
    });
    EXPECT_TRUE(RunUntil([&] { return outcome->done; }, 10'000));
    return outcome->result.status == meta::ProposeStatus::kOk;
  }
  // A Read of `topic`'s retained value from node `on`: the status, and the
  // payload ("" if none).
  std::pair<meta::ProposeStatus, std::string> ReadRetained(NodeId on, const std::string& topic) {
    auto outcome = std::make_shared<Outcome>();
    PartitionHost& host = *nodes_.at(on).partitions;
    host.Read(host.PartitionOf(RetainedKey(topic)), EncodeRetainedMatch(topic), [outcome](PartitionResult result) {
      outcome->done = true;
      outcome->result = std::move(result);
    });
    EXPECT_TRUE(RunUntil([&] { return outcome->done; }, 10'000));
    std::string payload;
    if (outcome->result.result) {
      auto messages = DecodeRetainedMatchResult(*outcome->result.result);
      EXPECT_TRUE(messages.has_value());
      if (messages && !messages->empty()) payload = *messages->front()->payload;
    }
    return {outcome->result.status, payload};
  }

  void WipeDisk(NodeId id) {
    nodes_.at(id).engine = std::make_unique<persistence::MemoryEngine>();
    WipeMetaDisk(id);
  }
  PartitionHost& partitions(NodeId id) { return *nodes_.at(id).partitions; }
  // Links' losses and returns reach every running node's raft host, as in
  // estuaryd (meta::SimDispatch::links_tell_host).
  void LinksTellHosts(bool on) {
    for (auto& [id, node] : nodes_) {
      if (node.dispatch) node.dispatch->links_tell_host = on;
    }
  }
  // A task transfer's claim from node `on`: applies only while node
  // `from` owns the id and, with `expected` (node not 0), only while that
  // exact owner does (a guarded claim).
  std::shared_ptr<Outcome> ClaimFrom(NodeId on, const std::string& client, uint64_t connection, NodeId from,
                                     const ClientOwner& expected) {
    auto outcome = std::make_shared<Outcome>();
    Node& node = nodes_.at(on);
    const RegistryCommand command = ClaimClient{client, ClientOwner{on, node.boot, connection}, false, from, expected};
    node.partitions->Propose(node.partitions->PartitionOf(client), EncodeRegistryCommand(command),
                             [outcome](PartitionResult result) {
                               outcome->done = true;
                               outcome->result = std::move(result);
                             });
    return outcome;
  }
  meta::RaftHost& host(NodeId id) { return *nodes_.at(id).host; }
  const ClientRegistry* registry(NodeId id, PartitionId partition) {
    const PartitionState* state = this->state(id, partition);
    return state == nullptr ? nullptr : &state->registry();
  }
  const PartitionState* state(NodeId id, PartitionId partition) {
    return dynamic_cast<const PartitionState*>(nodes_.at(id).partitions->machine(partition));
  }
  std::vector<NodeId> ids() {
    std::vector<NodeId> out;
    for (auto& [id, node] : nodes_) out.push_back(id);
    return out;
  }

  std::optional<NodeId> Leader(PartitionId partition) { return LeaderBy(RaftOf(partition)); }
  uint64_t retained_clock_ = 1'800'000'000'000;  // message ids' wall ms, always newer
  std::vector<raft::NodeId> Voters(PartitionId partition) { return VotersBy(RaftOf(partition)); }

 private:
  static std::function<const raft::Raft*(Node&)> RaftOf(PartitionId partition) {
    return [partition](Node& node) -> const raft::Raft* {
      meta::RaftGroup* group = node.partitions->group(partition);
      return group != nullptr ? &group->raft() : nullptr;
    };
  }
};

inline void StartAll(PartitionCluster& cluster, NodeId count) {
  for (NodeId id = 1; id <= count; ++id) cluster.Start(id);
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.MembersKnown(count); }, 20'000));
}

// ESTUARY_PARTITION_SEEDS=N runs every cluster test with seeds 1..N
// instead of its own few.
inline std::vector<uint64_t> Seeds(std::initializer_list<uint64_t> defaults) {
  if (const char* count = std::getenv("ESTUARY_PARTITION_SEEDS")) {
    std::vector<uint64_t> seeds;
    for (uint64_t seed = 1; seed <= std::strtoull(count, nullptr, 10); ++seed) seeds.push_back(seed);
    return seeds;
  }
  return defaults;
}

inline std::vector<NodeId> Sorted(std::vector<NodeId> nodes) {
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

}  // namespace estuary::partition::sim
