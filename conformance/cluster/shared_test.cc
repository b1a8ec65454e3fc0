// Shared subscriptions across nodes (issue 7 point 5): a member that stops
// acknowledging and leaves gives its unacknowledged messages to another
// member on another node; nothing acknowledged to the publisher is lost.
// Real estuaryd processes (2 nodes, in memory); the departing member is a
// raw MQTT 5 client that never sends PUBACK, the other a Paho client.
#include <cstdio>
#include <cstdlib>
#include <set>

#include <nlohmann/json.hpp>

#include "conformance/amqp/amqp_client.h"
#include "conformance/cluster/cluster_fixture.h"
#include "conformance/support/wait_for.h"
#include "frontends/mqtt/codec/packet.h"

namespace estuary::conformance {
namespace {

// The sum over shards of `name{node="N",...}` in node N's /metrics.
int64_t ShardCounter(ClusterProcess& cluster, int node, const std::string& name) {
  auto metrics = testing::AdminGet(cluster.node(node).admin_port(), "/metrics");
  if (!metrics) return -1;
  const std::string key = name + "{node=\"" + std::to_string(node) + "\"";
  int64_t sum = 0;
  for (size_t at = metrics->body.find(key); at != std::string::npos; at = metrics->body.find(key, at + 1)) {
    const size_t space = metrics->body.find("} ", at);
    if (space != std::string::npos) sum += std::strtoll(metrics->body.c_str() + space + 2, nullptr, 10);
  }
  return sum;
}

// A member that takes PUBLISHes and never acknowledges them.
class SilentMember {
 public:
  // An empty `filter` subscribes to nothing (a resumed session has its own).
  SilentMember(NodeProcess& node, const std::string& client_id, const std::string& filter,
               uint32_t session_expiry = 0, uint8_t qos = 1, bool clean_start = true) {
    EXPECT_TRUE(client_.Open("127.0.0.1", node.mqtt_port()));
    mqtt::Properties properties;
    if (session_expiry != 0) properties.session_expiry_interval = session_expiry;
    auto connack = client_.Connect(client_id, clean_start, properties);
    EXPECT_TRUE(connack.has_value());
    if (filter.empty()) return;
    mqtt::SubscribePacket subscribe;
    subscribe.packet_id = 1;
    subscribe.subscriptions.push_back({filter, mqtt::SubscribeOptions{qos}});
    client_.Send(subscribe);
    EXPECT_TRUE(client_.ReceiveAs<mqtt::SubackPacket>().has_value());
  }
  // Reads packets until `done()` holds after a packet or a `wait` without
  // one; at most until the delivery deadline.
  template <typename Done>
  void ReadUntil(Done done, std::chrono::milliseconds wait) {
    const auto deadline = testing::Clock::now() + kDeliver;
    while (!done() && testing::Clock::now() < deadline) {
      auto packet = client_.Receive(wait);
      if (!packet) return;
      if (auto* publish = std::get_if<mqtt::PublishPacket>(&*packet)) received.insert(std::stoi(publish->payload));
    }
  }
  void Read(std::chrono::milliseconds wait) {
    ReadUntil([] { return false; }, wait);
  }
  void Close() { client_.Close(); }  // no DISCONNECT: the connection just goes
  std::set<int> received;

