// Cross-node delivery on a 3-node loopback cluster of real estuaryd
// processes (issue 6, points 4 and 7): every QoS, wildcards, order per
// publisher, and MQTT <-> AMQP across nodes. One cluster serves the suite;
// each test uses its own topics and waits until the routes it needs have
// reached every node before publishing.
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <map>

#include "conformance/amqp/amqp_client.h"
#include "conformance/cluster/cluster_fixture.h"
#include "conformance/support/wait_for.h"

namespace estuary::conformance {
namespace {

class CrossNodeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ClusterProcess::Options options;
    options.nodes = 3;
    cluster_ = StartCluster(options).release();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(cluster_, nullptr) << "the cluster did not start"; }

  static ClusterProcess& cluster() { return *cluster_; }
  // Waits until every other node routes `filter` to `node`.
  static void ExpectRoute(int node, const std::string& filter) {
    std::string why;
    ASSERT_TRUE(cluster().WaitRoute(node, filter, true, kConverge, &why))
        << "route " << filter << " -> node " << node << " never converged: " << why;
  }

  static ClusterProcess* cluster_;
};
ClusterProcess* CrossNodeTest::cluster_ = nullptr;

class CrossNodeQosTest : public CrossNodeTest, public ::testing::WithParamInterface<int> {};

// A publisher on node 1; subscribers on nodes 1, 2 and 3 each get every
// message once, in the publisher's order, at the QoS of the exchange.
TEST_P(CrossNodeQosTest, PublishOnOneNodeReachesSubscribersOnEveryNode) {
  const int qos = GetParam();
  const std::string base = UniqueName("cross/qos" + std::to_string(qos) + "/") + "/";
  auto clients = ConnectClients(cluster(), {{1, UniqueName("pub")}, {1, UniqueName("sub1-")},
                                            {2, UniqueName("sub2-")}, {3, UniqueName("sub3-")}});
  for (size_t i = 1; i < clients.size(); ++i) clients[i]->Subscribe(base + "#", qos);
  ExpectRoute(2, base + "#");
  ExpectRoute(3, base + "#");

  constexpr int kCount = 100;
  for (int i = 0; i < kCount; ++i) clients[0]->Publish(base + "a", std::to_string(i), qos);
  for (size_t i = 1; i < clients.size(); ++i) {
    auto messages = clients[i]->Take(kCount, kDeliver);
    ASSERT_EQ(messages.size(), size_t(kCount)) << "subscriber on node " << (i == 1 ? 1 : int(i));
    std::vector<int> expected(kCount);
    for (int k = 0; k < kCount; ++k) expected[k] = k;
    EXPECT_EQ(Indexes(messages), expected);
    EXPECT_EQ(messages.front()->get_topic(), base + "a");
    EXPECT_EQ(messages.front()->get_qos(), qos);
  }
}

INSTANTIATE_TEST_SUITE_P(Qos, CrossNodeQosTest, ::testing::Values(0, 1, 2),
                         [](const ::testing::TestParamInfo<int>& param_info) { return "Qos" + std::to_string(param_info.param); });

// Wildcard filters on three nodes: each gets exactly what its filter
// matches. A final "fence" message that every filter matches marks the end.
TEST_F(CrossNodeTest, WildcardFiltersMatchAcrossNodes) {
  const std::string base = UniqueName("wild/") + "/";
  auto clients = ConnectClients(cluster(), {{1, UniqueName("pub")}, {1, UniqueName("exact")},
                                            {2, UniqueName("plus")}, {3, UniqueName("hash")}});
  clients[1]->Subscribe(base + "a/x", 1);
  clients[2]->Subscribe(base + "+/x", 1);
  clients[3]->Subscribe(base + "#", 1);
  ExpectRoute(2, base + "+/x");
  ExpectRoute(3, base + "#");
  for (const char* topic : {"a/x", "b/y", "c/x", "a/x/deeper"}) clients[0]->Publish(base + topic, topic, 1);
  clients[0]->Publish(base + "a/x", "fence", 1);

  auto topics_until_fence = [&](PahoClient& client) {
    std::vector<std::string> topics;
    for (;;) {
      auto message = client.Next(kDeliver);
      if (!message) return topics;
      if (message->to_string() == "fence") return topics;
      topics.push_back(message->to_string());
    }
  };
  EXPECT_EQ(topics_until_fence(*clients[1]), (std::vector<std::string>{"a/x"}));
  EXPECT_EQ(topics_until_fence(*clients[2]), (std::vector<std::string>{"a/x", "c/x"}));
  EXPECT_EQ(topics_until_fence(*clients[3]), (std::vector<std::string>{"a/x", "b/y", "c/x", "a/x/deeper"}));
}

