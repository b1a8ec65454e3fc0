// MQTT <-> AMQP through one node: a Paho MQTT client and a Proton AMQP
// client exchange messages both ways (the mapping itself is
// frontends/amqp/mapping's, tested there and in docs/mapping.md).
#include "conformance/amqp/amqp_fixture.h"
#include "conformance/mqtt/paho_client.h"

namespace estuary::conformance {
namespace {

using Kind = AmqpEvent::Kind;

class AmqpBridgeTest : public AmqpFixture {};

// §3.2 message format: an MQTT QoS 1 publish reaches an AMQP receiver
// whose source is a filter matching it; the topic is the AMQP `to`.
TEST_F(AmqpBridgeTest, MqttPublishReachesAnAmqpReceiver) {
  auto amqp = Connect({.container_id = Unique("bridge-in")});
  const std::string root = Unique("bridge");
  Receive(*amqp, "r", root + "/+/temp");
  PahoClient mqtt(uri(), Unique("paho-pub"), MQTTVERSION_5);
  mqtt.Connect();
  mqtt.Publish(root + "/room.1/temp", "21.5", 1);
  auto message = amqp->Wait(Kind::kMessage, "r");
  ASSERT_TRUE(message.has_value());
  EXPECT_EQ(Body(*message), "21.5");
  EXPECT_EQ(message->message.to(), root + "/room.1/temp") << "dots stay dots";
  EXPECT_FALSE(message->settled) << "QoS 1 arrives unsettled";
  amqp->Settle(message->delivery, AmqpClient::Outcome::kAccept);
  mqtt.Disconnect();
}

// §3.4.2: an AMQP unsettled transfer reaches an MQTT subscriber at QoS 1,
// and a pre-settled one at QoS 0.
TEST_F(AmqpBridgeTest, AmqpSendReachesAnMqttSubscriber) {
  const std::string topic = Unique("bridge-out/");
  PahoClient mqtt(uri(), Unique("paho-sub"), MQTTVERSION_5);
  mqtt.Connect();
  mqtt.Subscribe(topic + "/#", 1);
  auto amqp = Connect({.container_id = Unique("bridge-out")});
  Sender(*amqp, "unsettled", topic + "/a");
  Sender(*amqp, "settled", topic + "/b", {.presettled = true});
  amqp->Send("unsettled", "", "at least once");
  ASSERT_TRUE(amqp->Wait(Kind::kAccepted, "unsettled"));
  auto first = mqtt.Next();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->get_topic(), topic + "/a");
  EXPECT_EQ(first->to_string(), "at least once");
  EXPECT_EQ(first->get_qos(), 1);
  amqp->Send("settled", "", "at most once");
  auto second = mqtt.Next();
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->get_topic(), topic + "/b");
  EXPECT_EQ(second->get_qos(), 0);
  mqtt.Disconnect();
}

// Retained messages reach a new AMQP receiving link on attach, like a new
// MQTT subscription (§3.5.3 source; docs/amqp.md).
TEST_F(AmqpBridgeTest, RetainedMessageIsSentToANewReceiver) {
  const std::string topic = Unique("retained/");
  RawPublish(topic, "last known value", 1, /*retain=*/true);
  auto amqp = Connect({.container_id = Unique("retained")});
  Receive(*amqp, "r", topic);
  auto message = amqp->Wait(Kind::kMessage, "r");
  ASSERT_TRUE(message.has_value()) << "no retained message on attach";
  EXPECT_EQ(Body(*message), "last known value");
  amqp->Settle(message->delivery, AmqpClient::Outcome::kAccept);
}

// $share/G/F from both protocols: one group, MQTT and AMQP members.
TEST_F(AmqpBridgeTest, SharedGroupMixesMqttAndAmqpMembers) {
  const std::string topic = Unique("mixed/");
  PahoClient mqtt(uri(), Unique("paho-member"), MQTTVERSION_5);
  mqtt.Connect();
  mqtt.Subscribe("$share/mix/" + topic, 1);
  auto amqp = Connect({.container_id = Unique("amqp-member")});
  Receive(*amqp, "r", "$share/mix/" + topic);
  Sender(*amqp, "s", topic);
  constexpr int kCount = 20;
  for (int i = 0; i < kCount; ++i) amqp->Send("s", "", std::to_string(i));
  size_t from_amqp = 0;
  size_t from_mqtt = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (from_amqp + from_mqtt < kCount && std::chrono::steady_clock::now() < deadline) {
    for (auto& event : amqp->TakeMessages("r", kCount, std::chrono::milliseconds(100))) {
      ++from_amqp;
      amqp->Settle(event.delivery, AmqpClient::Outcome::kAccept);
    }
    from_mqtt += mqtt.Take(kCount, std::chrono::milliseconds(100)).size();
  }
  EXPECT_EQ(from_amqp + from_mqtt, static_cast<size_t>(kCount));
  EXPECT_GT(from_amqp, 0u);
  EXPECT_GT(from_mqtt, 0u);
  mqtt.Disconnect();
}

}  // namespace
}  // namespace estuary::conformance