 private:
  testing::RawClient client_;
};

// Takes messages at `client` until every index below `acknowledged` came
// (or the deadline); counts duplicates.
std::set<int> TakeAll(PahoClient& client, int acknowledged, int& duplicated) {
  std::set<int> got;
  const auto deadline = testing::Clock::now() + kDeliver;
  while (got.size() < size_t(acknowledged) && testing::Clock::now() < deadline) {
    auto message = client.Next(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - testing::Clock::now()));
    if (!message) break;
    if (!got.insert(std::stoi(message->to_string())).second) ++duplicated;
  }
  return got;
}

int Lost(const std::set<int>& got, int acknowledged) {
  int lost = 0;
  for (int index = 0; index < acknowledged; ++index) lost += got.count(index) == 0;
  return lost;
}

std::unique_ptr<ClusterProcess> StartTwoNodes() {
  ClusterProcess::Options options;
  options.nodes = 2;
  options.extra_flags.insert(options.extra_flags.end(), {"--shared-redelivery-delay", "300"});
  return StartCluster(options);
}

// The member on node 2 ends (clean session, connection dropped) while a
// publisher on node 1 keeps publishing: everything it held unacknowledged,
// and everything sent its way meanwhile, reaches the member on node 1.
TEST(ClusterSharedTest, ADepartedMembersUnacknowledgedMessagesReachAMemberOnAnotherNode) {
  auto cluster = StartTwoNodes();
  ASSERT_NE(cluster, nullptr);
  const std::string topic = UniqueName("shared/jobs/");
  const std::string filter = "$share/workers/" + topic;
  auto clients = ConnectClients(*cluster, {{1, UniqueName("pub")}, {1, UniqueName("good")}});
  clients[1]->Subscribe(filter, 1);
  SilentMember silent(cluster->node(2), UniqueName("silent"), filter);
  std::string why;
  ASSERT_TRUE(cluster->WaitRoute(1, topic, true, kConverge, &why)) << why;
  ASSERT_TRUE(cluster->WaitRoute(2, topic, true, kConverge, &why)) << why;

  TrafficPublisher publisher(*clients[0], topic, 1);
  // It takes its share of the first 100 and acknowledges none.
  silent.ReadUntil([&] { return publisher.acknowledged() >= 100; }, std::chrono::milliseconds(500));
  const size_t held = silent.received.size();
  silent.Close();
  ASSERT_TRUE(publisher.WaitAcknowledged(100, kDeliver)) << publisher.error();
  publisher.Stop();
  ASSERT_TRUE(publisher.error().empty()) << publisher.error();

  int duplicated = 0;
  const std::set<int> got = TakeAll(*clients[1], publisher.acknowledged(), duplicated);
  const int lost = Lost(got, publisher.acknowledged());
  const int64_t redelivered = ShardCounter(*cluster, 2, "estuary_shared_redelivered_total");
  std::printf("[counts] shared departed: sent=%d acknowledged=%d held-by-departed=%zu delivered(good)=%zu "
              "redelivered(node 2)=%lld lost=%d duplicated=%d\n",
              publisher.sent(), publisher.acknowledged(), held, got.size(), static_cast<long long>(redelivered), lost,
              duplicated);
  EXPECT_GT(held, 0u) << "the departing member never got a message: the test proves nothing";
  EXPECT_GE(redelivered, static_cast<int64_t>(held));
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(duplicated, 0);
}

// A persistent member (session expiry 300 s) that drops its connection
// keeps its messages for --shared-redelivery-delay (300 ms here), then
// they go to the member on the other node.
TEST(ClusterSharedTest, APersistentMembersMessagesMoveAfterTheRedeliveryDelay) {
  auto cluster = StartTwoNodes();
  ASSERT_NE(cluster, nullptr);
  const std::string topic = UniqueName("shared/persistent/");
  const std::string filter = "$share/workers/" + topic;
  auto clients = ConnectClients(*cluster, {{1, UniqueName("pub")}, {1, UniqueName("good")}});
  clients[1]->Subscribe(filter, 1);
  SilentMember silent(cluster->node(2), UniqueName("silent"), filter, /*session_expiry=*/300);
  std::string why;
  ASSERT_TRUE(cluster->WaitRoute(1, topic, true, kConverge, &why)) << why;
  ASSERT_TRUE(cluster->WaitRoute(2, topic, true, kConverge, &why)) << why;

  constexpr int kMessages = 40;
  for (int i = 0; i < kMessages; ++i) clients[0]->Publish(topic, std::to_string(i), 1);
  silent.Read(std::chrono::milliseconds(200));
  const size_t held = silent.received.size();
  silent.Close();

  int duplicated = 0;
  const std::set<int> got = TakeAll(*clients[1], kMessages, duplicated);
  const int lost = Lost(got, kMessages);
  std::printf("[counts] shared persistent: acknowledged=%d held-by-departed=%zu delivered(good)=%zu lost=%d "
              "duplicated=%d\n",
              kMessages, held, got.size(), lost, duplicated);
  EXPECT_GT(held, 0u);
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(duplicated, 0);
  // The session is still there (it only lost its messages to the group).
  EXPECT_EQ(ShardCounter(*cluster, 2, "estuary_sessions"), 1);
}

// Task transfer (docs/partitions.md): the departing member's node dies
// (kill -9) while it holds messages it never acknowledged. A survivor takes
// its persistent session over from the partition, disconnected; after the
// redelivery delay its shared messages go to the member on node 1.
TEST(ClusterSharedTest, AMembersMessagesMoveWhenItsNodeDiesAndASurvivorTakesItOver) {
  ClusterProcess::Options options;
  options.durable = true;
  options.extra_flags.insert(options.extra_flags.end(), {"--shared-redelivery-delay", "300"});
  auto cluster = StartCluster(options);
  ASSERT_NE(cluster, nullptr);
  const std::string topic = UniqueName("shared/transfer/");
  const std::string filter = "$share/workers/" + topic;
  auto clients = ConnectClients(*cluster, {{1, UniqueName("pub")}, {1, UniqueName("good")}});
  clients[1]->Subscribe(filter, 1);
  SilentMember silent(cluster->node(3), UniqueName("silent"), filter, /*session_expiry=*/300);
  std::string why;
  ASSERT_TRUE(cluster->WaitRoute(1, topic, true, kConverge, &why)) << why;
  ASSERT_TRUE(cluster->WaitRoute(3, topic, true, kConverge, &why)) << why;

  constexpr int kMessages = 40;
  for (int i = 0; i < kMessages; ++i) clients[0]->Publish(topic, std::to_string(i), 1);
  silent.Read(std::chrono::milliseconds(300));
  const size_t held = silent.received.size();
  cluster->node(3).Kill();
  silent.Close();
  ASSERT_TRUE(cluster->WaitMembers({1, 2}, kConverge, &why)) << why;

  int duplicated = 0;
  const std::set<int> got = TakeAll(*clients[1], kMessages, duplicated);
  const int lost = Lost(got, kMessages);
  std::printf("[counts] shared node death: acknowledged=%d held-by-dead-node's-member=%zu delivered(good)=%zu "
              "lost=%d duplicated=%d\n",
              kMessages, held, got.size(), lost, duplicated);
  EXPECT_GT(held, 0u);
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(duplicated, 0);
}

// Partitioned shared groups (--partitioned-group workers=4, docs/cluster.md
// "Partitioned shared groups"): the group's messages wait in 4 replicated
// queues, not in a member's session. A persistent member subscribes and
// goes offline; what is published meanwhile is acknowledged (appended to
// the queues) and taken by a member that connects later on another node.
// With --shared-redelivery-delay -1 an ordinary group would have queued it
// all for the offline member for good: the new member would get nothing.
std::unique_ptr<ClusterProcess> StartPartitionedGroupCluster(const char* redelivery_delay = "-1") {
  ClusterProcess::Options options;
  options.durable = true;  // partitions run on the nodes' stores
  options.extra_flags.insert(options.extra_flags.end(),
                             {"--partitioned-group", "workers=4", "--shared-redelivery-delay", redelivery_delay});
  return StartCluster(options);
}

TEST(ClusterSharedTest, APartitionedGroupKeepsItsBacklogInItsQueuesForAMemberThatComesLater) {
  auto cluster = StartPartitionedGroupCluster();
  ASSERT_NE(cluster, nullptr);
  const std::string topic = UniqueName("partitioned/backlog/");
  const std::string filter = "$share/workers/" + topic;
  {
    SilentMember offline(cluster->node(2), UniqueName("offline"), filter, /*session_expiry=*/300);
    offline.Close();  // persistent: its subscription (and the group's route) stays
  }
  std::string why;
  ASSERT_TRUE(cluster->WaitRoute(2, topic, true, kConverge, &why)) << why;  // node 2's route, seen everywhere
  auto clients = ConnectClients(*cluster, {{1, UniqueName("pub")}});
  constexpr int kMessages = 60;
  for (int i = 0; i < kMessages; ++i) clients[0]->Publish(topic, std::to_string(i), 1);  // returns at the PUBACK
  EXPECT_GE(ShardCounter(*cluster, 1, "estuary_cluster_group_appends_total"), kMessages);
  EXPECT_EQ(ShardCounter(*cluster, 2, "estuary_queued_messages"), 0) << "the backlog went into the offline session";

  auto late = ConnectClients(*cluster, {{3, UniqueName("late")}});
  late[0]->Subscribe(filter, 1);
  int duplicated = 0;
  const std::set<int> got = TakeAll(*late[0], kMessages, duplicated);
  const int lost = Lost(got, kMessages);
  std::printf("[counts] partitioned backlog: acknowledged=%d delivered(late member)=%zu lost=%d duplicated=%d\n",
              kMessages, got.size(), lost, duplicated);
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(duplicated, 0);
  // Every message left its queue once a member's session held it.
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        int64_t acked = 0;
        for (int node : {1, 2, 3}) acked += ShardCounter(*cluster, node, "estuary_cluster_group_acked_total");
        return acked >= kMessages;
      },
      kDeliver));
}

