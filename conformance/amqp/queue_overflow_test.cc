// Issue 27, point 3: under --queue-overflow reject an unsettled AMQP
// transfer whose message a matching session's full queue refused is
// rejected (§3.4.3) with amqp:resource-limit-exceeded (§2.8.15), instead of
// accepted; the sessions with room still get it.
#include <proton/message.hpp>

#include "conformance/amqp/amqp_fixture.h"

namespace estuary::conformance {
namespace {

using Kind = AmqpEvent::Kind;

class AmqpQueueOverflowTest : public AmqpFixture {};

TEST_F(AmqpQueueOverflowTest, Issue27RejectedWithResourceLimitExceededWhenAQueueIsFull) {
  RestartBroker({"--max-queued-messages", "1", "--queue-overflow", "reject"});
  const std::string topic = Unique("overflow/");
  const std::string away = Unique("away");
  {
    // A persistent MQTT session subscribed to the topic, offline.
    mqtt::Properties session;
    session.session_expiry_interval = 300;
    auto client = ConnectRaw(away, mqtt::ProtocolVersion::kV5, false, session);
    mqtt::SubscribeOptions options;
    options.qos = 1;
    ASSERT_TRUE(Subscribe(*client, topic, options).has_value());
    DisconnectAndWait(*client);
  }
  auto client = Connect({.container_id = Unique("sender")});
  Receive(*client, "r", topic);  // a live receiver with room
  Sender(*client, "s", topic);
  client->Send("s", "", "fits");
  EXPECT_TRUE(client->Wait(Kind::kAccepted, "s")) << "the first message was not accepted";
  client->Send("s", "", "does not fit");
  auto rejected = client->Wait(Kind::kRejected, "s");
  ASSERT_TRUE(rejected.has_value()) << "no rejection for a full queue";
  EXPECT_EQ(rejected->condition, "amqp:resource-limit-exceeded") << rejected->description;
  auto messages = client->TakeMessages("r", 2);
  ASSERT_EQ(messages.size(), 2u) << "the receiver with room lost a message";
  EXPECT_EQ(Body(messages[1]), "does not fit");
  EXPECT_EQ(MetricSum("estuary_publishes_rejected_queue_full_total"), 1u);
}

}  // namespace
}  // namespace estuary::conformance
