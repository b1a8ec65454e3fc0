// Issue 27, point 1, in a cluster where sessions live on partitions: the
// expiry timer of an earlier session of a client id must not end the next
// session of that id (MQTT 5.0 3.1.2.11.2, 3.14.2.2.2: its expiry is its
// own). Ended on its node, the session would be deleted from its
// partition too, and lost on every node. Raw MQTT 5.0 clients (exact
// properties on CONNECT and DISCONNECT); waits are on packets and on the
// nodes' admin API with deadlines, never sleeps.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "conformance/cluster/cluster_fixture.h"
#include "conformance/support/raw_client.h"

namespace estuary::conformance {
namespace {

using testing::RawClient;
using std::chrono::seconds;

std::unique_ptr<RawClient> ConnectTo(NodeProcess& node, const std::string& client_id, bool clean_start,
                                     std::optional<uint32_t> expiry, bool* present = nullptr,
                                     std::optional<mqtt::Will> will = std::nullopt) {
  auto client = std::make_unique<RawClient>();
  if (!client->Open("127.0.0.1", node.mqtt_port())) return nullptr;
  mqtt::ConnectPacket connect;
  connect.protocol_name = "MQTT";
  connect.version = mqtt::ProtocolVersion::kV5;
  connect.client_id = client_id;
  connect.clean_start = clean_start;
  connect.keep_alive = 60;
  connect.properties.session_expiry_interval = expiry;
  connect.will = std::move(will);
  // A partition electing a leader may refuse the first claims.
  auto connack = client->Connect(connect);
  if (!connack || connack->reason != mqtt::ReasonCode::kSuccess) return nullptr;
  if (present != nullptr) *present = connack->session_present;
  return client;
}

std::unique_ptr<RawClient> ConnectWithRetries(NodeProcess& node, const std::string& client_id, bool clean_start,
                                              std::optional<uint32_t> expiry, bool* present = nullptr,
                                              const std::optional<mqtt::Will>& will = std::nullopt) {
  const auto deadline = testing::Clock::now() + kConverge;
  while (testing::Clock::now() < deadline) {
    if (auto client = ConnectTo(node, client_id, clean_start, expiry, present, will)) return client;
  }
  return nullptr;
}

bool SubscribeQos1(RawClient& client, const std::string& filter) {
  mqtt::SubscribePacket subscribe;
  subscribe.packet_id = 1;
  subscribe.subscriptions.push_back({filter, mqtt::SubscribeOptions{1}});
  client.Send(subscribe);
  auto suback = client.ReceiveAs<mqtt::SubackPacket>();
  return suback && suback->reasons.size() == 1 && !mqtt::IsError(suback->reasons[0]);
}

// DISCONNECT (with a new Session Expiry Interval if given), then the
// server's close: it has acted on it.
bool LeaveAndWait(RawClient& client, std::optional<uint32_t> expiry = std::nullopt) {
  mqtt::DisconnectPacket disconnect;
  disconnect.properties.session_expiry_interval = expiry;
  client.Send(disconnect);
  return client.WaitClosed();
}

bool PublishQos1(RawClient& client, const std::string& topic, const std::string& payload) {
  mqtt::PublishPacket publish;
  publish.topic = topic;
  publish.payload = payload;
  publish.qos = 1;
  publish.packet_id = 7;
  client.Send(publish);
  auto ack = client.ReceiveAs<mqtt::AckPacket>();
  return ack && ack->packet_id == 7 && !mqtt::IsError(ack->reason);
}

// Returns once `delay` seconds have passed on `node`'s clock: a will with
// that delay, from a client of that node dropped now, has arrived.
bool WaitNodeSeconds(NodeProcess& node, uint32_t delay) {
  const std::string topic = UniqueName("issue27/clock/");
  auto watcher = ConnectWithRetries(node, UniqueName("issue27-clock-watch-"), true, std::nullopt);
  if (!watcher || !SubscribeQos1(*watcher, topic)) return false;
  mqtt::Will will{topic, "tick", 1, false, {}};
  will.properties.will_delay_interval = delay;
  auto clock = ConnectWithRetries(node, UniqueName("issue27-clock-"), true, delay + 60, nullptr, will);
  if (!clock) return false;
  clock->Close();  // no DISCONNECT: the will stays armed
  return watcher->ReceiveAs<mqtt::PublishPacket>(seconds(delay + 15)).has_value();
}

TEST(ClusterSessionExpiryTest, Issue27EarlierSessionsExpirySparesTheNextSessionOnItsPartition) {
  ClusterProcess::Options options;
  options.durable = true;  // sessions on partitions
  auto cluster = StartCluster(options);
  ASSERT_NE(cluster, nullptr);
  std::string why;
  ASSERT_TRUE(cluster->WaitVoters(1, 3, kConverge, &why)) << why;
  const std::string client_id = UniqueName("issue27-x-");
  const std::string topic = UniqueName("issue27/t/");
  NodeProcess& home = cluster->node(3);
  {
    auto first = ConnectWithRetries(home, client_id, false, 2);
    ASSERT_NE(first, nullptr);
    ASSERT_TRUE(LeaveAndWait(*first));  // its session would expire 2 s later
  }
  {
    bool present = true;
    auto next = ConnectWithRetries(home, client_id, true, 1, &present);
    ASSERT_NE(next, nullptr);
    EXPECT_FALSE(present);
    ASSERT_TRUE(SubscribeQos1(*next, topic));
    ASSERT_TRUE(LeaveAndWait(*next, 10));
  }
  ASSERT_TRUE(cluster->WaitRoute(3, topic, true, kConverge, &why)) << why;
  ASSERT_TRUE(WaitNodeSeconds(home, 3)) << "node 3's will timer never fired";
  auto publisher = ConnectWithRetries(cluster->node(1), UniqueName("issue27-pub-"), true, std::nullopt);
  ASSERT_NE(publisher, nullptr);
  ASSERT_TRUE(PublishQos1(*publisher, topic, "queued while away"));
  // Resumed on another node: read from the session's partition.
  bool present = false;
  auto back = ConnectWithRetries(cluster->node(1), client_id, false, 10, &present);
  ASSERT_NE(back, nullptr);
  EXPECT_TRUE(present) << "the first session's expiry timer deleted the next session [MQTT 5.0 3.14.2.2.2]";
  auto message = back->ReceiveAs<mqtt::PublishPacket>(kDeliver);
  ASSERT_TRUE(message.has_value()) << "the message queued for the subscription is gone";
  EXPECT_EQ(message->payload, "queued while away");
}

}  // namespace
}  // namespace estuary::conformance