// Two connected members on two nodes share the group's 4 queues (two each):
// every acknowledged message reaches exactly one of them, and both work.
TEST(ClusterSharedTest, APartitionedGroupsQueuesAreSharedByTheNodesHoldingMembers) {
  auto cluster = StartPartitionedGroupCluster();
  ASSERT_NE(cluster, nullptr);
  const std::string topic = UniqueName("partitioned/spread/");
  const std::string filter = "$share/workers/" + topic;
  auto clients = ConnectClients(*cluster, {{1, UniqueName("pub")}, {2, UniqueName("m2-")}, {3, UniqueName("m3-")}});
  clients[1]->Subscribe(filter, 1);
  clients[2]->Subscribe(filter, 1);
  std::string why;
  ASSERT_TRUE(cluster->WaitRoute(2, topic, true, kConverge, &why)) << why;
  ASSERT_TRUE(cluster->WaitRoute(3, topic, true, kConverge, &why)) << why;
  // Both nodes consume their share of the queues before the stream starts.
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return ShardCounter(*cluster, 2, "estuary_cluster_group_queues_consumed") == 2 &&
               ShardCounter(*cluster, 3, "estuary_cluster_group_queues_consumed") == 2;
      },
      kConverge));
  constexpr int kMessages = 200;
  for (int i = 0; i < kMessages; ++i) clients[0]->Publish(topic, std::to_string(i), 1);
  std::set<int> got;
  int duplicated = 0;
  size_t per_member[2] = {0, 0};
  const auto deadline = testing::Clock::now() + kDeliver;
  while (got.size() < size_t(kMessages) && testing::Clock::now() < deadline) {
    for (int m = 0; m < 2; ++m) {
      while (auto message = clients[1 + m]->Next(std::chrono::milliseconds(20))) {
        ++per_member[m];
        if (!got.insert(std::stoi(message->to_string())).second) ++duplicated;
      }
    }
  }
  const int lost = Lost(got, kMessages);
  // The queues' leaders pushed them (within the consumers' credit): every
  // message once, none pushed again, and both consumers granted credit.
  int64_t pushed = 0;
  int64_t repushed = 0;
  for (int node = 1; node <= 3; ++node) {
    pushed += ShardCounter(*cluster, node, "estuary_cluster_group_pushed_total");
    repushed += ShardCounter(*cluster, node, "estuary_cluster_group_repushed_total");
  }
  std::printf("[counts] partitioned spread: acknowledged=%d node 2=%zu node 3=%zu lost=%d duplicated=%d pushed=%lld "
              "repushed=%lld\n",
              kMessages, per_member[0], per_member[1], lost, duplicated, static_cast<long long>(pushed),
              static_cast<long long>(repushed));
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(duplicated, 0);
  EXPECT_GT(per_member[0], 0u);
  EXPECT_GT(per_member[1], 0u);
  EXPECT_EQ(pushed, kMessages);
  EXPECT_EQ(repushed, 0);
  // And each was removed from its queue once a member's session held it:
  // the leaders' pushes all acknowledged.
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        int64_t in_flight = 0;
        for (int node = 1; node <= 3; ++node) {
          in_flight += ShardCounter(*cluster, node, "estuary_cluster_group_push_in_flight");
        }
        return in_flight == 0;
      },
      kConverge))
      << "pushed messages were never acknowledged (removed from their queues)";
  EXPECT_GT(ShardCounter(*cluster, 2, "estuary_cluster_group_pulls_total"), 0);
  EXPECT_GT(ShardCounter(*cluster, 3, "estuary_cluster_group_pulls_total"), 0);
}

