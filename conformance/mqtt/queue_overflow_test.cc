// Issue 27, point 3, against a real estuaryd: what a persistent session's
// full offline queue does under --queue-overflow drop-oldest and reject
// (drop-new, the default, is limits_test.cc's MaxQueuedMessagesKeepsTheFirstN).
#include <gtest/gtest.h>

#include "conformance/mqtt/raw_fixture.h"

namespace estuary::conformance {
namespace {

using mqtt::AckPacket;
using mqtt::PacketType;

class OverflowV5 : public RawV5 {
 protected:
  // A persistent session subscribed to `topic` at QoS 1, offline for certain.
  void OfflineSubscriber(const std::string& id, const std::string& topic) {
    mqtt::Properties session;
    session.session_expiry_interval = 300;
    auto client = Connect(id, false, session);
    mqtt::SubscribeOptions options;
    options.qos = 1;
    ASSERT_TRUE(Subscribe(*client, topic, options).has_value());
    DisconnectAndWait(*client);
  }
  // Resumes the session; the payloads it was sent before `marker`.
  std::vector<std::string> Resume(const std::string& id, const std::string& topic) {
    mqtt::Properties session;
    session.session_expiry_interval = 300;
    auto client = Connect(id, false, session);
    RawPublish(topic, "marker", 1);
    std::vector<std::string> got;
    for (;;) {
      auto message = ReceivePublish(*client);
      if (!message) {
        ADD_FAILURE() << "the marker never came";
        break;
      }
      if (message->payload == "marker") break;
      got.push_back(message->payload);
    }
    return got;
  }
  // One QoS 1/2 PUBLISH and the server's answer to it.
  static std::optional<AckPacket> PublishOnce(RawClient& client, const std::string& topic,
                                              const std::string& payload, uint8_t qos, uint16_t id) {
    client.Send(MakePublish(topic, payload, qos, id));
    return client.ReceiveAs<AckPacket>();
  }
};

class OverflowV311 : public RawV311 {
 protected:
  uint64_t MetricSum(const std::string& name) {
    auto page = testing::HttpGet(broker().host(), broker().admin_port(), "/metrics");
    uint64_t sum = 0;
    for (size_t at = 0; (at = page.body.find("\n" + name + "{", at)) != std::string::npos;) {
      const size_t end = page.body.find('\n', at + 1);
      const std::string line = page.body.substr(at + 1, end - at - 1);
      sum += std::stoull(line.substr(line.rfind(' ') + 1));
      at = end;
    }
    return sum;
  }
};

TEST_F(OverflowV5, Issue27DropOldestKeepsTheNewest) {
  RestartBroker({"--max-queued-messages", "3", "--queue-overflow", "drop-oldest"});
  const std::string id = Unique("away");
  const std::string topic = Unique("overflow/");
  OfflineSubscriber(id, topic);
  for (const char* payload : {"1", "2", "3", "4", "5", "6"}) RawPublish(topic, payload, 1);  // each PUBACKed
  EXPECT_EQ(Resume(id, topic), (std::vector<std::string>{"4", "5", "6"}));
}

// PUBACK/PUBREC 0x97 once the offline session's queue is full; the QoS 2
// exchange ends with the refused PUBREC (its packet id is free again).
TEST_F(OverflowV5, Issue27RejectAnswersQuotaExceeded) {
  RestartBroker({"--max-queued-messages", "2", "--queue-overflow", "reject"});
  const std::string id = Unique("away");
  const std::string topic = Unique("overflow/");
  OfflineSubscriber(id, topic);
  auto publisher = Connect(Unique("pub"));
  for (uint16_t packet_id : {1, 2}) {
    auto ack = PublishOnce(*publisher, topic, "m" + std::to_string(packet_id), 1, packet_id);
    ASSERT_TRUE(ack.has_value());
    EXPECT_EQ(ack->reason, ReasonCode::kSuccess);
  }
  auto refused = PublishOnce(*publisher, topic, "m3", 1, 3);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->type, PacketType::kPuback);
  EXPECT_EQ(refused->reason, ReasonCode::kQuotaExceeded);
  auto refused_qos2 = PublishOnce(*publisher, topic, "m4", 2, 4);
  ASSERT_TRUE(refused_qos2.has_value());
  EXPECT_EQ(refused_qos2->type, PacketType::kPubrec);
  EXPECT_EQ(refused_qos2->reason, ReasonCode::kQuotaExceeded);
  // A topic nobody full matches is acknowledged as ever.
  auto other = PublishOnce(*publisher, Unique("elsewhere/"), "x", 1, 5);
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->reason, ReasonCode::kSuccess);
  EXPECT_EQ(Resume(id, topic), (std::vector<std::string>{"m1", "m2"}));
}

// MQTT 3.1.1 has no negative acknowledgement: the publisher is acknowledged
// (and counted, estuary_publishes_acknowledged_queue_full_total).
TEST_F(OverflowV311, Issue27RejectAcknowledgesA311Publisher) {
  RestartBroker({"--max-queued-messages", "1", "--queue-overflow", "reject"});
  const std::string id = Unique("away");
  const std::string topic = Unique("overflow/");
  {
    auto client = Connect(id, false);
    mqtt::SubscribeOptions options;
    options.qos = 1;
    ASSERT_TRUE(Subscribe(*client, topic, options).has_value());
    DisconnectAndWait(*client);
  }
  auto publisher = Connect(Unique("pub"));
  for (uint16_t packet_id : {1, 2}) {
    publisher->Send(MakePublish(topic, "m", 1, packet_id));
    auto ack = publisher->ReceiveAs<AckPacket>();
    ASSERT_TRUE(ack.has_value()) << "no PUBACK for " << packet_id;
    EXPECT_EQ(ack->packet_id, packet_id);
  }
  EXPECT_EQ(MetricSum("estuary_publishes_acknowledged_queue_full_total"), 1u);
}

}  // namespace
}  // namespace estuary::conformance