// Two publishers on two nodes write one topic; subscribers on the third
// node and on a publisher's node see each publisher's messages in order.
TEST_F(CrossNodeTest, OrderPerPublisherHoldsAcrossNodes) {
  const std::string topic = UniqueName("order/");
  auto clients = ConnectClients(cluster(), {{1, UniqueName("p1-")}, {3, UniqueName("p3-")},
                                            {2, UniqueName("s2-")}, {1, UniqueName("s1-")}});
  clients[2]->Subscribe(topic, 1);
  clients[3]->Subscribe(topic, 1);
  ExpectRoute(2, topic);
  constexpr int kEach = 150;
  for (int i = 0; i < kEach; ++i) {
    clients[0]->Publish(topic, "1:" + std::to_string(i), 1);
    clients[1]->Publish(topic, "3:" + std::to_string(i), 1);
  }
  for (int subscriber : {2, 3}) {
    auto messages = clients[subscriber]->Take(2 * kEach, kDeliver);
    ASSERT_EQ(messages.size(), size_t(2 * kEach));
    std::map<char, int> next;
    for (const auto& message : messages) {
      const std::string payload = message->to_string();
      const int index = std::stoi(payload.substr(2));
      EXPECT_EQ(index, next[payload[0]]) << "publisher on node " << payload[0];
      next[payload[0]] = index + 1;
    }
  }
}

// MQTT-3.3.1-6 across nodes: a retained message published on node 1 is
// sent to a new subscription on node 3, with RETAIN set. The PUBACK came
// once the topic's partition committed it, and node 3 reads it from there.
TEST_F(CrossNodeTest, RetainedMessageReachesNewSubscriberOnAnotherNode) {
  const std::string topic = UniqueName("retained/") + "/t";
  auto clients = ConnectClients(cluster(), {{1, UniqueName("pub")}, {3, UniqueName("late")}});
  clients[0]->Publish(topic, "kept", 1, /*retain=*/true);  // returns at the PUBACK

  clients[1]->Subscribe(topic, 1);
  auto message = clients[1]->Next(kDeliver);
  ASSERT_TRUE(message);
  EXPECT_EQ(message->to_string(), "kept");
  EXPECT_TRUE(message->is_retained());
  clients[0]->Publish(topic, "", 1, /*retain=*/true);  // clear it
}

// Issue 7 point 3: once a retained PUBLISH is acknowledged, a SUBSCRIBE
// on any node sees it (or a later value), never an older one, without
// waiting for anything to spread: retained messages live on partitions and
// a SUBSCRIBE reads them through the partition leader's lease. Each round
// sets a new value on node 1 and subscribes at once on nodes 2 and 3, to
// the topic and to a wildcard over it; the last round clears the topic.
// The value of `name{node="N"}` in node N's /metrics (-1: not found).
int64_t ClusterCounter(ClusterProcess& cluster, int node, const std::string& name) {
  auto metrics = testing::AdminGet(cluster.node(node).admin_port(), "/metrics");
  if (!metrics) return -1;
  const std::string key = name + "{node=\"" + std::to_string(node) + "\"} ";
  const size_t at = metrics->body.find(key);
  if (at == std::string::npos) return -1;
  return std::strtoll(metrics->body.c_str() + at + key.size(), nullptr, 10);
}

