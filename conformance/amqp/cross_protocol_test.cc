// Cross-protocol conformance: every row of docs/mapping.md through a real
// estuaryd, MQTT 5 clients (raw, for exact PUBLISH packets, and Paho) on
// one side and Qpid Proton C++ on the other. AMQP section numbers are those
// of the OASIS AMQP 1.0 specification, part 3.2 (message format); MQTT ones
// of MQTT 5.0 §3.3 (PUBLISH).
#include <proton/annotation_key.hpp>
#include <proton/binary.hpp>
#include <proton/codec/vector.hpp>
#include <proton/message_id.hpp>
#include <proton/symbol.hpp>

#include <set>

#include "conformance/amqp/amqp_fixture.h"
#include "conformance/mqtt/paho_client.h"
#include "frontends/mqtt/codec/encoder.h"

namespace estuary::conformance {
namespace {

using Kind = AmqpEvent::Kind;

proton::value Annotation(const proton::message& message, const std::string& name) {
  const auto& map = message.message_annotations();
  proton::annotation_key key{proton::symbol(name)};
  return map.exists(key) ? map.get(key) : proton::value();
}

std::string Bytes(const proton::value& value) {
  auto binary = proton::get<proton::binary>(value);
  return std::string(binary.begin(), binary.end());
}

class CrossProtocolTest : public AmqpFixture {
 protected:
  static void Puback(RawClient& client, uint16_t packet_id) {
    mqtt::AckPacket ack;
    ack.type = mqtt::PacketType::kPuback;
    ack.packet_id = packet_id;
    client.Send(ack);
  }
  // The next PUBLISH on a raw client, acknowledged if QoS 1.
  static std::optional<mqtt::PublishPacket> NextPublish(RawClient& client) {
    auto publish = client.ReceiveAs<mqtt::PublishPacket>();
    if (publish && publish->qos == 1) {
      Puback(client, publish->packet_id);
    }
    return publish;
  }
  // Receives one message on `link` and accepts it if unsettled.
  static std::optional<AmqpEvent> NextMessage(AmqpClient& client, const std::string& link) {
    auto event = client.Wait(Kind::kMessage, link);
    if (event && !event->settled) client.Settle(event->delivery, AmqpClient::Outcome::kAccept);
    return event;
  }
  static std::string Encode(const mqtt::PublishPacket& publish) {
    std::string bytes;
    mqtt::EncodePacket(publish, mqtt::ProtocolVersion::kV5, bytes);
    return bytes;
  }
};

// --- MQTT -> AMQP, one row each ---

// §3.2.5 properties, §3.2.6 application-properties, §3.2.4
// message-annotations: every MQTT 5 PUBLISH property an AMQP receiver can
// see, as docs/mapping.md says.
TEST_F(CrossProtocolTest, MqttPropertiesArriveAsAmqpProperties) {
  const std::string topic = Unique("x/rows.mqtt/");
  auto amqp = Connect({.container_id = Unique("rows")});
  Receive(*amqp, "r", topic);
  mqtt::Properties properties;
  properties.content_type = "application/octet-stream";
  properties.response_topic = topic + "/reply";
  properties.correlation_data = std::string("\x00\x01\x02", 3);
  properties.message_expiry_interval = 120;
  properties.payload_format_indicator = 0;
  properties.user_properties = {{"z", "1"}, {"a", "2"}, {"z", "3"}};
  RawPublish(topic, std::string("\x00\xff", 2), 1, false, properties);
  auto event = NextMessage(*amqp, "r");
  ASSERT_TRUE(event);
  const proton::message& m = event->message;
  EXPECT_EQ(m.to(), topic);
  ASSERT_EQ(m.body().type(), proton::BINARY) << "§3.2.7: one data section";
  EXPECT_EQ(Bytes(m.body()), std::string("\x00\xff", 2));
  EXPECT_EQ(m.content_type(), "application/octet-stream");
  EXPECT_EQ(m.reply_to(), topic + "/reply");
  ASSERT_EQ(m.correlation_id().type(), proton::BINARY);
  EXPECT_EQ(std::string(proton::get<proton::binary>(m.correlation_id())), std::string("\x00\x01\x02", 3));
  EXPECT_GT(m.ttl().milliseconds(), 110'000);
  EXPECT_LE(m.ttl().milliseconds(), 120'000);
  EXPECT_EQ(proton::get<uint8_t>(Annotation(m, "x-opt-mqtt-payload-format")), 0);
  EXPECT_EQ(proton::get<std::string>(m.properties().get("z")), "1") << "first value of a repeated key";
  EXPECT_EQ(proton::get<std::string>(m.properties().get("a")), "2");
  std::vector<std::string> listed;
  proton::get(Annotation(m, "x-opt-mqtt-user-properties"), listed);
  EXPECT_EQ(listed, (std::vector<std::string>{"z", "1", "a", "2", "z", "3"}));
  EXPECT_EQ(proton::get<proton::symbol>(Annotation(m, "x-opt-origin-protocol")), "mqtt");
  EXPECT_EQ(proton::get<std::string>(Annotation(m, "x-opt-origin-client-id")).rfind("raw-pub", 0), 0u);
  EXPECT_TRUE(Annotation(m, "x-opt-retain").empty()) << "a live message is not retained";
}

// §3.2.9 amqp-value: MQTT payload format 1 (UTF-8) arrives as a string.
TEST_F(CrossProtocolTest, MqttUtf8PayloadArrivesAsAmqpValueString) {
  const std::string topic = Unique("x/utf8/");
  auto amqp = Connect({.container_id = Unique("utf8")});
  Receive(*amqp, "r", topic);
  mqtt::Properties properties;
  properties.payload_format_indicator = 1;
  RawPublish(topic, "héllo", 1, false, properties);
  auto event = NextMessage(*amqp, "r");
  ASSERT_TRUE(event);
  ASSERT_EQ(event->message.body().type(), proton::STRING);
  EXPECT_EQ(proton::get<std::string>(event->message.body()), "héllo");
  EXPECT_TRUE(Annotation(event->message, "x-opt-mqtt-payload-format").empty());
}

// --- AMQP -> MQTT, one row each ---

// MQTT 5.0 §3.3.2.3: properties of an AMQP message as PUBLISH properties.
TEST_F(CrossProtocolTest, AmqpPropertiesArriveAsMqttProperties) {
  const std::string topic = Unique("x/rows.amqp/");
  auto subscriber = SubscribeRaw(Unique("rows-sub"), topic, 1);
  auto amqp = Connect({.container_id = Unique("rows-send")});
  Sender(*amqp, "s", topic);
  proton::message m;
  m.body(proton::binary(std::string("\x01\x02", 2)));
  m.inferred(true);
  m.content_type("application/cbor");
  m.reply_to(topic + "/reply");
  m.correlation_id(proton::message_id(std::string("req-1")));
  m.ttl(proton::duration(90'000));
  m.properties().put("b", std::string("2"));
  m.properties().put("a", std::string("1"));
  m.properties().put("n", int64_t{5});  // not a string: not an MQTT user property
  m.subject("not seen by MQTT");
  amqp->Send("s", m);
  ASSERT_TRUE(amqp->Wait(Kind::kAccepted, "s"));
  auto publish = NextPublish(*subscriber);
  ASSERT_TRUE(publish);
  EXPECT_EQ(publish->topic, topic);
  EXPECT_EQ(publish->payload, std::string("\x01\x02", 2));
  EXPECT_EQ(publish->qos, 1) << "unsettled transfer: at least once";
  const mqtt::Properties& p = publish->properties;
  EXPECT_FALSE(p.payload_format_indicator.has_value());
  EXPECT_EQ(p.content_type, "application/cbor");
  EXPECT_EQ(p.response_topic, topic + "/reply");
  EXPECT_EQ(p.correlation_data, "req-1") << "a string correlation-id as its bytes";
  ASSERT_TRUE(p.message_expiry_interval.has_value());
  EXPECT_GE(*p.message_expiry_interval, 85u);
  EXPECT_LE(*p.message_expiry_interval, 90u);
  EXPECT_EQ(p.user_properties,
            (std::vector<std::pair<std::string, std::string>>{{"a", "1"}, {"b", "2"}}));
}

// §3.2.9: an amqp-value string reaches MQTT as UTF-8 with payload format 1.
TEST_F(CrossProtocolTest, AmqpStringArrivesAsUtf8WithPayloadFormatOne) {
  const std::string topic = Unique("x/string/");
  auto subscriber = SubscribeRaw(Unique("string-sub"), topic, 1);
  auto amqp = Connect({.container_id = Unique("string-send")});
  Sender(*amqp, "s", topic);
  amqp->Send("s", proton::message(std::string("text €")));
  auto publish = NextPublish(*subscriber);
  ASSERT_TRUE(publish);
  EXPECT_EQ(publish->payload, "text €");
  EXPECT_EQ(publish->properties.payload_format_indicator, 1);
}

// §3.2.9 amqp-value of another type: the encoded body and the x-amqp-body
// user property; an MQTT client that publishes it back restores the body.
TEST_F(CrossProtocolTest, OtherAmqpBodiesTravelEncodedAndComeBack) {
  const std::string topic = Unique("x/encoded/");
  auto subscriber = SubscribeRaw(Unique("encoded-sub"), topic + "/in", 1);
  auto amqp = Connect({.container_id = Unique("encoded")});
  Receive(*amqp, "r", topic + "/out");
  Sender(*amqp, "s", topic + "/in");
  amqp->Send("s", proton::message(int32_t{42}));
  auto publish = NextPublish(*subscriber);
  ASSERT_TRUE(publish);
  EXPECT_EQ(publish->payload, std::string("\x00\x53\x77\x54\x2a", 5)) << "amqp-value smallint 42";
  ASSERT_EQ(publish->properties.user_properties.size(), 1u);
  EXPECT_EQ(publish->properties.user_properties[0],
            (std::pair<std::string, std::string>{"x-amqp-body", "amqp-value"}));
  RawPublish(topic + "/out", publish->payload, 1, false, publish->properties);
  auto event = NextMessage(*amqp, "r");
  ASSERT_TRUE(event);
  ASSERT_EQ(event->message.body().type(), proton::INT);
  EXPECT_EQ(proton::get<int32_t>(event->message.body()), 42);
  EXPECT_TRUE(event->message.properties().empty());
}

// §3.2.5 absolute-expiry-time reaches MQTT as the message expiry interval
// remaining (MQTT 5.0 §3.3.2.3.3).
TEST_F(CrossProtocolTest, AbsoluteExpiryTimeBecomesMqttExpiry) {
  const std::string topic = Unique("x/absolute/");
  auto subscriber = SubscribeRaw(Unique("absolute-sub"), topic, 1);
  auto amqp = Connect({.container_id = Unique("absolute")});
  Sender(*amqp, "s", topic);
  proton::message m(proton::binary(std::string("x")));
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now).count();
  m.expiry_time(proton::timestamp(now_ms + 300'000));
  amqp->Send("s", m);
  auto publish = NextPublish(*subscriber);
  ASSERT_TRUE(publish);
  ASSERT_TRUE(publish->properties.message_expiry_interval.has_value());
  EXPECT_GE(*publish->properties.message_expiry_interval, 290u);
  EXPECT_LE(*publish->properties.message_expiry_interval, 300u);
}

// An AMQP message reaches an MQTT subscription with its subscription
// identifier (MQTT 5.0 §3.3.4, MQTT-3.3.4-3).
TEST_F(CrossProtocolTest, AmqpMessageCarriesTheMqttSubscriptionIdentifier) {
  const std::string topic = Unique("x/subid/");
  PahoClient mqtt(uri(), Unique("subid-sub"), MQTTVERSION_5);
  mqtt.Connect();
  mqtt.Subscribe(topic + "/#", 1, paho::subscribe_options(),
                 Props({paho::property(paho::property::SUBSCRIPTION_IDENTIFIER, 7)}));
  auto amqp = Connect({.container_id = Unique("subid")});
  Sender(*amqp, "s", topic + "/a");
  amqp->Send("s", "", "x");
  auto message = mqtt.Next();
  ASSERT_NE(message, nullptr);
  EXPECT_EQ(SubscriptionIds(message->get_properties()), std::vector<uint32_t>{7});
  mqtt.Disconnect();
}

// Multi-frame messages (§2.6.14, frames of at most 64 KiB here) both ways,
// bytes intact.
TEST_F(CrossProtocolTest, LargeMessagesCrossBothWays) {
  const std::string topic = Unique("x/large/");
  std::string payload(300'000, '\0');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 131 % 251);
  auto subscriber = SubscribeRaw(Unique("large-sub"), topic + "/amqp", 1);
  auto amqp = Connect({.container_id = Unique("large")});
  Receive(*amqp, "r", topic + "/mqtt");
  RawPublish(topic + "/mqtt", payload, 1);
  auto event = NextMessage(*amqp, "r");
  ASSERT_TRUE(event);
  EXPECT_EQ(Body(*event), payload);
  Sender(*amqp, "s", topic + "/amqp");
  amqp->Send("s", event->message);
  auto publish = NextPublish(*subscriber);
  ASSERT_TRUE(publish);
  EXPECT_EQ(publish->payload, payload);
}

// --- round trips ---

// MQTT -> AMQP -> MQTT is byte-identical: an AMQP client forwards what it
// received, unchanged, to the same topic; the MQTT subscriber's two copies
// (direct, and through AMQP) are the same PUBLISH but for the packet id.
TEST_F(CrossProtocolTest, MqttToAmqpToMqttIsByteIdentical) {
  const std::string topic = Unique("x/round.trip/");
  auto subscriber = SubscribeRaw(Unique("rt-sub"), topic, 1);
  auto amqp = Connect({.container_id = Unique("rt-forward")});
  Receive(*amqp, "r", topic, {.credit = 1});  // the forwarded copy stays queued for it
  Sender(*amqp, "s", topic);
  mqtt::Properties properties;
  properties.payload_format_indicator = 1;
  properties.message_expiry_interval = 600;
  properties.content_type = "";
  properties.response_topic = "reply/to.me";
  properties.correlation_data = "";
  properties.user_properties = {{"k", "v"}, {"", ""}, {"k", "v2"}, {"b", "x"}};
  RawPublish(topic, "payload ✓", 1, false, properties);
  auto direct = NextPublish(*subscriber);
  ASSERT_TRUE(direct);
  auto event = NextMessage(*amqp, "r");
  ASSERT_TRUE(event);
  amqp->Send("s", event->message);
  auto forwarded = NextPublish(*subscriber);
  ASSERT_TRUE(forwarded);
  direct->packet_id = forwarded->packet_id = 0;
  EXPECT_EQ(*forwarded, *direct);
  EXPECT_EQ(Encode(*forwarded), Encode(*direct));
}

// AMQP -> broker -> AMQP keeps the AMQP-only parts (§3.2.1 header,
// §3.2.2 delivery-annotations, §3.2.4, §3.2.5, §3.2.6).
TEST_F(CrossProtocolTest, AmqpOnlyPartsSurviveAmqpToAmqp) {
  const std::string topic = Unique("x/amqp-only/");
  auto amqp = Connect({.container_id = Unique("amqp-only")});
  Receive(*amqp, "r", topic);
  Sender(*amqp, "s", topic);
  proton::message m(std::string("body"));
  m.id(proton::message_id(uint64_t{77}));
  m.subject("subject");
  m.group_id("group");
  m.content_encoding("identity");
  m.priority(7);
  m.durable(true);
  m.correlation_id(proton::message_id(uint64_t{9}));
  m.properties().put("count", int32_t{3});
  m.message_annotations().put(proton::symbol("x-app"), std::string("kept"));
  amqp->Send("s", m);
  auto event = NextMessage(*amqp, "r");
  ASSERT_TRUE(event);
  const proton::message& out = event->message;
  EXPECT_EQ(out.id(), m.id());
  EXPECT_EQ(out.subject(), "subject");
  EXPECT_EQ(out.group_id(), "group");
  EXPECT_EQ(out.content_encoding(), "identity");
  EXPECT_EQ(out.priority(), 7);
  EXPECT_TRUE(out.durable());
  EXPECT_EQ(out.correlation_id(), proton::message_id(uint64_t{9})) << "typed, not binary";
  EXPECT_EQ(proton::get<int32_t>(out.properties().get("count")), 3);
  EXPECT_EQ(proton::get<std::string>(Annotation(out, "x-app")), "kept");
  EXPECT_EQ(proton::get<std::string>(out.body()), "body");
  EXPECT_EQ(proton::get<proton::symbol>(Annotation(out, "x-opt-origin-protocol")), "amqp");

  // §3.2.1: a message sent with the header's defaults arrives with them
  // (the uAMQP suite cannot read a false boolean reliably; this does).
  amqp->Send("s", proton::message(std::string("plain")));
  auto plain = NextMessage(*amqp, "r");
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->message.durable()) << "a non-durable message arrived durable";
  EXPECT_EQ(plain->message.priority(), 4) << "default priority changed";
  EXPECT_EQ(plain->message.ttl(), proton::duration(0)) << "a message without ttl got one";
}

// AMQP -> MQTT -> AMQP (an MQTT client republishes what it got) keeps what
// MQTT carries and loses the AMQP-only parts, as docs/mapping.md lists.
TEST_F(CrossProtocolTest, AmqpToMqttToAmqpKeepsWhatMqttCarries) {
  const std::string topic = Unique("x/via-mqtt/");
  auto subscriber = SubscribeRaw(Unique("via-sub"), topic + "/in", 1);
  auto amqp = Connect({.container_id = Unique("via-mqtt")});
  Receive(*amqp, "r", topic + "/out");
  Sender(*amqp, "s", topic + "/in");
  proton::message m(std::string("text"));
  m.content_type("text/plain");
  m.reply_to("reply/here");
  m.correlation_id(proton::message_id(std::string("c-1")));
  m.subject("lost");
  m.properties().put("kept", std::string("yes"));
  m.properties().put("typed", int32_t{1});
  amqp->Send("s", m);
  auto publish = NextPublish(*subscriber);
  ASSERT_TRUE(publish);
  RawPublish(topic + "/out", publish->payload, 1, false, publish->properties);
  auto event = NextMessage(*amqp, "r");
  ASSERT_TRUE(event);
  const proton::message& out = event->message;
  EXPECT_EQ(proton::get<std::string>(out.body()), "text");
  EXPECT_EQ(out.content_type(), "text/plain");
  EXPECT_EQ(out.reply_to(), "reply/here");
  EXPECT_EQ(out.correlation_id(), proton::message_id(proton::binary(std::string("c-1"))))
      << "the bytes survive, the string type does not";
  EXPECT_EQ(proton::get<std::string>(out.properties().get("kept")), "yes");
  EXPECT_FALSE(out.properties().exists("typed")) << "non-string values are not MQTT user properties";
  EXPECT_EQ(out.subject(), "") << "AMQP-only: MQTT never saw it";
}

// --- QoS and settlement ---

// §3.4 settlement: MQTT QoS 0/1/2 to AMQP receivers pre-settled and
// unsettled. A pre-settled link gets everything settled; an unsettled link
// gets everything unsettled (QoS 0 included: snd-settle-mode unsettled).
TEST_F(CrossProtocolTest, EveryMqttQosToEverySettlementMode) {
  const std::string topic = Unique("x/qos/");
  auto amqp = Connect({.container_id = Unique("qos")});
  Receive(*amqp, "settled", topic, {.presettled = true});
  Receive(*amqp, "unsettled", topic);
  PahoClient mqtt(uri(), Unique("qos-pub"), MQTTVERSION_5);
  mqtt.Connect();
  for (int qos = 0; qos <= 2; ++qos) {
    SCOPED_TRACE("published at QoS " + std::to_string(qos));
    mqtt.Publish(topic, "q" + std::to_string(qos), qos);
    auto settled = NextMessage(*amqp, "settled");
    ASSERT_TRUE(settled);
    EXPECT_TRUE(settled->settled);
    EXPECT_EQ(Body(*settled), "q" + std::to_string(qos));
    auto unsettled = NextMessage(*amqp, "unsettled");
    ASSERT_TRUE(unsettled);
    EXPECT_FALSE(unsettled->settled);
    EXPECT_EQ(Body(*unsettled), "q" + std::to_string(qos));
  }
  mqtt.Disconnect();
}

// Pre-settled = QoS 0, unsettled = QoS 1, each capped by the subscription's
// maximum QoS (0, 1, 2).
TEST_F(CrossProtocolTest, EverySettlementModeToEveryMqttQos) {
  const std::string topic = Unique("x/settle/");
  std::vector<std::unique_ptr<RawClient>> subscribers;
  for (uint8_t qos = 0; qos <= 2; ++qos) {
    subscribers.push_back(SubscribeRaw(Unique("settle-sub"), topic, qos));
  }
  auto amqp = Connect({.container_id = Unique("settle")});
  Sender(*amqp, "settled", topic, {.presettled = true});
  Sender(*amqp, "unsettled", topic);
  for (const std::string link : {"settled", "unsettled"}) {
    amqp->Send(link, "", link);
    const int published = link == "settled" ? 0 : 1;
    for (uint8_t granted = 0; granted <= 2; ++granted) {
      SCOPED_TRACE(link + " to a subscription granted QoS " + std::to_string(granted));
      auto& subscriber = *subscribers[granted];
      auto publish = subscriber.ReceiveAs<mqtt::PublishPacket>();
      ASSERT_TRUE(publish);
      EXPECT_EQ(publish->payload, link);
      EXPECT_EQ(publish->qos, std::min<int>(published, granted));
      if (publish->qos == 1) Puback(subscriber, publish->packet_id);
    }
  }
}

// --- wildcards, retained, shared groups ---

// Source address = MQTT filter with + and #; target = topic name.
TEST_F(CrossProtocolTest, WildcardsWorkFromBothSides) {
  const std::string root = Unique("x/wild");
  auto amqp = Connect({.container_id = Unique("wild")});
  Receive(*amqp, "plus", root + "/+/temp");
  Receive(*amqp, "hash", root + "/#");
  auto subscriber = SubscribeRaw(Unique("wild-sub"), root + "/amqp/+", 1);
  RawPublish(root + "/room.1/temp", "t1", 1);
  RawPublish(root + "/room.1/humidity", "h1", 1);
  RawPublish(root + "/room.2/temp", "t2", 1);
  for (const std::string expected : {"/room.1/temp", "/room.2/temp"}) {
    auto plus = NextMessage(*amqp, "plus");  // humidity does not match +/temp
    ASSERT_TRUE(plus);
    EXPECT_EQ(plus->message.to(), root + expected);
  }
  std::vector<std::string> hash;
  for (auto& event : amqp->TakeMessages("hash", 3)) {
    hash.push_back(event.message.to());
    amqp->Settle(event.delivery, AmqpClient::Outcome::kAccept);
  }
  EXPECT_EQ(hash, (std::vector<std::string>{root + "/room.1/temp", root + "/room.1/humidity",
                                            root + "/room.2/temp"}));
  Sender(*amqp, "s", root + "/amqp/x.y");
  amqp->Send("s", "", "from amqp");
  auto publish = NextPublish(*subscriber);
  ASSERT_TRUE(publish);
  EXPECT_EQ(publish->topic, root + "/amqp/x.y");
}

// A retained MQTT message reaches an AMQP receiver on attach, marked
// x-opt-retain; an AMQP sender's x-opt-retain publishes a retained message
// an MQTT subscriber gets on subscribe (MQTT-3.3.1-6, -9).
TEST_F(CrossProtocolTest, RetainedMessagesCrossBothWays) {
  const std::string topic = Unique("x/retained/");
  RawPublish(topic + "/mqtt", "from mqtt", 1, true);
  auto amqp = Connect({.container_id = Unique("retained")});
  Receive(*amqp, "r", topic + "/mqtt");
  auto event = NextMessage(*amqp, "r");
  ASSERT_TRUE(event);
  EXPECT_EQ(Body(*event), "from mqtt");
  EXPECT_TRUE(proton::get<bool>(Annotation(event->message, "x-opt-retain")));

  Sender(*amqp, "s", topic + "/amqp");
  proton::message retained(proton::binary(std::string("from amqp")));
  retained.inferred(true);
  retained.message_annotations().put(proton::symbol("x-opt-retain"), true);
  amqp->Send("s", retained);
  ASSERT_TRUE(amqp->Wait(Kind::kAccepted, "s"));
  auto subscriber = SubscribeRaw(Unique("retained-sub"), topic + "/amqp", 1);
  auto publish = NextPublish(*subscriber);
  ASSERT_TRUE(publish);
  EXPECT_EQ(publish->payload, "from amqp");
  EXPECT_TRUE(publish->retain) << "MQTT-3.3.1-9: retained on subscribe";
}

// $share/G/F: an MQTT publisher's messages are shared between MQTT and
// AMQP members of one group, each message to exactly one member.
TEST_F(CrossProtocolTest, SharedGroupOfMqttAndAmqpMembersSharesMqttPublishes) {
  const std::string topic = Unique("x/shared/");
  auto member = SubscribeRaw(Unique("shared-mqtt"), "$share/g/" + topic, 1);
  auto amqp = Connect({.container_id = Unique("shared-amqp")});
  Receive(*amqp, "r", "$share/g/" + topic);
  constexpr int kCount = 20;
  for (int i = 0; i < kCount; ++i) RawPublish(topic, std::to_string(i), 1);
  std::set<std::string> seen;
  size_t from_amqp = 0;
  size_t from_mqtt = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (seen.size() < kCount && std::chrono::steady_clock::now() < deadline) {
    for (auto& event : amqp->TakeMessages("r", kCount, std::chrono::milliseconds(50))) {
      EXPECT_TRUE(seen.insert(Body(event)).second) << "delivered twice: " << Body(event);
      amqp->Settle(event.delivery, AmqpClient::Outcome::kAccept);
      ++from_amqp;
    }
    while (auto publish = member->ReceiveAs<mqtt::PublishPacket>(std::chrono::milliseconds(50))) {
      EXPECT_TRUE(seen.insert(publish->payload).second) << "delivered twice: " << publish->payload;
      Puback(*member, publish->packet_id);
      ++from_mqtt;
    }
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kCount));
  EXPECT_GT(from_amqp, 0u);
  EXPECT_GT(from_mqtt, 0u);
}

}  // namespace
}  // namespace estuary::conformance
