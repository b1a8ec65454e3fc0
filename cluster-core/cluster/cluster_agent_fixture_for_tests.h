#pragma once
// The cluster agent tests' fixture (cluster_agent_test.cc,
// cluster_agent_peers_test.cc, cluster_agent_full_test.cc,
// cluster_silent_cut_test.cc): ClusterAgent + ShardBroker across "nodes" in
// one process, every node's shards and agent on one SimLoop, joined by an
// in-memory Transport.
//
// Two ways to run the nodes. AddNode alone: the agents without membership,
// metadata group or partitions, for the forwarding paths; their routes go
// through a RouteBoard (a double of the metadata group's routing) and a
// test declares a node gone itself (DeclareGoneEverywhere). StartFull: as
// estuaryd runs them, with all three and durable shards.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cluster-core/cluster/cluster_agent.h"
#include "io/sim/sim_loop.h"
#include "persistence/memory_engine.h"

namespace estuary::cluster::test_support {
using core::ShardBroker;

class FakeNetwork;

// Frames go through the loop in order; a link can be cut, paused (frames
// wait) or made full (Send answers kFull until Writable()).
class FakeTransport final : public Transport {
 public:
  FakeTransport(FakeNetwork& network, NodeId self) : network_(network), self_(self) {}
  NodeId self() const override { return self_; }
  void AddPeerAddress(const std::string&) override {}
  void RemovePeer(NodeId) override {}
  SendResult Send(NodeId to, uint8_t type, std::string_view body) override;
  bool connected(NodeId node) const override;
  std::vector<PeerInfo> peers() const override { return {}; }
  LinkHandler* handler() const { return handler_; }
  std::set<NodeId> full;
  size_t sent = 0;

 private:
  FakeNetwork& network_;
  NodeId self_;
};

class FakeNetwork {
 public:
  explicit FakeNetwork(io::SimLoop& loop) : loop_(loop) {}
  void Register(FakeTransport* transport) { transports_[transport->self()] = transport; }
  void Unregister(NodeId node) {
    transports_.erase(node);
    for (auto it = links_.begin(); it != links_.end();) {
      if (it->first.first == node || it->first.second == node) {
        const NodeId other = it->first.first == node ? it->first.second : it->first.first;
        it = links_.erase(it);
        if (auto* t = Find(other); t != nullptr && t->handler()) t->handler()->OnPeerDown(node);
      } else {
        ++it;
      }
    }
  }
  void Connect(NodeId a, NodeId b) {
    links_[Key(a, b)] = Link{++epoch_};
    Find(a)->handler()->OnPeerUp(PeerInfo{b, "fake"});
    Find(b)->handler()->OnPeerUp(PeerInfo{a, "fake"});
  }
  void Cut(NodeId a, NodeId b) {
    links_.erase(Key(a, b));
    Find(a)->handler()->OnPeerDown(b);
    Find(b)->handler()->OnPeerDown(a);
  }
  bool Up(NodeId a, NodeId b) const { return links_.count(Key(a, b)) > 0; }
  // A silent cut (issue 29): the link stays up on both sides and sends
  // succeed, but every frame from `from` to `to` vanishes, in flight too;
  // no side is told (the test ends the link later, as the links layer does
  // once it has heard nothing for a while). Two-way: both directions.
  void Silence(NodeId from, NodeId to, bool two_way = true) {
    silent_.insert({from, to});
    if (two_way) silent_.insert({to, from});
  }
  void Unsilence(NodeId a, NodeId b) {
    silent_.erase({a, b});
    silent_.erase({b, a});
  }
  void Carry(NodeId from, NodeId to, uint8_t type, std::string body) {
    if (silent_.contains({from, to})) return;
    const uint64_t epoch = links_.at(Key(from, to)).epoch;
    auto deliver = [this, from, to, type, body = std::move(body), epoch] {
      auto it = links_.find(Key(from, to));
      if (it == links_.end() || it->second.epoch != epoch) return;  // the link went down meanwhile
      if (silent_.contains({from, to})) return;
      if (auto* t = Find(to); t != nullptr && t->handler()) t->handler()->OnFrame(from, type, body);
    };
    if (paused) {
      held_.push_back(std::move(deliver));
    } else {
      loop_.Post(std::move(deliver));
    }
  }
  void Resume() {
    paused = false;
    for (auto& deliver : held_) loop_.Post(std::move(deliver));
    held_.clear();
  }
  bool paused = false;