TEST_F(CrossNodeTest, AnAcknowledgedRetainedValueIsSeenAtOnceOnEveryNode) {
  const std::string base = UniqueName("retained-now/");
  const int64_t writes_before = ClusterCounter(cluster(), 1, "estuary_cluster_retained_writes_total");
  std::map<int, int64_t> reads_before, failed_before;
  for (int node : {2, 3}) {
    reads_before[node] = ClusterCounter(cluster(), node, "estuary_cluster_retained_reads_total");
    failed_before[node] = ClusterCounter(cluster(), node, "estuary_cluster_retained_reads_failed_total");
    ASSERT_GE(reads_before[node], 0) << "node " << node << " does not count retained reads";
  }
  const std::string topic = base + "/t";
  auto clients = ConnectClients(cluster(), {{1, UniqueName("pub")}, {2, UniqueName("r2-")}, {3, UniqueName("r3-")}});
  for (int round = 0; round < 8; ++round) {
    const std::string value = "v" + std::to_string(round);
    clients[0]->Publish(topic, value, 1, /*retain=*/true);  // returns at the PUBACK
    for (size_t i = 1; i < clients.size(); ++i) {
      for (const std::string& filter : {topic, base + "/#"}) {
        clients[i]->Subscribe(filter, 1);
        auto message = clients[i]->Next(kDeliver);
        ASSERT_TRUE(message) << "round " << round << ", node " << i + 1 << ", " << filter << ": no retained message";
        EXPECT_EQ(message->to_string(), value) << "round " << round << ", node " << i + 1 << ", " << filter;
        EXPECT_TRUE(message->is_retained());
        clients[i]->Unsubscribe({filter});
      }
    }
  }
  clients[0]->Publish(topic, "", 1, /*retain=*/true);  // cleared: nothing is sent any more
  for (size_t i = 1; i < clients.size(); ++i) {
    clients[i]->Subscribe(base + "/#", 1);
    auto message = clients[i]->Next(std::chrono::milliseconds(300));
    EXPECT_FALSE(message) << "node " << i + 1 << " sent a cleared retained message: " << message->to_string();
  }
  // The values came from the partitions, not from each node's own copy.
  EXPECT_GE(ClusterCounter(cluster(), 1, "estuary_cluster_retained_writes_total"), writes_before + 9);
  for (int node : {2, 3}) {
    EXPECT_GE(ClusterCounter(cluster(), node, "estuary_cluster_retained_reads_total"), reads_before[node] + 17)
        << "node " << node;
    EXPECT_EQ(ClusterCounter(cluster(), node, "estuary_cluster_retained_reads_failed_total"), failed_before[node])
        << "node " << node;
  }
}

// An AMQP receiver on node 2 gets what an MQTT publisher on node 1 sends.
TEST_F(CrossNodeTest, MqttPublisherOnOneNodeReachesAmqpReceiverOnAnother) {
  const std::string topic = UniqueName("amqp/in/");
  AmqpClient amqp("127.0.0.1", cluster().node(2).amqp_port());
  std::string error;
  ASSERT_TRUE(amqp.WaitOpen(&error)) << error;
  amqp.OpenReceiver("r", topic);
  ASSERT_TRUE(amqp.Wait(AmqpEvent::Kind::kReceiverOpen, "r"));
  ExpectRoute(2, topic);
  auto clients = ConnectClients(cluster(), {{1, UniqueName("pub")}});
  constexpr int kCount = 30;
  for (int i = 0; i < kCount; ++i) clients[0]->Publish(topic, std::to_string(i), 1);
  auto events = amqp.TakeMessages("r", kCount, kDeliver);
  ASSERT_EQ(events.size(), size_t(kCount));
  for (int i = 0; i < kCount; ++i) {
    const auto body = proton::get<proton::binary>(events[i].message.body());
    EXPECT_EQ(std::string(body.begin(), body.end()), std::to_string(i));
    if (!events[i].settled) amqp.Settle(events[i].delivery, AmqpClient::Outcome::kAccept);
  }
  amqp.Close();
}