// A consuming node dies (kill -9) under a steady QoS 1 stream: its queues
// go to the node with the other member, which reads them from their first
// unacknowledged message, and what the dead node had handed to its
// (persistent) member moves with that session's takeover, after the
// redelivery delay, as in any shared group. Every acknowledged message
// reaches the surviving member (QoS 1: one whose removal from the queue had
// not committed may come twice; counted, not failed).
TEST(ClusterSharedTest, APartitionedGroupsQueuesMoveWhenAConsumingNodeDies) {
  auto cluster = StartPartitionedGroupCluster("300");
  ASSERT_NE(cluster, nullptr);
  const std::string topic = UniqueName("partitioned/death/");
  const std::string filter = "$share/workers/" + topic;
  auto clients = ConnectClients(*cluster, {{1, UniqueName("pub")}, {2, UniqueName("m2-")}});
  clients[1]->Subscribe(filter, 1);
  // Takes its share, acknowledges none.
  SilentMember doomed(cluster->node(3), UniqueName("doomed"), filter, /*session_expiry=*/300);
  std::string why;
  ASSERT_TRUE(cluster->WaitRoute(2, topic, true, kConverge, &why)) << why;
  ASSERT_TRUE(cluster->WaitRoute(3, topic, true, kConverge, &why)) << why;
  ASSERT_TRUE(testing::WaitFor([&] { return ShardCounter(*cluster, 3, "estuary_cluster_group_queues_consumed") == 2; },
                               kConverge));
  TrafficPublisher publisher(*clients[0], topic, 1);
  ASSERT_TRUE(publisher.WaitAcknowledged(100, kDeliver)) << publisher.error();
  doomed.ReadUntil([&] { return doomed.received.size() >= 50; }, std::chrono::milliseconds(500));
  cluster->node(3).Kill();
  doomed.Close();
  const auto killed = testing::Clock::now();
  ASSERT_TRUE(publisher.WaitAcknowledged(100, std::chrono::seconds(40))) << publisher.error();
  const auto stalled_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(testing::Clock::now() - killed).count();
  publisher.Stop();
  ASSERT_TRUE(publisher.error().empty()) << publisher.error();
  int duplicated = 0;
  const std::set<int> got = TakeAll(*clients[1], publisher.acknowledged(), duplicated);
  const int lost = Lost(got, publisher.acknowledged());
  std::printf("[counts] partitioned node death: acknowledged=%d the dead node's member had=%zu delivered(survivor)=%zu "
              "lost=%d duplicated=%d; 100 more acknowledged %lld ms after the kill\n",
              publisher.acknowledged(), doomed.received.size(), got.size(), lost, duplicated,
              static_cast<long long>(stalled_ms));
  EXPECT_GT(doomed.received.size(), 0u) << "node 3 consumed nothing: the test shows nothing";
  EXPECT_EQ(lost, 0);
}