 private:
  struct Link {
    uint64_t epoch = 0;
  };
  static std::pair<NodeId, NodeId> Key(NodeId a, NodeId b) { return {std::min(a, b), std::max(a, b)}; }
  FakeTransport* Find(NodeId node) {
    auto it = transports_.find(node);
    return it == transports_.end() ? nullptr : it->second;
  }
  io::SimLoop& loop_;
  std::map<NodeId, FakeTransport*> transports_;
  std::map<std::pair<NodeId, NodeId>, Link> links_;
  std::deque<std::function<void()>> held_;
  std::set<std::pair<NodeId, NodeId>> silent_;
  uint64_t epoch_ = 0;
};

inline SendResult FakeTransport::Send(NodeId to, uint8_t type, std::string_view body) {
  if (!network_.Up(self_, to)) return SendResult::kNoLink;
  if (full.count(to)) return SendResult::kFull;
  ++sent;
  network_.Carry(self_, to, type, std::string(body));
  return SendResult::kQueued;
}

inline bool FakeTransport::connected(NodeId node) const { return network_.Up(self_, node); }

// The metadata group's part in routing, as a double: a node's route
// changes reach every other node's agent (ApplyRemoteRoutes) through the
// loop, in order, whatever the links do, and a node that joins learns the
// routes held. A crashed node's routes stay until Forget, as the group keeps
// them until the node's MemberGone.
class RouteBoard {
 public:
  explicit RouteBoard(io::SimLoop& loop) : loop_(loop) {}
  void Join(NodeId node, ClusterAgent& agent) {
    agents_[node] = &agent;
    agent.UseRouteProposer([this, node](const ClusterAgent::RouteChanges& changes) { Propose(node, changes); });
    for (const auto& [other, routes] : routes_) {
      if (other != node && !routes.empty()) Tell(node, other, {routes.begin(), routes.end()}, {});
    }
  }
  void Leave(NodeId node) { agents_.erase(node); }
  // The node's MemberGone: its routes go everywhere.
  void Forget(NodeId node) {
    auto it = routes_.find(node);
    if (it == routes_.end()) return;
    std::vector<meta::RouteKey> removed(it->second.begin(), it->second.end());
    routes_.erase(it);
    for (const auto& [target, agent] : agents_) {
      if (target != node) Tell(target, node, {}, removed);
    }
  }

 private:
  struct Less {
    bool operator()(const meta::RouteKey& a, const meta::RouteKey& b) const {
      return std::tie(a.filter, a.share) < std::tie(b.filter, b.share);
    }
  };
  void Propose(NodeId node, const ClusterAgent::RouteChanges& changes) {
    std::vector<meta::RouteKey> added;
    std::vector<meta::RouteKey> removed;
    for (const auto& [route, add] : changes) {
      if (add) {
        routes_[node].insert(route);
        added.push_back(route);
      } else {
        routes_[node].erase(route);
        removed.push_back(route);
      }
    }
    for (const auto& [target, agent] : agents_) {
      if (target != node) Tell(target, node, added, removed);
    }
  }
  void Tell(NodeId target, NodeId node, std::vector<meta::RouteKey> added, std::vector<meta::RouteKey> removed) {
    loop_.Post([this, target, node, added = std::move(added), removed = std::move(removed)] {
      if (auto it = agents_.find(target); it != agents_.end()) it->second->ApplyRemoteRoutes(node, added, removed);
    });
  }
  io::SimLoop& loop_;
  std::map<NodeId, ClusterAgent*> agents_;
  std::map<NodeId, std::set<meta::RouteKey, Less>> routes_;
};

// One node: its shards, their link, its transport and agent.
struct TestNode final : core::ShardLink {
  TestNode(io::SimLoop& loop, FakeNetwork& network, RouteBoard& board, NodeId id, uint16_t shard_count,
           ClusterAgentConfig config)
      : loop_(loop), network_(network), board_(board), transport(network, id), metrics(shard_count) {
    network.Register(&transport);
    for (uint16_t i = 0; i < shard_count; ++i) {
      core::ShardConfig shard;
      shard.node_id = id;
      shard.shard_id = i;
      shard.shard_count = shard_count;
      shards.push_back(std::make_unique<ShardBroker>(shard, loop, *this, metrics[i]));
    }
    config.self = id;
    config.shard_count = shard_count;
    agent = std::make_unique<ClusterAgent>(config, loop, transport, *this,
                                           [&loop](std::function<void()> fn) { loop.Post(std::move(fn)); });
    for (auto& shard : shards) shard->set_cluster(&agent->port());
    board.Join(id, *agent);
  }
  ~TestNode() override {
    board_.Leave(transport.self());
    network_.Unregister(transport.self());
    alive_.reset();
  }
  void Post(uint16_t shard, std::function<void(ShardBroker&)> work) override {
    std::weak_ptr<int> alive = alive_;
    loop_.Post([this, alive, shard, work = std::move(work)] {
      if (alive.lock()) work(*shards[shard]);
    });
  }
  ShardBroker& ShardOf(const std::string& client_id) {
    return *shards[core::ShardForClientId(client_id, static_cast<uint16_t>(shards.size()))];
  }

