// One test (or more) per row of docs/mapping.md, both directions.
#include "frontends/amqp/mapping/mapping.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>

#include <proton/annotation_key.hpp>
#include <proton/binary.hpp>
#include <proton/message_id.hpp>
#include <proton/codec/map.hpp>
#include <proton/codec/vector.hpp>
#include <proton/error.hpp>
#include <proton/symbol.hpp>
#include <proton/uuid.hpp>

#include "frontends/amqp/mapping/round_trip_check.h"
#include "frontends/amqp/mapping/test_util.h"

namespace estuary::amqp {
namespace {

using testing::Annotation;
using testing::Context;
using testing::kNow;
using testing::MqttMessage;
using testing::ToAmqp;
using testing::ToModelOk;

std::string Bytes(const proton::binary& binary) { return std::string(binary.begin(), binary.end()); }

proton::message DataMessage(std::string payload) {
  proton::message message;
  message.body(proton::binary(payload));
  message.inferred(true);
  return message;
}

// --- addresses and topics ---

TEST(AddressTest, TargetAddressIsTheTopicUnchangedDotsStayDots) {
  Message model = ToModelOk(DataMessage("x"), "sensors.room1/temp");
  EXPECT_EQ(model.topic, "sensors.room1/temp");
  EXPECT_EQ(ToAmqp(model).to(), "sensors.room1/temp");
}

TEST(AddressTest, ConnectionUrlPrefixIsDroppedOtherAddressesAreLiteral) {
  EXPECT_EQ(TopicOfAddress("amqps://broker.example:5671/sensors/room1"), "sensors/room1");
  EXPECT_EQ(TopicOfAddress("amqp://localhost/a/+/c"), "a/+/c");
  EXPECT_EQ(TopicOfAddress("amqps://localhost"), "");
  EXPECT_EQ(TopicOfAddress("amqp://h//lead"), "/lead");
  EXPECT_EQ(TopicOfAddress("sensors/amqp://x/y"), "sensors/amqp://x/y");
  EXPECT_EQ(TopicOfAddress("a.b"), "a.b");
  EXPECT_EQ(TopicOfAddress("AMQP://h/x"), "AMQP://h/x");  // the schemes are matched as sent by clients
}

TEST(AddressTest, MqttTopicBecomesToWithSlashesKept) {
  EXPECT_EQ(ToAmqp(MqttMessage("sensors/room1/temp", "21")).to(), "sensors/room1/temp");
}

TEST(AddressTest, InvalidTopicIsRejectedWithInvalidField) {
  for (std::string_view topic : {std::string_view(""), std::string_view("a/+/b"), std::string_view("a/#"),
                                 std::string_view("a\0b", 3)}) {
    auto model = ToModel(DataMessage("x"), Context(topic));
    ASSERT_FALSE(model.has_value()) << topic;
    EXPECT_EQ(model.error().condition, "amqp:invalid-field");
  }
}

TEST(AddressTest, AToDifferentFromTheTopicComesBackUnchanged) {
  proton::message in = DataMessage("x");
  in.to("queue://elsewhere");
  EXPECT_EQ(ToAmqp(ToModelOk(in, "a/b")).to(), "queue://elsewhere");
}

// --- QoS, origin ---

TEST(QosTest, PresettledIsAtMostOnceUnsettledAtLeastOnce) {
  EXPECT_EQ(ToModel(DataMessage("x"), Context("t", true))->qos, QoS::kAtMostOnce);
  EXPECT_EQ(ToModel(DataMessage("x"), Context("t", false))->qos, QoS::kAtLeastOnce);
}

TEST(OriginTest, AmqpOriginIsTheContainerAndNode) {
  Message model = ToModelOk(DataMessage("x"), "t");
  EXPECT_EQ(model.origin.protocol, Protocol::kAmqp);
  EXPECT_EQ(model.origin.client_id, "amqp-container");
  EXPECT_EQ(model.origin.node, 7);
}

TEST(OriginTest, OriginAnnotationsNameTheMqttPublisher) {
  proton::message out = ToAmqp(MqttMessage("t", "x"));
  EXPECT_EQ(proton::get<std::string>(Annotation(out, kOriginClientIdAnnotation)), "mqtt-client");
  EXPECT_EQ(proton::get<proton::symbol>(Annotation(out, kOriginProtocolAnnotation)), "mqtt");
}

TEST(OriginTest, SenderCannotSetOriginOrSubscriptionIds) {
  proton::message in = DataMessage("x");
  in.message_annotations().put(proton::symbol("x-opt-origin-client-id"), std::string("spoof"));
  in.message_annotations().put(proton::symbol("x-opt-origin-protocol"), proton::symbol("mqtt"));
  in.message_annotations().put(proton::symbol("x-opt-subscription-ids"),
                               std::vector<proton::value>{proton::value(uint32_t{9})});
  Message model = ToModelOk(in, "t");
  EXPECT_FALSE(model.amqp_extras);
  proton::message out = ToAmqp(model);
  EXPECT_EQ(proton::get<std::string>(Annotation(out, kOriginClientIdAnnotation)), "amqp-container");
  EXPECT_EQ(proton::get<proton::symbol>(Annotation(out, kOriginProtocolAnnotation)), "amqp");
  EXPECT_TRUE(Annotation(out, kSubscriptionIdsAnnotation).empty());
}

// --- properties ---

TEST(PropertiesTest, ContentTypeBothWays) {
  Message mqtt = MqttMessage("t", "{}");
  mqtt.properties.content_type = "application/json";
  proton::message out = ToAmqp(mqtt);
  EXPECT_EQ(out.content_type(), "application/json");
  EXPECT_EQ(ToModelOk(out, "t").properties.content_type, "application/json");
  EXPECT_FALSE(ToModelOk(DataMessage("x"), "t").properties.content_type.has_value());
}

TEST(PropertiesTest, EmptyContentTypeTravelsInAnAnnotation) {
  Message mqtt = MqttMessage("t", "x");
  mqtt.properties.content_type = "";
  proton::message out = ToAmqp(mqtt);
  EXPECT_TRUE(proton::get<bool>(Annotation(out, kEmptyContentTypeAnnotation)));
  EXPECT_EQ(ToModelOk(out, "t").properties.content_type, std::optional<std::string>(""));
}

TEST(PropertiesTest, ResponseTopicIsReplyTo) {
  Message mqtt = MqttMessage("req", "x");
  mqtt.properties.response_topic = "reply.to/me";
  proton::message out = ToAmqp(mqtt);
  EXPECT_EQ(out.reply_to(), "reply.to/me");
  EXPECT_EQ(ToModelOk(out, "req").properties.response_topic, "reply.to/me");
}

TEST(PropertiesTest, CorrelationDataIsABinaryCorrelationId) {
  Message mqtt = MqttMessage("t", "x");
  mqtt.properties.correlation_data = std::string("\x00\xff\x01", 3);
  proton::message out = ToAmqp(mqtt);
  ASSERT_EQ(out.correlation_id().type(), proton::BINARY);
  EXPECT_EQ(Bytes(proton::get<proton::binary>(out.correlation_id())), std::string("\x00\xff\x01", 3));
  EXPECT_EQ(ToModelOk(out, "t").properties.correlation_data, std::string("\x00\xff\x01", 3));
}

TEST(PropertiesTest, EmptyCorrelationDataStaysPresent) {
  Message mqtt = MqttMessage("t", "x");
  mqtt.properties.correlation_data = "";
  EXPECT_EQ(ToModelOk(ToAmqp(mqtt), "t").properties.correlation_data, std::optional<std::string>(""));
}

TEST(PropertiesTest, TypedCorrelationIdsShowAsBytesAndComeBackTyped) {
  const proton::uuid uuid = proton::uuid::copy("0123456789abcdef");
  struct Case {
    proton::message_id id;
    std::string bytes;
  } cases[] = {{proton::message_id(std::string("req-1")), "req-1"},
               {proton::message_id(uint64_t{42}), "42"},
               {proton::message_id(uuid), uuid.str()}};
  for (const Case& c : cases) {
    proton::message in = DataMessage("x");
    in.correlation_id(c.id);
    Message model = ToModelOk(in, "t");
    EXPECT_EQ(model.properties.correlation_data, c.bytes);
    proton::message out = ToAmqp(model);
    EXPECT_EQ(out.correlation_id(), c.id) << c.bytes;
  }
}

// --- expiry ---

TEST(ExpiryTest, TtlBecomesAnAbsoluteExpiryAndComesBackAsWhatRemains) {
  proton::message in = DataMessage("x");
  in.ttl(proton::duration(5000));
  Message model = ToModelOk(in, "t");
  EXPECT_EQ(model.properties.expiry_at_ms, kNow + 5000);
  EXPECT_EQ(ToAmqp(model, false, {}, kNow + 1500).ttl().milliseconds(), 3500);
  EXPECT_EQ(ToAmqp(model, false, {}, kNow + 1500).expiry_time().milliseconds(), 0);
}

TEST(ExpiryTest, MqttExpiryBecomesTtl) {
  Message mqtt = MqttMessage("t", "x");
  mqtt.properties.expiry_at_ms = kNow + 60'000;
  proton::message out = ToAmqp(mqtt);
  EXPECT_EQ(out.ttl().milliseconds(), 60'000);
  EXPECT_EQ(ToModelOk(out, "t").properties.expiry_at_ms, kNow + 60'000);
}

TEST(ExpiryTest, AbsoluteExpiryTimeIsKeptAsGiven) {
  proton::message in = DataMessage("x");
  in.expiry_time(proton::timestamp(kNow + 9000));
  Message model = ToModelOk(in, "t");
  EXPECT_EQ(model.properties.expiry_at_ms, kNow + 9000);
  proton::message out = ToAmqp(model, false, {}, kNow + 1000);
  EXPECT_EQ(out.expiry_time().milliseconds(), kNow + 9000);
  EXPECT_EQ(out.ttl().milliseconds(), 0);
}

TEST(ExpiryTest, TheEarlierOfTtlAndAbsoluteExpiryWins) {
  proton::message in = DataMessage("x");
  in.ttl(proton::duration(1000));
  in.expiry_time(proton::timestamp(kNow + 9000));
  EXPECT_EQ(ToModelOk(in, "t").properties.expiry_at_ms, kNow + 1000);
  in.ttl(proton::duration(20'000));
  EXPECT_EQ(ToModelOk(in, "t").properties.expiry_at_ms, kNow + 9000);
}

TEST(ExpiryTest, ExpiryBeyondWhatTtlCanSayUsesAbsoluteExpiryTime) {
  Message mqtt = MqttMessage("t", "x");
  mqtt.properties.expiry_at_ms = kNow + int64_t{std::numeric_limits<uint32_t>::max()} * 1000;
  proton::message out = ToAmqp(mqtt);
  EXPECT_EQ(out.ttl().milliseconds(), 0);
  EXPECT_EQ(out.expiry_time().milliseconds(), *mqtt.properties.expiry_at_ms);
  EXPECT_EQ(ToModelOk(out, "t").properties.expiry_at_ms, mqtt.properties.expiry_at_ms);
}

// --- header ---

TEST(HeaderTest, DurableBothWays) {
  Message mqtt = MqttMessage("t", "x");
  mqtt.durable = true;
  EXPECT_TRUE(ToAmqp(mqtt).durable());
  EXPECT_TRUE(ToModelOk(ToAmqp(mqtt), "t").durable);
  EXPECT_FALSE(ToAmqp(MqttMessage("t", "x")).durable());
}

TEST(HeaderTest, PriorityFirstAcquirerAndDeliveryCountSurviveAmqpToAmqp) {
  proton::message in = DataMessage("x");
  in.priority(9);
  in.first_acquirer(true);
  in.delivery_count(3);
  proton::message out = ToAmqp(ToModelOk(in, "t"));
  EXPECT_EQ(out.priority(), 9);
  EXPECT_TRUE(out.first_acquirer());
  EXPECT_EQ(out.delivery_count(), 3u);
}

// --- payload ---

TEST(PayloadTest, MqttBytesAreOneDataSection) {
  proton::message out = ToAmqp(MqttMessage("t", std::string("\x00\x01\xfe", 3)));
  ASSERT_EQ(out.body().type(), proton::BINARY);
  EXPECT_TRUE(out.inferred());
  EXPECT_EQ(Bytes(proton::get<proton::binary>(out.body())), std::string("\x00\x01\xfe", 3));
  EXPECT_TRUE(Annotation(out, kPayloadFormatAnnotation).empty());
  Message back = ToModelOk(out, "t");
  EXPECT_EQ(*back.payload, std::string("\x00\x01\xfe", 3));
  EXPECT_FALSE(back.properties.payload_format.has_value());
}

TEST(PayloadTest, AmqpValueStringArrivesAsUtf8WithPayloadFormatOne) {
  proton::message in;
  in.body(std::string("héllo"));
  Message model = ToModelOk(in, "t");
  EXPECT_EQ(*model.payload, "héllo");
  EXPECT_EQ(model.properties.payload_format, 1);
  EXPECT_TRUE(model.properties.user_properties.empty());
}

TEST(PayloadTest, MqttUtf8PayloadGoesAsAmqpValueString) {
  Message mqtt = MqttMessage("t", "text");
  mqtt.properties.payload_format = 1;
  proton::message out = ToAmqp(mqtt);
  ASSERT_EQ(out.body().type(), proton::STRING);
  EXPECT_EQ(proton::get<std::string>(out.body()), "text");
  EXPECT_EQ(ToModelOk(out, "t").properties.payload_format, 1);
}

TEST(PayloadTest, PayloadFormatZeroIsAnnotated) {
  Message mqtt = MqttMessage("t", "bytes");
  mqtt.properties.payload_format = 0;
  proton::message out = ToAmqp(mqtt);
  EXPECT_EQ(out.body().type(), proton::BINARY);
  EXPECT_EQ(proton::get<uint8_t>(Annotation(out, kPayloadFormatAnnotation)), 0);
  EXPECT_EQ(ToModelOk(out, "t").properties.payload_format, 0);
}

TEST(PayloadTest, FormatOneWithInvalidUtf8StaysDataAndAnnotated) {
  Message mqtt = MqttMessage("t", "\xff\xfe");
  mqtt.properties.payload_format = 1;
  proton::message out = ToAmqp(mqtt);
  EXPECT_EQ(out.body().type(), proton::BINARY);
  EXPECT_EQ(proton::get<uint8_t>(Annotation(out, kPayloadFormatAnnotation)), 1);
  EXPECT_EQ(ToModelOk(out, "t").properties.payload_format, 1);
}

TEST(PayloadTest, DataSectionAnnotatedAsUtf8StaysData) {
  proton::message in = DataMessage("text");
  in.message_annotations().put(proton::symbol("x-opt-mqtt-payload-format"), uint8_t{1});
  Message model = ToModelOk(in, "t");
  EXPECT_EQ(model.properties.payload_format, 1);
  EXPECT_EQ(ToAmqp(model).body().type(), proton::BINARY);
  EXPECT_EQ(check::AmqpRoundTrip(in, Context("t")), "");
}

TEST(PayloadTest, AmqpValueBinaryIsPlainBytesAndComesBackAsAmqpValue) {
  proton::message in;
  in.body(proton::binary("raw"));  // inferred false: amqp-value, not data
  Message model = ToModelOk(in, "t");
  EXPECT_EQ(*model.payload, "raw");
  EXPECT_TRUE(model.properties.user_properties.empty());
  proton::message out = ToAmqp(model);
  EXPECT_EQ(out.body().type(), proton::BINARY);
  EXPECT_FALSE(out.inferred()) << "amqp-value again";
  EXPECT_TRUE(Annotation(out, kAmqpValueBinaryAnnotation).empty()) << "internal, never sent";
  EXPECT_EQ(check::AmqpRoundTrip(in, Context("t")), "");
  // An MQTT message's bytes are always one data section.
  EXPECT_TRUE(ToAmqp(MqttMessage("t", "raw")).inferred());
}

TEST(PayloadTest, OtherBodiesTravelEncodedAndMarked) {
  proton::message value_int;
  value_int.body(int32_t{42});
  proton::message sequence;
  sequence.body(std::vector<proton::value>{proton::value(1), proton::value("two")});
  sequence.inferred(true);
  proton::message value_map;
  value_map.body(std::map<std::string, int>{{"k", 1}});
  proton::message no_body;
  struct Case {
    const proton::message* message;
    std::string kind;
  } cases[] = {{&value_int, "amqp-value"}, {&sequence, "amqp-sequence"},
               {&value_map, "amqp-value"}, {&no_body, "none"}};
  for (const Case& c : cases) {
    Message model = ToModelOk(*c.message, "t");
    ASSERT_FALSE(model.properties.user_properties.empty()) << c.kind;
    EXPECT_EQ(model.properties.user_properties.back(),
              (UserProperty{std::string(kAmqpBodyUserProperty), c.kind}));
    EXPECT_FALSE(model.properties.payload_format.has_value());
    proton::message out = ToAmqp(model);
    EXPECT_EQ(out.body(), c.message->body()) << c.kind;
    EXPECT_TRUE(out.properties().empty()) << "marker must not reach application-properties";
  }
  // amqp-value (descriptor 0x77) holding smallint 42.
  EXPECT_EQ(*ToModelOk(value_int, "t").payload, std::string("\x00\x53\x77\x54\x2a", 5));
}

TEST(PayloadTest, MqttPublisherCanSendAnEncodedBodyBack) {
  // An MQTT client that got an encoded amqp-value and republishes it.
  Message mqtt = MqttMessage("t", std::string("\x00\x53\x77\x54\x2a", 5));
  mqtt.properties.user_properties = {{"x-amqp-body", "amqp-value"}};
  proton::message out = ToAmqp(mqtt);
  ASSERT_EQ(out.body().type(), proton::INT);
  EXPECT_EQ(proton::get<int32_t>(out.body()), 42);
  EXPECT_EQ(check::ModelRoundTrip(mqtt, kNow), "");
}

TEST(PayloadTest, NonCanonicalEncodingIsNotRestored) {
  // int 42 as a full four-byte int: Proton would write smallint, so the
  // bytes would not come back; the payload stays opaque.
  Message mqtt = MqttMessage("t", std::string("\x00\x53\x77\x71\x00\x00\x00\x2a", 8));
  mqtt.properties.user_properties = {{"x-amqp-body", "amqp-value"}};
  EXPECT_EQ(ToAmqp(mqtt).body().type(), proton::BINARY);
  EXPECT_EQ(check::ModelRoundTrip(mqtt, kNow), "");
}

TEST(PayloadTest, MarkerThatDoesNotMatchThePayloadIsAnOrdinaryUserProperty) {
  Message mqtt = MqttMessage("t", "not an encoding");
  mqtt.properties.user_properties = {{"x-amqp-body", "amqp-value"}};
  proton::message out = ToAmqp(mqtt);
  EXPECT_EQ(out.body().type(), proton::BINARY);
  EXPECT_EQ(proton::get<std::string>(out.properties().get("x-amqp-body")), "amqp-value");
  EXPECT_EQ(check::ModelRoundTrip(mqtt, kNow), "");
}

TEST(PayloadTest, StringBodyWithAPayloadFormatAnnotationComesBackAsAString) {
  proton::message in;
  in.body(std::string("text"));
  in.message_annotations().put(proton::symbol("x-opt-mqtt-payload-format"), uint8_t{0});
  Message model = ToModelOk(in, "t");
  EXPECT_EQ(model.properties.payload_format, 0);
  EXPECT_EQ(check::AmqpRoundTrip(in, Context("t")), "");
}

// --- user properties and application-properties ---

TEST(UserPropertiesTest, SortedUniqueKeysAreApplicationPropertiesOnly) {
  Message mqtt = MqttMessage("t", "x");
  mqtt.properties.user_properties = {{"a", "1"}, {"b", "2"}};
  proton::message out = ToAmqp(mqtt);
  EXPECT_EQ(proton::get<std::string>(out.properties().get("a")), "1");
  EXPECT_EQ(proton::get<std::string>(out.properties().get("b")), "2");
  EXPECT_TRUE(Annotation(out, kUserPropertiesAnnotation).empty());
  EXPECT_EQ(ToModelOk(out, "t").properties.user_properties, mqtt.properties.user_properties);
}

TEST(UserPropertiesTest, OrderAndDuplicatesTravelInTheAnnotation) {
  Message mqtt = MqttMessage("t", "x");
  mqtt.properties.user_properties = {{"z", "1"}, {"a", "2"}, {"z", "3"}};
  proton::message out = ToAmqp(mqtt);
  EXPECT_EQ(out.properties().size(), 2u);
  EXPECT_EQ(proton::get<std::string>(out.properties().get("z")), "1");  // the first of a key
  std::vector<std::string> listed;
  proton::get(Annotation(out, kUserPropertiesAnnotation), listed);
  EXPECT_EQ(listed, (std::vector<std::string>{"z", "1", "a", "2", "z", "3"}));
  EXPECT_EQ(ToModelOk(out, "t").properties.user_properties, mqtt.properties.user_properties);
}

TEST(UserPropertiesTest, NonStringApplicationPropertiesSurviveAndMqttSeesTheStrings) {
  proton::message in = DataMessage("x");
  in.properties().put("count", int64_t{5});
  in.properties().put("name", std::string("n"));
  Message model = ToModelOk(in, "t");
  EXPECT_EQ(model.properties.user_properties, (std::vector<UserProperty>{{"name", "n"}}));
  ASSERT_TRUE(model.amqp_extras);
  proton::message out = ToAmqp(model);
  EXPECT_EQ(proton::get<int64_t>(out.properties().get("count")), 5);
  EXPECT_EQ(proton::get<std::string>(out.properties().get("name")), "n");
}

TEST(UserPropertiesTest, AnnotationThatDisagreesWithTheMapIsKeptAsIs) {
  proton::message in = DataMessage("x");
  in.properties().put("k", std::string("v"));
  in.message_annotations().put(proton::symbol("x-opt-mqtt-user-properties"),
                               std::vector<proton::value>{proton::value("other"), proton::value("w")});
  EXPECT_EQ(ToModelOk(in, "t").properties.user_properties, (std::vector<UserProperty>{{"k", "v"}}));
  EXPECT_EQ(check::AmqpRoundTrip(in, Context("t")), "");
}

TEST(MalformedTest, DescribedValueWithoutAValueIsADecodeError) {
  // A message-annotations map whose one value is a described type cut off
  // after its descriptor: Proton decodes it, but writing it back would
  // swallow the next entry.
  const char bytes[] = "\x00\x53\x72\xc1\x08\x02\xa3\x01k\x00\xa3\x01d";
  proton::message in;
  try {
    in.decode(std::vector<char>(bytes, bytes + sizeof(bytes) - 1));
  } catch (const proton::error&) {
    GTEST_SKIP() << "Proton refuses this encoding itself";
  }
  auto model = ToModel(in, Context("t"));
  ASSERT_FALSE(model.has_value());
  EXPECT_EQ(model.error().condition, "amqp:decode-error");
}

TEST(MqttRulesTest, WhatMqttCannotCarryStaysForAmqpOnly) {
  proton::message in = DataMessage("x");
  in.reply_to("replies/+");                                   // not a topic name
  in.properties().put(std::string("k\0ey", 4), std::string("v"));  // U+0000
  in.properties().put("bad", std::string("\xff"));          // ill-formed UTF-8
  in.properties().put("good", std::string("ok"));
  Message model = ToModelOk(in, "t");
  EXPECT_FALSE(model.properties.response_topic.has_value());
  EXPECT_EQ(model.properties.user_properties, (std::vector<UserProperty>{{"good", "ok"}}));
  proton::message out = ToAmqp(model);
  EXPECT_EQ(out.reply_to(), "replies/+");
  EXPECT_EQ(out.properties().size(), 3u);
  EXPECT_EQ(check::AmqpRoundTrip(in, Context("t")), "");
}

// --- broker annotations ---

TEST(AnnotationsTest, RetainFlagBothWays) {
  proton::message in = DataMessage("x");
  in.message_annotations().put(proton::symbol("x-opt-retain"), true);
  EXPECT_TRUE(ToModelOk(in, "t").retain);
  EXPECT_TRUE(proton::get<bool>(Annotation(ToAmqp(MqttMessage("t", "x"), true), kRetainAnnotation)));
  EXPECT_TRUE(Annotation(ToAmqp(MqttMessage("t", "x"), false), kRetainAnnotation).empty());
}

TEST(AnnotationsTest, SubscriptionIdsAreAListOfUint) {
  proton::message out = ToAmqp(MqttMessage("t", "x"), false, {3, 70000});
  std::vector<proton::value> ids;
  proton::get(Annotation(out, kSubscriptionIdsAnnotation), ids);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(proton::get<uint32_t>(ids[0]), 3u);
  EXPECT_EQ(proton::get<uint32_t>(ids[1]), 70000u);
}

// --- AMQP-only parts ---

TEST(AmqpOnlyTest, EveryAmqpOnlyPartSurvivesAmqpToAmqp) {
  proton::message in = DataMessage("payload");
  in.id(proton::message_id(uint64_t{77}));
  in.subject("subject");
  in.user("user-id");
  in.group_id("group");
  in.group_sequence(4);
  in.reply_to_group_id("reply-group");
  in.creation_time(proton::timestamp(kNow - 10));
  in.content_encoding("gzip");
  in.message_annotations().put(proton::symbol("x-foreign"), std::string("kept"));
  in.message_annotations().put(uint64_t{12}, int32_t{-1});
  in.delivery_annotations().put(proton::symbol("x-delivery"), 3.5);
  Message model = ToModelOk(in, "t");
  ASSERT_TRUE(model.amqp_extras);
  EXPECT_TRUE(model.properties.user_properties.empty()) << "MQTT sees none of them";
  proton::message out = ToAmqp(model);
  EXPECT_EQ(out.id(), in.id());
  EXPECT_EQ(out.subject(), "subject");
  EXPECT_EQ(out.user(), "user-id");
  EXPECT_EQ(out.group_id(), "group");
  EXPECT_EQ(out.group_sequence(), 4);
  EXPECT_EQ(out.reply_to_group_id(), "reply-group");
  EXPECT_EQ(out.creation_time(), in.creation_time());
  EXPECT_EQ(out.content_encoding(), "gzip");
  EXPECT_EQ(Annotation(out, "x-foreign"), proton::value(std::string("kept")));
  EXPECT_EQ(out.message_annotations().get(uint64_t{12}), proton::value(int32_t{-1}));
  EXPECT_EQ(out.delivery_annotations().get(proton::symbol("x-delivery")), proton::value(3.5));
  EXPECT_EQ(check::AmqpRoundTrip(in, Context("t")), "");
}

TEST(AmqpOnlyTest, MqttMessagesCarryNoExtras) {
  Message mqtt = MqttMessage("t", "x");
  mqtt.properties.user_properties = {{"b", "1"}, {"a", "2"}};
  mqtt.properties.content_type = "c";
  EXPECT_FALSE(ToModelOk(ToAmqp(mqtt), "t").amqp_extras);
}

TEST(AmqpOnlyTest, ExtrasAreChargedToTheMessageSize) {
  Message message = MqttMessage("t", "x");
  const size_t without = message.ApproximateBytes();
  message.amqp_extras = MakePayload(std::string(1000, 'e'));
  EXPECT_GE(message.ApproximateBytes(), without + 1000);
}

TEST(FromModelTest, ReusedMessageIsClearedFirst) {
  proton::message in = DataMessage("x");
  in.subject("s");
  Message with_extras = ToModelOk(in, "t");
  core::Delivery first{std::make_shared<const Message>(with_extras), QoS::kAtLeastOnce, false, {}};
  core::Delivery second{std::make_shared<const Message>(MqttMessage("u", "y")), QoS::kAtLeastOnce,
                        false, {}};
  proton::message out;
  FromModel(first, kNow, out);
  FromModel(second, kNow, out);
  EXPECT_EQ(out.subject(), "");
  EXPECT_EQ(out.to(), "u");
}

}  // namespace
}  // namespace estuary::amqp