// The same at QoS 2 with durable members (exactly once, docs/cluster.md
// "Partitioned shared groups"): node 3's member is handed what it takes and
// is sent it, but never completes it; node 3 dies, a survivor takes its
// session over and settles its hands with the queues. What its client was
// sent stays its own to finish [MQTT-4.8.2-4] (it resumes on node 1 and
// gets it again, as the same deliveries); the rest goes to the member on
// node 2. Every acknowledged message reaches exactly one of them.
TEST(ClusterSharedTest, APartitionedGroupDeliversQos2ExactlyOnceAcrossAConsumingNodesDeath) {
  auto cluster = StartPartitionedGroupCluster("300");
  ASSERT_NE(cluster, nullptr);
  const std::string topic = UniqueName("partitioned/death2/");
  const std::string filter = "$share/workers/" + topic;
  auto publishers = ConnectClients(*cluster, {{1, UniqueName("pub")}});
  auto members = ConnectClients(*cluster, {{2, UniqueName("m2-")}}, /*clean=*/false);  // durable
  members[0]->Subscribe(filter, 2);
  const std::string doomed_id = UniqueName("doomed");
  SilentMember doomed(cluster->node(3), doomed_id, filter, /*session_expiry=*/300, /*qos=*/2);
  std::string why;
  ASSERT_TRUE(cluster->WaitRoute(2, topic, true, kConverge, &why)) << why;
  ASSERT_TRUE(cluster->WaitRoute(3, topic, true, kConverge, &why)) << why;
  ASSERT_TRUE(testing::WaitFor([&] { return ShardCounter(*cluster, 3, "estuary_cluster_group_queues_consumed") == 2; },
                               kConverge));
  TrafficPublisher publisher(*publishers[0], topic, 2);
  ASSERT_TRUE(publisher.WaitAcknowledged(100, kDeliver)) << publisher.error();
  doomed.ReadUntil([&] { return doomed.received.size() >= 20; }, std::chrono::milliseconds(500));
  const int64_t hands_on_3 = ShardCounter(*cluster, 3, "estuary_cluster_group_hands_total");
  cluster->node(3).Kill();
  doomed.Close();
  ASSERT_TRUE(publisher.WaitAcknowledged(100, std::chrono::seconds(40))) << publisher.error();
  publisher.Stop();
  ASSERT_TRUE(publisher.error().empty()) << publisher.error();
  // The dead node's member comes back (its session, taken over, moves to
  // node 1) and is sent again what it was sent: read until 1 s passes
  // without a packet.
  SilentMember resumed(cluster->node(1), doomed_id, "", /*session_expiry=*/300, /*qos=*/2, /*clean_start=*/false);
  resumed.Read(std::chrono::milliseconds(1000));
  std::set<int> doomed_all = doomed.received;
  doomed_all.insert(resumed.received.begin(), resumed.received.end());
  // The rest reaches node 2's member; then 300 ms more for strays.
  int duplicated = 0;
  std::set<int> got = TakeAll(*members[0], publisher.acknowledged() - static_cast<int>(doomed_all.size()), duplicated);
  while (auto stray = members[0]->Next(std::chrono::milliseconds(300))) {
    if (!got.insert(std::stoi(stray->to_string())).second) ++duplicated;
  }
  int both = 0;
  for (int index : doomed_all) both += got.count(index);
  std::set<int> all = got;
  all.insert(doomed_all.begin(), doomed_all.end());
  const int lost = Lost(all, publisher.acknowledged());
  const int64_t settles = ShardCounter(*cluster, 1, "estuary_cluster_group_settles_total") +
                          ShardCounter(*cluster, 2, "estuary_cluster_group_settles_total");
  std::printf("[counts] partitioned QoS 2 node death: acknowledged=%d node 3's member had=%zu, after resuming=%zu "
              "(hands on node 3: %lld) delivered(node 2)=%zu lost=%d duplicated(node 2)=%d both members=%d "
              "settles=%lld\n",
              publisher.acknowledged(), doomed.received.size(), doomed_all.size(),
              static_cast<long long>(hands_on_3), got.size(), lost, duplicated, both,
              static_cast<long long>(settles));
  EXPECT_GT(doomed.received.size(), 0u) << "node 3 consumed nothing: the test shows nothing";
  EXPECT_GT(hands_on_3, 0) << "no QoS 2 message was handed on node 3";
  EXPECT_GT(settles, 0) << "nobody settled the dead node's member session";
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(duplicated, 0);
  EXPECT_EQ(both, 0) << "a message reached both members";
}

