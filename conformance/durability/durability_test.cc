// A node that survives kill -9 (issue 4): a real estuaryd on a temp data
// dir, SIGKILLed in the middle of a stream of QoS 1 publishes, restarted on
// the same dir; the persistent subscriber must then get every message whose
// PUBACK the publisher saw (duplicates allowed for QoS 1, none lost).
// Repeated for both engines. docs/storage.md says what is stored and when
// a PUBLISH is acknowledged.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "conformance/durability/durability_fixture.h"
#include "conformance/mqtt/paho_client.h"

namespace estuary::conformance {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class DurabilityTest : public DurableNodeTest {
 protected:
  static bool Subscribe(RawClient& client, const std::string& filter, uint8_t qos) {
    mqtt::SubscribePacket subscribe;
    subscribe.packet_id = 1;
    subscribe.subscriptions.push_back({filter, mqtt::SubscribeOptions{qos}});
    client.Send(subscribe);
    auto suback = client.ReceiveAs<mqtt::SubackPacket>();
    return suback && suback->reasons.size() == 1 && static_cast<uint8_t>(suback->reasons[0]) == qos;
  }
  // Receives QoS 1 PUBLISHes, acknowledging each, until every payload in
  // `wanted` came or nothing arrives for `quiet`. Returns payload -> count.
  static std::map<std::string, int> ReceiveAll(RawClient& client, const std::set<std::string>& wanted,
                                               milliseconds quiet = milliseconds(10'000)) {
    std::map<std::string, int> got;
    size_t missing = wanted.size();
    while (missing > 0) {
      auto publish = client.ReceiveAs<mqtt::PublishPacket>(quiet);
      if (!publish) break;
      if (publish->qos == 1) Ack(client, mqtt::PacketType::kPuback, publish->packet_id);
      if (++got[publish->payload] == 1 && wanted.count(publish->payload) != 0) --missing;
    }
    return got;
  }
};

TEST_P(DurabilityTest, EveryAcknowledgedQos1MessageSurvivesKill9) {
  const std::string sub_id = IdOnShard("durable-sub", 0);
  const std::string pub_id = IdOnShard("durable-pub", 1);
  auto node = StartNode();
  ASSERT_NE(node, nullptr);
  {
    auto subscriber = Connect(*node, sub_id, true, 3600);
    ASSERT_NE(subscriber, nullptr);
    ASSERT_TRUE(Subscribe(*subscriber, "dur/#", 1));
  }  // closed: the session waits offline

  size_t sent = 0;
  const auto acknowledged =
      PublishAcrossKill(*node, pub_id, "dur", /*last_batch=*/100, [&] { Kill9(*node); }, &sent);
  ASSERT_FALSE(HasFailure()) << "the stream before the kill was not all acknowledged";
  std::printf("durability(%s): sent %zu, acknowledged %zu before kill -9\n", GetParam().c_str(), sent,
              acknowledged.size());

  node = StartNode();
  ASSERT_NE(node, nullptr);
  bool present = false;
  auto subscriber = Connect(*node, sub_id, false, 3600, &present);
  ASSERT_NE(subscriber, nullptr);
  EXPECT_TRUE(present) << "the persistent session is back [MQTT-3.2.2-2]";
  auto got = ReceiveAll(*subscriber, acknowledged);
  size_t lost = 0;
  size_t duplicates = 0;
  for (const auto& payload : acknowledged) lost += got.count(payload) == 0 ? 1 : 0;
  for (const auto& [payload, count] : got) duplicates += static_cast<size_t>(count - 1);
  std::printf("durability(%s): delivered %zu distinct, lost %zu, duplicated %zu\n", GetParam().c_str(),
              got.size(), lost, duplicates);
  EXPECT_EQ(lost, 0u);
  EXPECT_LE(got.size(), sent);
  EXPECT_EQ(node->Stop(), 0);
}

TEST_P(DurabilityTest, RetainedMessageSurvivesKill9) {
  auto node = StartNode();
  ASSERT_NE(node, nullptr);
  auto publisher = Connect(*node, "retainer", true, 0);
  ASSERT_NE(publisher, nullptr);
  for (uint16_t i = 1; i <= 10; ++i) {
    publisher->Send(Publish("keep/" + std::to_string(i), "r" + std::to_string(i), 1, i, true));
  }
  publisher->Send(Publish("keep/10", "", 1, 11, true));  // cleared again
  for (int i = 0; i < 11; ++i) ASSERT_TRUE(publisher->ReceiveAs<mqtt::AckPacket>()) << i;
  Kill9(*node);

  node = StartNode();
  ASSERT_NE(node, nullptr);
  auto subscriber = Connect(*node, "reader", true, 0);
  ASSERT_NE(subscriber, nullptr);
  ASSERT_TRUE(Subscribe(*subscriber, "keep/#", 1));
  std::set<std::string> wanted;
  for (int i = 1; i <= 9; ++i) wanted.insert("r" + std::to_string(i));
  auto got = ReceiveAll(*subscriber, wanted, milliseconds(3'000));
  std::set<std::string> distinct;
  for (const auto& entry : got) distinct.insert(entry.first);
  EXPECT_EQ(distinct, wanted);
}

TEST_P(DurabilityTest, Qos2InflightResumesWithPubrelAfterKill9) {
  const std::string sub_id = IdOnShard("exactly-once", 1);
  auto node = StartNode();
  ASSERT_NE(node, nullptr);
  {
    auto subscriber = Connect(*node, sub_id, true, 3600);
    ASSERT_NE(subscriber, nullptr);
    ASSERT_TRUE(Subscribe(*subscriber, "once", 2));
  }
  {
    auto publisher = Connect(*node, IdOnShard("once-pub", 0), true, 0);
    ASSERT_NE(publisher, nullptr);
    publisher->Send(Publish("once", "first", 2, 1));
    publisher->Send(Publish("once", "second", 2, 2));
    for (uint16_t id = 1; id <= 2; ++id) {
      auto pubrec = publisher->ReceiveAs<mqtt::AckPacket>();
      ASSERT_TRUE(pubrec && pubrec->type == mqtt::PacketType::kPubrec);
    }
    for (uint16_t id = 1; id <= 2; ++id) Ack(*publisher, mqtt::PacketType::kPubrel, id);
    for (uint16_t id = 1; id <= 2; ++id) {
      auto pubcomp = publisher->ReceiveAs<mqtt::AckPacket>();
      ASSERT_TRUE(pubcomp && pubcomp->type == mqtt::PacketType::kPubcomp);
    }
  }
  uint16_t first_id = 0;
  {
    auto subscriber = Connect(*node, sub_id, false, 3600);
    ASSERT_NE(subscriber, nullptr);
    auto first = subscriber->ReceiveAs<mqtt::PublishPacket>();
    auto second = subscriber->ReceiveAs<mqtt::PublishPacket>();
    ASSERT_TRUE(first && second);
    ASSERT_EQ(first->payload, "first");
    first_id = first->packet_id;
    // "first" reaches PUBREC/PUBREL; "second" is received but not yet acknowledged.
    Ack(*subscriber, mqtt::PacketType::kPubrec, first_id);
    auto pubrel = subscriber->ReceiveAs<mqtt::AckPacket>();
    ASSERT_TRUE(pubrel && pubrel->type == mqtt::PacketType::kPubrel);
  }
  Kill9(*node);

  node = StartNode();
  ASSERT_NE(node, nullptr);
  bool present = false;
  auto subscriber = Connect(*node, sub_id, false, 3600, &present);
  ASSERT_NE(subscriber, nullptr);
  EXPECT_TRUE(present);
  // [MQTT-4.4.0-1] resent in order: PUBREL for "first" (never its PUBLISH
  // again), then "second" with DUP set.
  auto pubrel = subscriber->ReceiveAs<mqtt::AckPacket>();
  ASSERT_TRUE(pubrel) << "expected PUBREL first";
  EXPECT_EQ(pubrel->type, mqtt::PacketType::kPubrel);
  EXPECT_EQ(pubrel->packet_id, first_id);
  auto resent = subscriber->ReceiveAs<mqtt::PublishPacket>();
  ASSERT_TRUE(resent);
  EXPECT_EQ(resent->payload, "second");
  EXPECT_TRUE(resent->dup);
  EXPECT_EQ(resent->qos, 2);
}

// Eclipse Paho (MQTT 5): QoS 2 messages queued for an offline persistent
// session are delivered exactly once after kill -9 and a restart.
TEST_P(DurabilityTest, PahoQos2QueuedMessagesArriveExactlyOnceAfterKill9) {
  auto node = StartNode();
  ASSERT_NE(node, nullptr);
  PahoClient::ConnectOptions persistent;
  persistent.clean = true;
  persistent.properties = Props({paho::property(paho::property::SESSION_EXPIRY_INTERVAL, 3600)});
  {
    PahoClient subscriber(node->mqtt_uri(), "paho-durable", MQTTVERSION_5);
    subscriber.Connect(persistent);
    ASSERT_EQ(subscriber.Subscribe("paho/#", 2).at(0), paho::ReasonCode::GRANTED_QOS_2);
    subscriber.Disconnect();
  }
  {
    PahoClient publisher(node->mqtt_uri(), "paho-publisher", MQTTVERSION_5);
    publisher.Connect();
    for (int i = 0; i < 50; ++i) publisher.Publish("paho/" + std::to_string(i % 3), "q" + std::to_string(i), 2);
    publisher.Disconnect();
  }
  Kill9(*node);

  node = StartNode();
  ASSERT_NE(node, nullptr);
  PahoClient subscriber(node->mqtt_uri(), "paho-durable", MQTTVERSION_5);
  persistent.clean = false;
  EXPECT_TRUE(subscriber.Connect(persistent).is_session_present());
  auto messages = subscriber.Take(50, seconds(15));
  std::map<std::string, int> counts;
  for (const auto& message : messages) ++counts[message->to_string()];
  EXPECT_EQ(counts.size(), 50u);
  for (const auto& [payload, count] : counts) EXPECT_EQ(count, 1) << payload;
  EXPECT_EQ(subscriber.Next(std::chrono::milliseconds(500)), nullptr) << "nothing more, no duplicate";
}

TEST_P(DurabilityTest, RefusesADataDirWrittenWithAnotherShardCount) {
  auto node = StartNode();
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->Stop(), 0);
  std::string error;
  auto other = BrokerProcess::Start({"--data-dir", dir_.path(), "--storage", GetParam(), "--shards", "3"},
                                    &error, seconds(10));
  EXPECT_EQ(other, nullptr);
  node = StartNode();  // the original shard count still starts
  ASSERT_NE(node, nullptr);
}

INSTANTIATE_TEST_SUITE_P(Engines, DurabilityTest, ::testing::Values("bitcask", "rocksdb"), EngineName);

}  // namespace
}  // namespace estuary::conformance
