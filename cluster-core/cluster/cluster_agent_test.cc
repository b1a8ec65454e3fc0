// ClusterAgent + ShardBroker across "nodes" in one process: every node's
// shards and agent run on one SimLoop, joined by an in-memory Transport.
#include "cluster-core/cluster/cluster_agent.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <set>

#include "io/sim/sim_loop.h"

namespace estuary::cluster {
namespace {

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
  void Carry(NodeId from, NodeId to, uint8_t type, std::string body) {
    const uint64_t epoch = links_.at(Key(from, to)).epoch;
    auto deliver = [this, from, to, type, body = std::move(body), epoch] {
      auto it = links_.find(Key(from, to));
      if (it == links_.end() || it->second.epoch != epoch) return;  // the link went down meanwhile
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
  uint64_t epoch_ = 0;
};

SendResult FakeTransport::Send(NodeId to, uint8_t type, std::string_view body) {
  if (!network_.Up(self_, to)) return SendResult::kNoLink;
  if (full.count(to)) return SendResult::kFull;
  ++sent;
  network_.Carry(self_, to, type, std::string(body));
  return SendResult::kQueued;
}

bool FakeTransport::connected(NodeId node) const { return network_.Up(self_, node); }

// One node: its shards, their link, its transport and agent.
struct TestNode final : core::ShardLink {
  TestNode(io::SimLoop& loop, FakeNetwork& network, NodeId id, uint16_t shard_count, ClusterAgentConfig config)
      : loop_(loop), network_(network), transport(network, id), metrics(shard_count) {
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
  }
  ~TestNode() override {
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
    nodes_[id] = std::make_unique<TestNode>(loop_, network_, id, shards, config_);
    return *nodes_[id];
  }
  // Nodes 1 and 2 with membership (suspect after 500 ms, down only after
  // 30 s), linked and live; neither the grace timer nor the forward
  // deadline can act within a test. Returns the membership config.
  MembershipConfig StartTwoWithMembership() {
    config_.peer_gone_grace_ms = 600'000;
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
  MessagePtr Make(NodeId node, std::string topic, std::string payload, QoS qos = QoS::kAtLeastOnce,
                  bool retain = false, std::string publisher = "pub") {
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
    nodes_[node]->ShardOf(message->origin.client_id).Publish(message, [safe] { *safe = true; }, flow);
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
  ClusterAgentConfig config_;
  RecordingSink sink_;
  std::map<NodeId, std::unique_ptr<TestNode>> nodes_;
};

TEST_F(ClusterAgentTest, DeliversAcrossNodesAtEveryQosWithWildcards) {
  AddNode(1);
  AddNode(2);
  ConnectAll();
  core::Session* plus = Subscriber(2, "sub-plus", "s/+/x", QoS::kExactlyOnce);
  core::Session* hash = Subscriber(2, "sub-hash", "s/#", QoS::kAtLeastOnce);
  for (QoS qos : {QoS::kAtMostOnce, QoS::kAtLeastOnce, QoS::kExactlyOnce}) {
    Publish(1, Make(1, "s/a/x", std::to_string(int(qos)), qos));
  }
  Publish(1, Make(1, "other", "no"));
  loop_.RunUntilIdle();
  using Got = std::vector<std::pair<std::string, QoS>>;
  EXPECT_EQ(Drain(plus), (Got{{"0", QoS::kAtMostOnce}, {"1", QoS::kAtLeastOnce}, {"2", QoS::kExactlyOnce}}));
  EXPECT_EQ(Drain(hash), (Got{{"0", QoS::kAtMostOnce}, {"1", QoS::kAtLeastOnce}, {"2", QoS::kAtLeastOnce}}));
  // One forward per publish with matching routes, whatever the subscriber count.
  EXPECT_EQ(nodes_[1]->agent->counters().forwards_out, 3u);
  EXPECT_EQ(nodes_[2]->agent->counters().forwards_in, 3u);
  EXPECT_EQ(nodes_[1]->agent->remote_route_count(), 2u);
}

TEST_F(ClusterAgentTest, ReceivingNodeNeverForwardsToAThirdNode) {
  AddNode(1);
  AddNode(2);
  AddNode(3);
  ConnectAll();
  core::Session* on2 = Subscriber(2, "a", "t");
  core::Session* on3 = Subscriber(3, "b", "t");
  Publish(1, Make(1, "t", "m"));
  loop_.RunUntilIdle();
  EXPECT_EQ(Drain(on2).size(), 1u);
  EXPECT_EQ(Drain(on3).size(), 1u);
  EXPECT_EQ(nodes_[2]->agent->counters().forwards_out, 0u);
  EXPECT_EQ(nodes_[3]->agent->counters().forwards_out, 0u);
}

TEST_F(ClusterAgentTest, PublisherAcknowledgementWaitsForTheRemoteSafeFrame) {
  AddNode(1);
  AddNode(2);
  ConnectAll();
  Subscriber(2, "sub", "t");
  network_.paused = true;  // frames between nodes wait
  auto safe = Publish(1, Make(1, "t", "m", QoS::kAtLeastOnce));
  loop_.RunUntilIdle();
  EXPECT_FALSE(*safe);
  network_.Resume();
  loop_.RunUntilIdle();
  EXPECT_TRUE(*safe);
  // Without remote subscribers the acknowledgement does not wait.
  network_.paused = true;
  auto local_only = Publish(1, Make(1, "nobody", "m", QoS::kAtLeastOnce));
  loop_.RunUntilIdle();
  EXPECT_TRUE(*local_only);
  network_.Resume();
}

TEST_F(ClusterAgentTest, QosOneForwardToADownLinkIsReleasedByTheDeadline) {
  config_.peer_gone_grace_ms = 60'000;
  AddNode(1);
  AddNode(2);
  ConnectAll();
  Subscriber(2, "sub", "t");
  network_.Cut(1, 2);
  auto safe = Publish(1, Make(1, "t", "m", QoS::kAtLeastOnce));
  auto qos0 = Publish(1, Make(1, "t", "m0", QoS::kAtMostOnce));
  loop_.RunUntilIdle();
  EXPECT_FALSE(*safe);
  EXPECT_TRUE(*qos0);
  EXPECT_EQ(nodes_[1]->agent->counters().forwards_dropped, 1u);  // QoS 0 without a link
  loop_.AdvanceBy(config_.forward_timeout_ms + config_.tick_ms);
  EXPECT_TRUE(*safe);
  EXPECT_EQ(nodes_[1]->agent->counters().forwards_expired, 1u);
}

TEST_F(ClusterAgentTest, HeldForwardsAreSentWhenTheLinkComesBackInTime) {
  config_.peer_gone_grace_ms = 60'000;
  AddNode(1);
  AddNode(2);
  ConnectAll();
  core::Session* sub = Subscriber(2, "sub", "t");
  network_.Cut(1, 2);
  auto safe = Publish(1, Make(1, "t", "held", QoS::kAtLeastOnce));
  loop_.RunUntilIdle();
  EXPECT_EQ(nodes_[1]->agent->counters().forwards_held, 1u);
  network_.Connect(1, 2);
  loop_.RunUntilIdle();
  EXPECT_TRUE(*safe);
  ASSERT_EQ(Drain(sub).size(), 1u);
  EXPECT_EQ(nodes_[1]->agent->counters().forwards_expired, 0u);
}

TEST_F(ClusterAgentTest, SharedGroupAcrossNodesGivesEachMessageToExactlyOneMember) {
  AddNode(1);
  AddNode(2);
  AddNode(3);
  ConnectAll();
  std::vector<core::Session*> members{Subscriber(1, "m1", "$share/g/job/+"), Subscriber(2, "m2", "$share/g/job/+"),
                                      Subscriber(2, "m3", "$share/g/job/+"), Subscriber(3, "m4", "$share/g/job/+")};
  const int count = 60;
  for (int i = 0; i < count; ++i) Publish(1, Make(1, "job/x", std::to_string(i)));
  loop_.RunUntilIdle();
  std::multiset<std::string> seen;
  for (core::Session* member : members) {
    auto got = Drain(member);
    EXPECT_FALSE(got.empty()) << member->client_id();
    for (auto& [payload, qos] : got) seen.insert(payload);
  }
  ASSERT_EQ(seen.size(), size_t(count));
  for (int i = 0; i < count; ++i) EXPECT_EQ(seen.count(std::to_string(i)), 1u) << i;
}

TEST_F(ClusterAgentTest, SnapshotAfterARestartReplacesStaleRoutes) {
  config_.peer_gone_grace_ms = 60'000;  // the restart is faster than the grace period
  AddNode(1);
  AddNode(2);
  ConnectAll();
  Subscriber(2, "old", "old/#");
  ASSERT_EQ(nodes_[1]->shards[0]->router().RoutesOf(core::NodeDestination(2)).size(), 1u);
  nodes_.erase(2);  // crash: no goodbye
  loop_.RunUntilIdle();
  AddNode(2);
  Subscriber(2, "new", "new/#");
  ConnectAll();
  for (auto& shard : nodes_[1]->shards) {
    auto routes = shard->router().RoutesOf(core::NodeDestination(2));
    ASSERT_EQ(routes.size(), 1u);
    EXPECT_EQ(routes[0].first, "new/#");
  }
  Publish(1, Make(1, "old/x", "stale"));
  loop_.RunUntilIdle();
  EXPECT_EQ(nodes_[1]->agent->counters().forwards_out, 0u);
}

TEST_F(ClusterAgentTest, RoutesOfAPeerGoneForTheGracePeriodAreForgotten) {
  AddNode(1);
  AddNode(2);
  ConnectAll();
  Subscriber(2, "sub", "t");
  network_.Cut(1, 2);
  loop_.AdvanceBy(config_.peer_gone_grace_ms / 2);
  EXPECT_EQ(nodes_[1]->shards[1]->router().RoutesOf(core::NodeDestination(2)).size(), 1u);
  loop_.AdvanceBy(config_.peer_gone_grace_ms);
  EXPECT_EQ(nodes_[1]->agent->remote_route_count(), 0u);
  // The shards keep them for replay_grace_ms more (forwards on them are
  // replayed to the nodes that take the gone node's sessions over).
  for (auto& shard : nodes_[1]->shards) EXPECT_EQ(shard->router().RoutesOf(core::NodeDestination(2)).size(), 1u);
  loop_.AdvanceBy(config_.replay_grace_ms);
  for (auto& shard : nodes_[1]->shards) EXPECT_TRUE(shard->router().RoutesOf(core::NodeDestination(2)).empty());
}

TEST_F(ClusterAgentTest, NodeRouteIsOneRouteWhateverTheShardsHoldingIt) {
  AddNode(1, 4);
  AddNode(2);
  ConnectAll();
  for (int i = 0; i < 8; ++i) Subscriber(1, "c" + std::to_string(i), "same");
  EXPECT_EQ(nodes_[1]->agent->local_route_count(), 1u);
  EXPECT_EQ(nodes_[2]->agent->remote_route_count(), 1u);
}

TEST_F(ClusterAgentTest, RetainedMessagesReachEveryNodeLiveAndBySnapshot) {
  AddNode(1);
  AddNode(2);
  Publish(1, Make(1, "r/early", "before-link", QoS::kAtLeastOnce, true));
  loop_.RunUntilIdle();
  ConnectAll();
  Publish(1, Make(1, "r/live", "after-link", QoS::kAtLeastOnce, true));
  loop_.RunUntilIdle();
  for (auto& shard : nodes_[2]->shards) EXPECT_EQ(shard->retained().size(), 2u);
  ShardBroker& shard = nodes_[2]->ShardOf("late");
  core::Session* late = shard.Attach("late", true, &sink_).session;
  core::SubscriptionOptions options;
  options.max_qos = QoS::kAtLeastOnce;
  shard.Subscribe(late, "r/#", options);
  shard.DeliverRetained(late, "r/#", options, false);
  EXPECT_EQ(Drain(late).size(), 2u);
  // Clearing it on node 2 clears it on node 1.
  Publish(2, Make(2, "r/live", "", QoS::kAtLeastOnce, true));
  loop_.RunUntilIdle();
  for (auto& s : nodes_[1]->shards) EXPECT_EQ(s->retained().size(), 1u);
}

TEST_F(ClusterAgentTest, LargeRetainedSnapshotTravelsInChunks) {
  AddNode(1);
  AddNode(2);
  for (int i = 0; i < 40; ++i) {
    Publish(1, Make(1, "big/" + std::to_string(i), std::string(100'000, 'r'), QoS::kAtLeastOnce, true));
  }
  loop_.RunUntilIdle();
  const size_t sent_before = nodes_[1]->transport.sent;
  ConnectAll();
  EXPECT_GE(nodes_[1]->transport.sent - sent_before, 4u);  // route snapshot + >= 3 retained frames
  for (auto& shard : nodes_[2]->shards) EXPECT_EQ(shard->retained().size(), 40u);
}

TEST_F(ClusterAgentTest, AttachOnAnotherNodeTakesTheClientIdOver) {
  AddNode(1);
  AddNode(2);
  ConnectAll();
  RecordingSink first, second;
  nodes_[1]->ShardOf("dev").Attach("dev", false, &first);
  loop_.RunUntilIdle();
  nodes_[2]->ShardOf("dev").Attach("dev", false, &second);
  loop_.RunUntilIdle();
  ASSERT_EQ(first.detached.size(), 1u);
  EXPECT_EQ(first.detached[0], core::DetachReason::kTakenOver);
  EXPECT_TRUE(second.detached.empty());
  EXPECT_EQ(nodes_[1]->ShardOf("dev").FindSession("dev"), nullptr);
  EXPECT_NE(nodes_[2]->ShardOf("dev").FindSession("dev"), nullptr);
}

TEST_F(ClusterAgentTest, FullLinkHoldsABoundedQueueAndPausesThePublisher) {
  config_.max_held_bytes = 64 * 1024;
  AddNode(1);
  AddNode(2);
  ConnectAll();
  core::Session* sub = Subscriber(2, "sub", "t", QoS::kAtMostOnce);
  auto flow = std::make_shared<CountingFlow>();
  ShardBroker& origin = nodes_[1]->ShardOf("pub");
  const core::FlowId id = origin.RegisterFlow(flow);
  nodes_[1]->transport.full.insert(2);
  const int count = 1000;
  for (int i = 0; i < count; ++i) Publish(1, Make(1, "t", std::string(200, 'p'), QoS::kAtMostOnce), id);
  loop_.RunUntilIdle();
  const ClusterCounters& c = nodes_[1]->agent->counters();
  EXPECT_GE(flow->paused, 1);  // the forward window stops the publisher
  EXPECT_GT(c.forwards_held, 0u);
  EXPECT_LE(c.forwards_held * 200, config_.max_held_bytes);
  EXPECT_EQ(c.forwards_held + c.forwards_dropped, uint64_t(count));
  nodes_[1]->transport.full.clear();
  nodes_[1]->agent->OnWritable(2);
  loop_.RunUntilIdle();
  EXPECT_EQ(c.forwards_held, 0u);
  EXPECT_EQ(flow->resumed, flow->paused);
  EXPECT_EQ(Drain(sub).size(), count - c.forwards_dropped);
}

TEST_F(ClusterAgentTest, OrderPerPublisherHoldsAcrossNodes) {
  AddNode(1, 3);
  AddNode(2, 3);
  ConnectAll();
  core::Session* sub = Subscriber(2, "sub", "seq/#", QoS::kAtLeastOnce);
  for (int i = 0; i < 50; ++i) Publish(1, Make(1, "seq/" + std::to_string(i % 3), std::to_string(i)));
  loop_.RunUntilIdle();
  auto got = Drain(sub);
  ASSERT_EQ(got.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(got[i].first, std::to_string(i));
}

TEST_F(ClusterAgentTest, ReportsRoutesAsJsonAndMetrics) {
  AddNode(1);
  AddNode(2);
  ConnectAll();
  Subscriber(2, "sub", "$share/grp/a/#");
  const std::string json = nodes_[1]->agent->RoutesJson();
  EXPECT_NE(json.find("\"share\":\"grp\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"link\":\"up\""), std::string::npos) << json;
  const std::string metrics = nodes_[1]->agent->MetricsText();
  EXPECT_NE(metrics.find("estuary_cluster_peer_up{node=\"1\",peer=\"2\"} 1"), std::string::npos) << metrics;
}

// Rolling upgrades (docs/storage.md): a node whose hello says link minor 0
// is an older binary that rejects delivery records with a group key; the
// shards write them without it until every linked node reads them.
TEST_F(ClusterAgentTest, DeliveryRecordsKeepTheGroupKeyOnlyWhileEveryLinkedNodeReadsThem) {
  AddNode(1);
  AddNode(2);
  ConnectAll();
  core::ClusterPort& port = nodes_[1]->agent->port();
  EXPECT_TRUE(port.GroupKeysInRecords());
  LinkHandler* handler = nodes_[1]->transport.handler();
  handler->OnPeerDown(2);
  handler->OnPeerUp(PeerInfo{2, "fake", 0});  // restarted on an older binary
  loop_.RunUntilIdle();
  EXPECT_FALSE(port.GroupKeysInRecords());
  EXPECT_EQ(nodes_[1]->agent->counters().older_binary_peers, 1u);
  handler->OnPeerDown(2);  // away again: it may come back as it was
  loop_.RunUntilIdle();
  EXPECT_FALSE(port.GroupKeysInRecords());
  handler->OnPeerUp(PeerInfo{2, "fake", kLinkVersionMinor});  // upgraded
  loop_.RunUntilIdle();
  EXPECT_TRUE(port.GroupKeysInRecords());
  EXPECT_TRUE(port.HandsOnGroupQueues());
  EXPECT_EQ(nodes_[1]->agent->counters().older_binary_peers, 0u);
}

// Minor 1 reads keyed records but does not apply the queues' hands: a
// partitioned group's QoS 2 goes without them (at least once) meanwhile.
TEST_F(ClusterAgentTest, QueueHandsAreMadeOnlyWhileEveryLinkedNodeAppliesThem) {
  AddNode(1);
  AddNode(2);
  ConnectAll();
  core::ClusterPort& port = nodes_[1]->agent->port();
  EXPECT_TRUE(port.HandsOnGroupQueues());
  LinkHandler* handler = nodes_[1]->transport.handler();
  handler->OnPeerDown(2);
  handler->OnPeerUp(PeerInfo{2, "fake", kMinorGroupKeyRecords});
  loop_.RunUntilIdle();
  EXPECT_FALSE(port.HandsOnGroupQueues());
  EXPECT_TRUE(port.GroupKeysInRecords());
  EXPECT_EQ(nodes_[1]->agent->counters().older_binary_peers, 1u);
  handler->OnPeerDown(2);
  handler->OnPeerUp(PeerInfo{2, "fake", kMinorQueueHands});
  loop_.RunUntilIdle();
  EXPECT_TRUE(port.HandsOnGroupQueues());
  EXPECT_EQ(nodes_[1]->agent->counters().older_binary_peers, 0u);
}

TEST_F(ClusterAgentTest, WithMembershipAPeerReportedDownIsGone) {
  config_.peer_gone_grace_ms = 600'000;  // the agent's own timer must not be what acts
  AddNode(1);
  AddNode(2);
  MembershipConfig members;
  members.down_after_ms = 2000;
  for (NodeId id : {1, 2}) {
    members.cluster_address = "node" + std::to_string(id);
    nodes_[id]->agent->EnableMembership(members).Start(id == 1 ? std::vector<std::string>{}
                                                               : std::vector<std::string>{"node1"});
  }
  ConnectAll();
  loop_.AdvanceBy(1000);
  ASSERT_TRUE(nodes_[1]->agent->membership()->IsLive(2));
  Subscriber(2, "sub", "t");
  ASSERT_EQ(nodes_[1]->agent->remote_route_count(), 1u);
  network_.Cut(1, 2);
  loop_.AdvanceBy(members.down_after_ms + 1000);
  EXPECT_FALSE(nodes_[1]->agent->membership()->IsLive(2));
  EXPECT_EQ(nodes_[1]->agent->remote_route_count(), 0u);
  loop_.AdvanceBy(config_.replay_grace_ms);
  for (auto& shard : nodes_[1]->shards) EXPECT_TRUE(shard->router().RoutesOf(core::NodeDestination(2)).empty());
}

// Issue 6 (TSan churn run) made a forward to a suspect node release its
// publisher at once; issue 7 (the takeover gap) takes that back: the
// publisher waits until the node confirms (it came back) or, once it is
// declared gone, until the nodes that took its sessions over have the
// message (the tests below). Frames held for it no longer count against
// the publisher's forward window either way.
TEST_F(ClusterAgentTest, ForwardToASuspectPeerWaitsUntilItComesBack) {
  const MembershipConfig members = StartTwoWithMembership();
  ASSERT_TRUE(nodes_[1]->agent->membership()->IsLive(2));
  core::Session* sub = Subscriber(2, "sub", "t");
  auto flow = std::make_shared<CountingFlow>();
  ShardBroker& publisher_shard = nodes_[1]->ShardOf("pub");
  const core::FlowId flow_id = publisher_shard.RegisterFlow(flow);
  network_.Cut(1, 2);
  // Held while the link is down but the peer is not suspected yet.
  auto before = Publish(1, Make(1, "t", "before", QoS::kAtLeastOnce), flow_id);
  loop_.RunUntilIdle();
  EXPECT_FALSE(*before);
  loop_.AdvanceBy(members.suspect_after_ms + 200);
  ASSERT_EQ(nodes_[1]->agent->membership()->Find(2)->state, MemberState::kSuspect);
  EXPECT_FALSE(*before);
  auto during = Publish(1, Make(1, "t", "during", QoS::kExactlyOnce), flow_id);
  loop_.RunUntilIdle();
  EXPECT_FALSE(*during);
  const ClusterCounters& c = nodes_[1]->agent->counters();
  EXPECT_EQ(c.forwards_released_peer_down, 0u);
  EXPECT_EQ(c.forwards_expired, 0u);
  EXPECT_EQ(c.forwards_held, 2u);
  // The link comes back before the peer is declared down: what was held is
  // delivered and confirmed.
  network_.Connect(1, 2);
  loop_.AdvanceBy(1000);
  EXPECT_TRUE(*before);
  EXPECT_TRUE(*during);
  std::vector<std::string> got;
  for (auto& [payload, qos] : Drain(sub)) got.push_back(payload);
  EXPECT_EQ(got, (std::vector<std::string>{"before", "during"}));
  EXPECT_EQ(nodes_[1]->agent->counters().forwards_held, 0u);
  publisher_shard.UnregisterFlow(flow_id);
}

// The churn test's stall after a graceful leave (NodeLeavingDuringTraffic,
// 1 run in 5 once forwards got cheaper): the leaving node's routes linger
// until the metadata group drops them, and every forward to it was held
// with its publisher's window charged. A fast publisher filled the window
// (kForwardWindow) and was paused until the held frames expired, longer
// than its client waited for a PUBACK. Forwards to an unreachable peer are
// held without charging the window.
TEST_F(ClusterAgentTest, ForwardsHeldForAnUnreachablePeerDoNotPauseThePublisher) {
  const MembershipConfig members = StartTwoWithMembership();
  ASSERT_TRUE(nodes_[1]->agent->membership()->IsLive(2));
  core::Session* sub = Subscriber(2, "sub", "t");
  auto flow = std::make_shared<CountingFlow>();
  ShardBroker& publisher_shard = nodes_[1]->ShardOf("pub");
  const core::FlowId flow_id = publisher_shard.RegisterFlow(flow);
  network_.Cut(1, 2);
  loop_.AdvanceBy(members.suspect_after_ms + 200);
  ASSERT_EQ(nodes_[1]->agent->membership()->Find(2)->state, MemberState::kSuspect);
  const int count = 3 * static_cast<int>(core::kForwardWindow);
  std::vector<std::shared_ptr<bool>> safe;
  for (int i = 0; i < count; ++i) {
    safe.push_back(Publish(1, Make(1, "t", std::to_string(i), QoS::kAtLeastOnce), flow_id));
    loop_.RunUntilIdle();
  }
  // Not acknowledged (the node has not confirmed them), but not paused.
  for (const auto& s : safe) EXPECT_FALSE(*s);
  EXPECT_EQ(flow->paused, 0);  // no time passed: only a charged window could have paused it
  const ClusterCounters& c = nodes_[1]->agent->counters();
  EXPECT_EQ(c.forwards_held, uint64_t(count));  // held, in case the suspicion is refuted
  EXPECT_EQ(c.forwards_expired, 0u);
  // The link comes back: the held frames go, in order, and credit nothing twice.
  network_.Connect(1, 2);
  loop_.AdvanceBy(1000);
  for (const auto& s : safe) EXPECT_TRUE(*s);
  const auto got = Drain(sub);
  ASSERT_EQ(got.size(), size_t(count));
  for (int i = 0; i < count; ++i) EXPECT_EQ(got[size_t(i)].first, std::to_string(i));
  EXPECT_EQ(nodes_[1]->agent->counters().forwards_held, 0u);
  // The window is whole: another kForwardWindow forwards over the live link pause nobody.
  for (int i = 0; i + 1 < static_cast<int>(core::kForwardWindow); ++i) {
    Publish(1, Make(1, "t", "after", QoS::kAtLeastOnce), flow_id);
  }
  loop_.RunUntilIdle();
  EXPECT_EQ(flow->paused, 0);
  publisher_shard.UnregisterFlow(flow_id);
}

// The takeover gap (docs/partitions.md): node 2 dies with a session
// subscribed to "t"; node 3 stands for the survivor that takes it over (a
// session marked as taken from node 2, as ShardBroker::AdoptSession marks
// one). A QoS 1 publish made after the death but before anyone noticed is
// not acknowledged until node 2 is declared gone and the forward replayed
// to node 3, which offers it to the taken-over session only; a publish on
// the gone node's lingering route after that reaches the session once, not
// once per path.
TEST_F(ClusterAgentTest, AForwardADeadNodeNeverConfirmedReachesTheSessionTakenFromIt) {
  StartThree();
  Subscriber(2, "victim", "t");
  core::Session* bystander = Subscriber(3, "bystander", "t");
  Crash(2);
  auto lost_before = Publish(1, Make(1, "t", "m1"));
  loop_.AdvanceBy(config_.peer_gone_grace_ms / 2);
  EXPECT_FALSE(*lost_before);  // node 2 has not confirmed: not acknowledged
  // The survivor's copy of the session (adopted while node 2 was gone).
  core::Session* taken = Subscriber(3, "victim", "t");
  taken->MarkTakenFrom(2, loop_.clock().WallMs() + 60'000);
  loop_.AdvanceBy(config_.peer_gone_grace_ms);  // node 2 is gone: m1 replayed
  EXPECT_TRUE(*lost_before);
  auto after = Publish(1, Make(1, "t", "m2"));  // node 3's route and node 2's lingering one
  loop_.RunUntilIdle();
  EXPECT_TRUE(*after);
  using Got = std::vector<std::pair<std::string, QoS>>;
  EXPECT_EQ(Drain(taken), (Got{{"m1", QoS::kAtLeastOnce}, {"m2", QoS::kAtLeastOnce}}));
  EXPECT_EQ(Drain(bystander), (Got{{"m1", QoS::kAtLeastOnce}, {"m2", QoS::kAtLeastOnce}}));
  const ClusterCounters& c = nodes_[1]->agent->counters();
  EXPECT_EQ(c.forwards_replayed, 2u);
  EXPECT_EQ(c.forwards_expired, 0u);
  EXPECT_EQ(c.forwards_released_peer_down, 0u);
  EXPECT_EQ(nodes_[3]->agent->counters().replays_in, 2u);
  uint64_t skipped = 0;
  for (const auto& metrics : nodes_[3]->metrics) skipped += metrics.replayed_duplicates_skipped.load();
  EXPECT_EQ(skipped, 1u);  // m2 came both ways
  // After replay_grace_ms the gone node's routes are dropped: nothing more is replayed.
  loop_.AdvanceBy(config_.replay_grace_ms);
  Publish(1, Make(1, "t", "m3"));
  loop_.RunUntilIdle();
  EXPECT_EQ(nodes_[1]->agent->counters().forwards_replayed, 2u);
  EXPECT_EQ(Drain(taken), (Got{{"m3", QoS::kAtLeastOnce}}));
}

// A shared group's message picked for a member on a node that dies is not
// acknowledged on suspicion; once the node is gone the publisher's node
// sends it to the group again, which picks a live member.
TEST_F(ClusterAgentTest, AGroupMessageForADeadNodesMemberGoesToALiveMember) {
  StartThree();
  Subscriber(2, "m2", "$share/g/t");
  core::Session* m3 = Subscriber(3, "m3", "$share/g/t");
  Crash(2);
  std::vector<std::shared_ptr<bool>> safe;
  for (int i = 0; i < 4; ++i) safe.push_back(Publish(1, Make(1, "t", "m" + std::to_string(i))));
  loop_.RunUntilIdle();
  const uint64_t to_dead = std::count_if(safe.begin(), safe.end(), [](const auto& s) { return !*s; });
  EXPECT_GT(to_dead, 0u);  // the group picked node 2 for some: they wait
  loop_.AdvanceBy(config_.peer_gone_grace_ms + 200);
  for (const auto& s : safe) EXPECT_TRUE(*s);
  std::vector<std::string> got;
  for (auto& [payload, qos] : Drain(m3)) got.push_back(payload);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::string>{"m0", "m1", "m2", "m3"}));
  EXPECT_EQ(nodes_[1]->agent->counters().forwards_replayed, to_dead);
  // Nothing was sent to node 3 as a replay: a group's part is the publisher's node's.
  EXPECT_EQ(nodes_[3]->agent->counters().replays_in, 0u);
}

// A replay that does not get every live node's confirmation releases its
// publisher after replay_timeout_ms (counted); a late confirmation then
// changes nothing.
TEST_F(ClusterAgentTest, AReplayNotConfirmedInTimeReleasesItsPublisher) {
  StartThree();
  Subscriber(2, "victim", "t");
  Crash(2);
  auto safe = Publish(1, Make(1, "t", "m1"));
  network_.paused = true;  // node 3 gets the replay only later
  loop_.AdvanceBy(config_.peer_gone_grace_ms + 200);
  EXPECT_EQ(nodes_[1]->agent->counters().forwards_replayed, 1u);
  EXPECT_FALSE(*safe);  // node 1 confirmed its own share; node 3 has not
  loop_.AdvanceBy(config_.replay_timeout_ms);
  EXPECT_TRUE(*safe);
  EXPECT_EQ(nodes_[1]->agent->counters().replays_expired, 1u);
  network_.Resume();
  loop_.RunUntilIdle();
  EXPECT_EQ(nodes_[3]->agent->counters().replays_in, 1u);
}

TEST(PendingForwardsTest, ConsecutiveIdsHolesExpiryAndRelease) {
  PendingForwards pending;
  const uint64_t a = pending.Add(2, 0, 10, 100);
  const uint64_t b = pending.Add(3, 1, 11, 110);
  const uint64_t c = pending.Add(2, 0, 12, 120);
  EXPECT_EQ(a, 1u);
  EXPECT_EQ(b, 2u);
  EXPECT_EQ(c, 3u);
  EXPECT_EQ(pending.size(), 3u);
  // Taken out of order: a hole in the middle, then the front.
  ASSERT_TRUE(pending.Take(b).has_value());
  EXPECT_FALSE(pending.Take(b).has_value());  // once only
  EXPECT_FALSE(pending.Take(0).has_value());
  EXPECT_FALSE(pending.Take(99).has_value());
  EXPECT_EQ(pending.size(), 2u);
  auto expired = pending.TakeExpired(115);  // a (100) only: b is gone, c is not due
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].token, 10u);
  const uint64_t d = pending.Add(2, 1, 13, 130);
  EXPECT_EQ(d, 4u);  // ids keep counting
  const uint64_t e = pending.Add(3, 1, 14, 140);
  auto for_two = pending.TakeForNode(2);
  ASSERT_EQ(for_two.size(), 2u);
  EXPECT_EQ(for_two[0].token, 12u);
  EXPECT_EQ(for_two[1].token, 13u);
  EXPECT_EQ(pending.size(), 1u);
  auto last = pending.Take(e);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->node, 3);
  EXPECT_EQ(last->shard, 1);
  EXPECT_EQ(pending.size(), 0u);
  EXPECT_EQ(pending.Add(2, 0, 15, 150), 6u);
}

TEST_F(ClusterAgentTest, SysTopicsStayOnTheirNode) {
  AddNode(1);
  AddNode(2);
  ConnectAll();
  core::Session* remote = Subscriber(2, "sys-remote", "$SYS/#");
  core::Session* local = Subscriber(1, "sys-local", "$SYS/#");
  Publish(1, Make(1, "$SYS/broker/uptime", "5 seconds", QoS::kAtMostOnce, true));
  loop_.RunUntilIdle();
  EXPECT_EQ(Drain(local).size(), 1u);
  EXPECT_TRUE(Drain(remote).empty());
  EXPECT_EQ(nodes_[2]->shards[0]->retained().size(), 0u);
}

}  // namespace
}  // namespace estuary::cluster