// The queues' leaders move (a planned transfer of every partition's
// leadership, as estuaryctl transfer-leader does) under a steady QoS 1
// stream: the old leaders stop pushing and tell the consumer (not
// leader), the consumer grants its credit to the new leaders, and they
// push from the first message not yet removed. Every acknowledged message
// reaches the member; pushes came from more than one node.
TEST(ClusterSharedTest, APartitionedGroupsConsumerFollowsItsQueuesLeadersWhenTheyMove) {
  auto cluster = StartPartitionedGroupCluster();
  ASSERT_NE(cluster, nullptr);
  const std::string topic = UniqueName("partitioned/moves/");
  const std::string filter = "$share/workers/" + topic;
  auto clients = ConnectClients(*cluster, {{1, UniqueName("pub")}, {2, UniqueName("m2-")}});
  clients[1]->Subscribe(filter, 1);
  std::string why;
  ASSERT_TRUE(cluster->WaitRoute(2, topic, true, kConverge, &why)) << why;
  ASSERT_TRUE(testing::WaitFor([&] { return ShardCounter(*cluster, 2, "estuary_cluster_group_queues_consumed") == 4; },
                               kConverge));
  TrafficPublisher publisher(*clients[0], topic, 1);
  ASSERT_TRUE(publisher.WaitAcknowledged(100, kDeliver)) << publisher.error();
  // Every partition a node leads goes to the next node.
  int moved = 0;
  std::string answers;
  for (int node = 1; node <= 3; ++node) {
    auto partitions = testing::AdminGet(cluster->node(node).admin_port(), "/api/cluster/partitions");
    ASSERT_TRUE(partitions.has_value());
    const nlohmann::json document = nlohmann::json::parse(partitions->body);
    for (const auto& entry : document.at("open")) {
      if (entry.value("role", std::string()) != "leader") continue;
      const std::string path = "/api/cluster/partitions/transfer?partition=" +
                               std::to_string(entry.at("partition").get<int>()) + "&to=" + std::to_string(node % 3 + 1);
      const auto answer = testing::HttpRequest("127.0.0.1", cluster->node(node).admin_port(), "POST", path);
      if (answer.status == 202) ++moved;
      answers += std::to_string(answer.status) + " " + answer.body + "\n";
    }
  }
  ASSERT_GT(moved, 0) << "no leadership could be moved: the test shows nothing\n" << answers;
  ASSERT_TRUE(publisher.WaitAcknowledged(200, kDeliver)) << publisher.error();
  // A transfer completes after its 202: the stream goes on until a new
  // leader has pushed (a fast stream could otherwise end before any did).
  auto pushing = [&] {
    int nodes = 0;
    for (int node = 1; node <= 3; ++node) nodes += ShardCounter(*cluster, node, "estuary_cluster_group_pushed_total") > 0;
    return nodes;
  };
  (void)testing::WaitFor([&] { return pushing() >= 2; }, kDeliver);  // asserted below
  publisher.Stop();
  ASSERT_TRUE(publisher.error().empty()) << publisher.error();
  int duplicated = 0;
  const std::set<int> got = TakeAll(*clients[1], publisher.acknowledged(), duplicated);
  const int lost = Lost(got, publisher.acknowledged());
  const int pushing_nodes = pushing();
  int64_t repushed = 0;
  for (int node = 1; node <= 3; ++node) repushed += ShardCounter(*cluster, node, "estuary_cluster_group_repushed_total");
  std::printf("[counts] partitioned leaders moved: leaderships moved=%d acknowledged=%d delivered=%zu lost=%d "
              "duplicated=%d nodes that pushed=%d repushed=%lld\n",
              moved, publisher.acknowledged(), got.size(), lost, duplicated, pushing_nodes,
              static_cast<long long>(repushed));
  EXPECT_EQ(lost, 0);
  EXPECT_GE(pushing_nodes, 2);
}