  io::SimLoop& loop_;
  FakeNetwork& network_;
  RouteBoard& board_;
  FakeTransport transport;
  std::vector<core::ShardMetrics> metrics;
  std::vector<std::unique_ptr<ShardBroker>> shards;
  std::unique_ptr<ClusterAgent> agent;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

class RecordingSink final : public core::SessionSink {
 public:
  void OnDeliveriesReady() override {}
  void OnDetached(core::DetachReason reason) override { detached.push_back(reason); }
  std::vector<core::DetachReason> detached;
};

class CountingFlow final : public core::PublisherFlow {
 public:
  void PauseIngress() override { ++paused; }
  void ResumeIngress() override { ++resumed; }
  int paused = 0;
  int resumed = 0;
};

class ClusterAgentTest : public ::testing::Test {
 protected:
  TestNode& AddNode(NodeId id, uint16_t shards = 2) {
    nodes_[id] = std::make_unique<TestNode>(loop_, network_, routes_, id, shards, config_);
    return *nodes_[id];
  }
  // What the metadata group's MemberGone does on every node but the gone
  // one: declared gone there, then its routes dropped (the plain ones
  // after replay_grace_ms, as the node is gone by then).
  void DeclareGoneEverywhere(NodeId node) {
    for (auto& [id, other] : nodes_) {
      if (id != node) other->agent->DeclareGone(node);
    }
    routes_.Forget(node);
    loop_.RunUntilIdle();
  }
  // Nodes 1 and 2 with membership (suspect after 500 ms, down only after
  // 30 s), linked and live; the forward deadline cannot act within a test.
  // Returns the membership config.
  MembershipConfig StartTwoWithMembership() {
    config_.forward_timeout_ms = 60'000;
    AddNode(1);
    AddNode(2);
    MembershipConfig members;
    members.suspect_after_ms = 500;
    members.down_after_ms = 30'000;
    for (NodeId id : {1, 2}) {
      members.cluster_address = "node" + std::to_string(id);
      nodes_[id]->agent->EnableMembership(members).Start(id == 1 ? std::vector<std::string>{}
                                                                 : std::vector<std::string>{"node1"});
    }
    ConnectAll();
    loop_.AdvanceBy(1000);
    return members;
  }
  void StartThree() {
    for (NodeId id : {1, 2, 3}) AddNode(id);
    ConnectAll();
  }
  // The nodes as estuaryd runs them: membership, the metadata group and
  // partitions (the client-id registry, sessions, retained messages) on
  // memory engines, and durable shards (as with --data-dir). The first id
  // bootstraps, the others are seeded with it. Returns once every node's
  // metadata group has every node as a member.
  void StartFull(const std::vector<NodeId>& ids) {
    for (NodeId id : ids) {
      AddNode(id);
      for (auto& shard : nodes_[id]->shards) {
        shard_engines_.push_back(std::make_unique<persistence::MemoryEngine>());
        shard->AttachStore(*shard_engines_.back());
        ASSERT_TRUE(shard->Recover());
      }
      MembershipConfig members;
      members.cluster_address = Address(id);
      members.incarnation = 1;
      nodes_[id]->agent->EnableMembership(members);
      meta::MetaGroupConfig meta;
      meta.cluster_address = Address(id);
      meta.boot_id = id;
      meta.has_seeds = id != ids.front();
      ASSERT_TRUE(nodes_[id]->agent->EnableMetadata(meta, meta_engines_[id]));
      partition::PartitionHostConfig partitions;
      ASSERT_TRUE(nodes_[id]->agent->EnablePartitions(partitions, partition_engines_[id]));
    }
    for (NodeId id : ids) {
      nodes_[id]->agent->membership()->Start(id == ids.front() ? std::vector<std::string>{}
                                                               : std::vector<std::string>{Address(ids.front())});
    }
    ConnectAll();
    ASSERT_TRUE(RunUntil(
        [&] {
          for (NodeId id : ids) {
            const meta::MetaGroup* group = nodes_[id]->agent->metadata();
            if (group == nullptr || group->state().members().size() != ids.size()) return false;
          }
          return true;
        },
        30'000))
        << "the metadata group did not take in every node";
  }
  static std::string Address(NodeId id) { return "node" + std::to_string(id); }
  // Steps simulated time by 10 ms until `done`, checking `invariant` after
  // every step; false at the deadline.
  bool RunUntil(const std::function<bool()>& done, int64_t deadline_ms,
                const std::function<void()>& invariant = {}) {
    for (int64_t waited = 0; waited <= deadline_ms; waited += 10) {
      if (done()) return true;
      loop_.AdvanceBy(10);
      if (invariant) invariant();
    }
    return done();
  }
  // Claims `client_id` on `node`, as a CONNECT there does; true once granted.
  // The session read back is not adopted (Connect below does that), but a
  // new copy is announced, as the shard does (its changes are fenced by it).
  bool Claim(NodeId node, const std::string& client_id, bool clean_start = false) {
    bool answered = false;
    bool granted = false;
    nodes_[node]->agent->ClaimClientId(client_id, clean_start, [&, node](ClusterAgent::ClaimAnswer answer) {
      granted = answer.granted;
      if (!answer.granted || !answer.copy_fence) {
        answered = true;
        return;
      }
      TestNode& at = *nodes_[node];
      const uint16_t shard = core::ShardForClientId(client_id, static_cast<uint16_t>(at.shards.size()));
      at.Post(shard, [&, fence = *answer.copy_fence](ShardBroker& broker) {
        broker.SessionCopyReplaced(client_id, fence);
        answered = true;
      });
    });
    return RunUntil([&] { return answered; }, 20'000) && granted;
  }
  // A CONNECT's claim as estuaryd's shard runtime answers it: the session
  // read back is adopted by the client id's shard, and a replaced copy is
  // announced (ShardBroker::SessionCopyReplaced); true once granted and
  // done. `between` runs on the agent between the claim's answer and the
  // shard's adoption.
  bool Connect(NodeId node, const std::string& client_id, const std::function<void()>& between = {}) {
    bool done = false;
    bool granted = false;
    nodes_[node]->agent->ClaimClientId(client_id, false, [&, node](ClusterAgent::ClaimAnswer answer) {
      granted = answer.granted;
      if (between) between();
      TestNode& at = *nodes_[node];
      const uint16_t shard = core::ShardForClientId(client_id, static_cast<uint16_t>(at.shards.size()));
      at.Post(shard, [&, answer = std::move(answer)](ShardBroker& broker) {
        if (answer.granted && answer.session) {
          broker.AdoptSession(client_id, *answer.session, false, answer.taken_from);
        }
        if (answer.granted && answer.copy_fence) broker.SessionCopyReplaced(client_id, *answer.copy_fence);
        done = true;
      });
    });
    return RunUntil([&] { return done; }, 20'000) && granted;
  }
  // kill -9: no goodbye, its links drop.
  void Crash(NodeId node) {
    nodes_.erase(node);
    loop_.RunUntilIdle();
  }
  void ConnectAll() {
    for (auto& [a, node_a] : nodes_) {
      for (auto& [b, node_b] : nodes_) {
        if (a < b && !network_.Up(a, b)) network_.Connect(a, b);
      }
    }
    loop_.RunUntilIdle();
  }
  core::Session* Subscriber(NodeId node, const std::string& client_id, const std::string& filter,
                            QoS qos = QoS::kExactlyOnce) {
    ShardBroker& shard = nodes_[node]->ShardOf(client_id);
    core::Session* session = shard.Attach(client_id, true, &sink_).session;
    core::SubscriptionOptions options;
    options.max_qos = qos;
    shard.Subscribe(session, filter, options);
    loop_.RunUntilIdle();
    return session;
  }
  MessagePtr Make(NodeId node, std::string topic, std::string payload, QoS qos = QoS::kAtLeastOnce, bool retain = false,
                  std::string publisher = "pub") {
    auto message = std::make_shared<Message>();
    message->id = nodes_[node]->ShardOf(publisher).NextMessageId();
    message->topic = std::move(topic);
    message->payload = MakePayload(std::move(payload));
    message->qos = qos;
    message->retain = retain;
    message->origin = Origin{Protocol::kMqtt, std::move(publisher), node};
    return message;
  }
  // Publishes on the publisher's shard of `node`; returns a flag set by on_safe.
  std::shared_ptr<bool> Publish(NodeId node, MessagePtr message, core::FlowId flow = 0) {
    auto safe = std::make_shared<bool>(false);
    nodes_[node]
        ->ShardOf(message->origin.client_id)
        .Publish(
            message, [safe] { *safe = true; }, flow);
    return safe;
  }
  std::vector<std::pair<std::string, QoS>> Drain(core::Session* session) {
    std::vector<std::pair<std::string, QoS>> out;
    while (session->HasQueued()) {
      core::Delivery delivery = session->PopQueued();
      out.emplace_back(*delivery.message->payload, delivery.qos);
    }
    return out;
  }

  io::ManualClock clock_;
  io::SimLoop loop_{clock_};
  FakeNetwork network_{loop_};
  RouteBoard routes_{loop_};
  ClusterAgentConfig config_;
  RecordingSink sink_;
  // StartFull's engines outlive the nodes (declared before them).
  std::map<NodeId, persistence::MemoryEngine> meta_engines_;
  std::map<NodeId, persistence::MemoryEngine> partition_engines_;
  std::vector<std::unique_ptr<persistence::MemoryEngine>> shard_engines_;
  std::map<NodeId, std::unique_ptr<TestNode>> nodes_;
};

}  // namespace estuary::cluster::test_support