// An AMQP sender on node 3 reaches an MQTT subscriber on node 1; every
// transfer is accepted.
TEST_F(CrossNodeTest, AmqpSenderOnOneNodeReachesMqttSubscriberOnAnother) {
  const std::string topic = UniqueName("amqp/out/");
  auto clients = ConnectClients(cluster(), {{1, UniqueName("sub")}});
  clients[0]->Subscribe(topic, 1);
  ExpectRoute(1, topic);
  AmqpClient amqp("127.0.0.1", cluster().node(3).amqp_port());
  std::string error;
  ASSERT_TRUE(amqp.WaitOpen(&error)) << error;
  amqp.OpenSender("s", topic);
  ASSERT_TRUE(amqp.Wait(AmqpEvent::Kind::kSenderOpen, "s"));
  constexpr int kCount = 30;
  for (int i = 0; i < kCount; ++i) amqp.Send("s", topic, std::to_string(i));
  for (int i = 0; i < kCount; ++i) ASSERT_TRUE(amqp.Wait(AmqpEvent::Kind::kAccepted, "s", kDeliver)) << i;
  auto messages = clients[0]->Take(kCount, kDeliver);
  ASSERT_EQ(messages.size(), size_t(kCount));
  std::vector<int> expected(kCount);
  for (int k = 0; k < kCount; ++k) expected[k] = k;
  EXPECT_EQ(Indexes(messages), expected);
  amqp.Close();
}

// --- the harness's parsers, on the document shapes it accepts ---

// One client id per cluster (issue 6 point 5, docs/cluster.md): the
// second connection's CONNACK comes once its claim is committed in the
// registry partition the id hashes to, and the claim closes the first
// connection, on another node. The partition opened on first use.
TEST_F(CrossNodeTest, AClientIdConnectingOnASecondNodeClosesTheFirstConnection) {
  const std::string id = UniqueName("roaming-");
  auto first = ConnectClients(cluster(), {{1, id}});
  auto second = ConnectClients(cluster(), {{2, id}});
  EXPECT_TRUE(first[0]->WaitDisconnected(kDeliver)) << "the connection on node 1 stayed open";
  EXPECT_TRUE(second[0]->client().is_connected()) << "the new connection on node 2 was closed";

  // And back: a third connection on node 3 closes the one on node 2.
  auto third = ConnectClients(cluster(), {{3, id}});
  EXPECT_TRUE(second[0]->WaitDisconnected(kDeliver)) << "the connection on node 2 stayed open";
  const std::string topic = UniqueName("roaming/") + "/t";
  third[0]->Subscribe(topic, 1);
  third[0]->Publish(topic, "still here", 1);
  EXPECT_NE(third[0]->Next(kDeliver), nullptr) << "the surviving connection does not work";

  auto metrics = testing::AdminGet(cluster().node(3).admin_port(), "/metrics");
  ASSERT_TRUE(metrics.has_value());
  EXPECT_NE(metrics->body.find("estuary_cluster_client_takeovers_out_total{node=\"3\"} 1"), std::string::npos)
      << "node 3's claim did not name node 2's connection";
  auto partitions = testing::AdminGet(cluster().node(1).admin_port(), "/api/cluster/partitions");
  ASSERT_TRUE(partitions.has_value());
  auto open = nlohmann::json::parse(partitions->body).at("open");
  EXPECT_FALSE(open.empty()) << "no partition opened for the registry: " << partitions->body;
}

TEST(ClusterHarness, ParsesRouteDocuments) {
  using Pairs = std::set<std::pair<int, std::string>>;
  EXPECT_EQ(testing::ParseRoutes(R"({"node":1,"local_routes":[{"filter":"mine","shards":[0]}],
      "peers":[{"node":2,"link":"up","routes":[{"filter":"x"},{"filter":"y/+","share":"g"}]},
               {"node":3,"link":"down","routes":[]}],"forwards":{"out":1}})"),
            (Pairs{{1, "mine"}, {2, "x"}, {2, "y/+"}}));
  EXPECT_TRUE(testing::ParseRoutes("not json").empty());
}

TEST(ClusterHarness, ParsesMemberDocuments) {
  EXPECT_EQ(testing::ParseMembers(R"({"members":[{"node":1,"state":"up"},{"node":2,"state":"down"}]})"),
            (std::map<int, std::string>{{1, "up"}, {2, "down"}}));
  EXPECT_EQ(testing::ParseMembers(R"([{"node":3,"state":"suspect"}])"), (std::map<int, std::string>{{3, "suspect"}}));
}

}  // namespace
}  // namespace estuary::conformance