// MQTT and AMQP alike (issue 7 point 5): an AMQP receiver on $share/G/F is a
// member of a partitioned group like an MQTT subscriber; the queues are
// shared between its node and the MQTT member's, and each message reaches
// one of them.
TEST(ClusterSharedTest, APartitionedGroupsMembersMayBeAmqpReceivers) {
  auto cluster = StartPartitionedGroupCluster();
  ASSERT_NE(cluster, nullptr);
  const std::string topic = UniqueName("partitioned/amqp/");
  const std::string filter = "$share/workers/" + topic;
  auto clients = ConnectClients(*cluster, {{1, UniqueName("pub")}, {2, UniqueName("m2-")}});
  clients[1]->Subscribe(filter, 1);
  AmqpClient amqp("127.0.0.1", cluster->node(3).amqp_port());
  std::string error;
  ASSERT_TRUE(amqp.WaitOpen(&error)) << error;
  amqp.OpenReceiver("r", filter);
  ASSERT_TRUE(amqp.Wait(AmqpEvent::Kind::kReceiverOpen, "r"));
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return ShardCounter(*cluster, 2, "estuary_cluster_group_queues_consumed") == 2 &&
               ShardCounter(*cluster, 3, "estuary_cluster_group_queues_consumed") == 2;
      },
      kConverge))
      << "the AMQP receiver's node does not consume its share of the queues";
  constexpr int kMessages = 100;
  for (int i = 0; i < kMessages; ++i) clients[0]->Publish(topic, std::to_string(i), 1);
  std::set<int> got;
  int duplicated = 0;
  size_t by_amqp = 0;
  size_t by_mqtt = 0;
  const auto deadline = testing::Clock::now() + kDeliver;
  while (got.size() < size_t(kMessages) && testing::Clock::now() < deadline) {
    while (auto message = clients[1]->Next(std::chrono::milliseconds(20))) {
      ++by_mqtt;
      if (!got.insert(std::stoi(message->to_string())).second) ++duplicated;
    }
    for (const AmqpEvent& event : amqp.TakeMessages("r", kMessages, std::chrono::milliseconds(20))) {
      ++by_amqp;
      const auto body = proton::get<proton::binary>(event.message.body());
      if (!got.insert(std::stoi(std::string(body.begin(), body.end()))).second) ++duplicated;
      if (!event.settled) amqp.Settle(event.delivery, AmqpClient::Outcome::kAccept);
    }
  }
  const int lost = Lost(got, kMessages);
  std::printf("[counts] partitioned amqp: acknowledged=%d mqtt member=%zu amqp receiver=%zu lost=%d duplicated=%d\n",
              kMessages, by_mqtt, by_amqp, lost, duplicated);
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(duplicated, 0);
  EXPECT_GT(by_amqp, 0u);
  EXPECT_GT(by_mqtt, 0u);
  amqp.Close();
}

}  // namespace
}  // namespace estuary::conformance
