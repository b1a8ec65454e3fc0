// Malformed packets and protocol errors after CONNECT: the server closes
// the offending connection (5.0: after a DISCONNECT with the reason the
// specification gives) and keeps serving everyone else.
#include <gtest/gtest.h>

#include "conformance/mqtt/raw_fixture.h"

namespace estuary::conformance {
namespace {

// PUBLISH bytes with every field chosen by the test. `properties` is the
// encoded property list without its length (5.0 only).
std::string PublishBytes(ProtocolVersion version, uint8_t flags, const std::string& topic,
                         std::optional<uint16_t> packet_id, const std::string& properties = "",
                         const std::string& payload = "x") {
  std::string body = Str(topic);
  if (packet_id) body += Bytes({*packet_id >> 8, *packet_id & 0xFF});
  if (version == ProtocolVersion::kV5) body += VarInt(static_cast<uint32_t>(properties.size())) + properties;
  return Frame(static_cast<uint8_t>(0x30 | flags), body + payload);
}

std::string SubscribeBytes(ProtocolVersion version, uint8_t first_byte, const std::string& filters_and_options,
                           uint16_t packet_id = 1) {
  std::string body = Bytes({packet_id >> 8, packet_id & 0xFF});
  if (version == ProtocolVersion::kV5) body += VarInt(0);
  return Frame(first_byte, body + filters_and_options);
}

constexpr uint8_t kQos1 = 0x02;
constexpr uint8_t kQos3 = 0x06;
constexpr uint8_t kDup = 0x08;

const std::vector<ReasonCode> kMalformed = {ReasonCode::kMalformedPacket};
const std::vector<ReasonCode> kProtocolError = {ReasonCode::kProtocolError};
// Where the specification names no reason, either fits.
const std::vector<ReasonCode> kEither = {ReasonCode::kMalformedPacket, ReasonCode::kProtocolError};

// ---------------------------------------------------------------- 3.1.1 ----

TEST_F(RawV311, MQTT_2_2_2_1_MQTT_2_2_2_2_MQTT_3_6_1_1_PubrelFlagsMustBe0010) {
  ExpectRejected(Bytes({0x60, 0x02, 0x00, 0x01}), {});
}

TEST_F(RawV311, MQTT_2_2_2_2_MQTT_3_8_1_1_SubscribeFlagsMustBe0010) {
  ExpectRejected(SubscribeBytes(version(), 0x80, Str("a/b") + Bytes({1})), {});
}

TEST_F(RawV311, MQTT_2_2_2_2_MQTT_3_10_1_1_UnsubscribeFlagsMustBe0010) {
  ExpectRejected(Frame(0xA0, Bytes({0, 1}) + Str("a/b")), {});
}

TEST_F(RawV311, MQTT_2_2_2_2_PingreqWithFlagsCloses) { ExpectRejected(Bytes({0xC1, 0x00}), {}); }

TEST_F(RawV311, MQTT_4_8_0_1_RemainingLengthOfFiveBytesCloses) {
  ExpectRejected(Bytes({0x30, 0xFF, 0xFF, 0xFF, 0xFF, 0x01}), {});
}

TEST_F(RawV311, MQTT_1_5_3_1_MQTT_3_3_2_1_IllFormedUtf8InTopicCloses) {
  ExpectRejected(PublishBytes(version(), 0, "a/\xff", std::nullopt), {});
}

TEST_F(RawV311, MQTT_1_5_3_1_SurrogateInTopicCloses) {
  ExpectRejected(PublishBytes(version(), 0, "a/\xed\xa0\x80", std::nullopt), {});
}

TEST_F(RawV311, MQTT_1_5_3_2_MQTT_4_7_3_2_NullCharacterInTopicCloses) {
  ExpectRejected(PublishBytes(version(), 0, std::string("a/\0b", 4), std::nullopt), {});
}

TEST_F(RawV311, MQTT_1_5_3_3_MQTT_4_7_3_4_ByteOrderMarkKeptAndNotNormalized) {
  const std::string base = Unique("bom");
  const std::string with_bom = "\xEF\xBB\xBF" + base;
  auto exact = Subscriber(with_bom + "/x");
  auto plain = Subscriber(base + "/x");
  RawPublish(with_bom + "/x", "with BOM", 1);
  RawPublish(base + "/x", "without", 1);
  auto got = ReceivePublish(*exact);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->topic, with_bom + "/x") << "the BOM was stripped";
  EXPECT_EQ(got->payload, "with BOM");
  auto other = ReceivePublish(*plain);
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->payload, "without") << "a BOM topic matched a filter without it";
}

TEST_F(RawV311, MQTT_3_3_1_4_Qos3Closes) {
  ExpectRejected(PublishBytes(version(), kQos3, "a/b", uint16_t{1}), {});
}

TEST_F(RawV311, MQTT_3_3_1_2_DupOnQos0Closes) {
  ExpectRejected(PublishBytes(version(), kDup, "a/b", std::nullopt), {});
}

TEST_F(RawV311, MQTT_2_3_1_1_ZeroPacketIdCloses) {
  ExpectRejected(PublishBytes(version(), kQos1, "a/b", uint16_t{0}), {});
  ExpectRejected(SubscribeBytes(version(), 0x82, Str("a/b") + Bytes({1}), 0), {});
}

TEST_F(RawV311, MQTT_3_3_2_2_MQTT_4_7_1_1_WildcardInTopicNameCloses) {
  ExpectRejected(PublishBytes(version(), 0, "a/+", std::nullopt), {});
  ExpectRejected(PublishBytes(version(), 0, "a/#", std::nullopt), {});
}

TEST_F(RawV311, MQTT_4_7_3_1_EmptyTopicNameCloses) {
  ExpectRejected(PublishBytes(version(), 0, "", std::nullopt), {});
}

TEST_F(RawV311, MQTT_3_8_3_1_TopicFilterMustBeUtf8) {
  ExpectRejected(SubscribeBytes(version(), 0x82, Str("a/\xff") + Bytes({1})), {});
}

TEST_F(RawV311, MQTT_3_8_3_3_SubscribeWithoutFiltersCloses) {
  ExpectRejected(SubscribeBytes(version(), 0x82, ""), {});
}

TEST_F(RawV311, MQTT_3_8_3_4_SubscribeReservedBitsOrQos3Close) {
  ExpectRejected(SubscribeBytes(version(), 0x82, Str("a/b") + Bytes({0x04})), {});
  ExpectRejected(SubscribeBytes(version(), 0x82, Str("a/b") + Bytes({0x03})), {});
}

TEST_F(RawV311, MQTT_3_10_3_1_UnsubscribeFilterMustBeUtf8) {
  ExpectRejected(Frame(0xA2, Bytes({0, 1}) + Str("a/\xc0")), {});
}

TEST_F(RawV311, MQTT_3_10_3_2_UnsubscribeWithoutFiltersCloses) {
  ExpectRejected(Frame(0xA2, Bytes({0, 1})), {});
}

TEST_F(RawV311, MQTT_4_8_0_1_ReservedPacketTypeCloses) { ExpectRejected(Bytes({0x00, 0x00}), {}); }

TEST_F(RawV311, MQTT_4_8_0_1_AuthPacketDoesNotExistIn311) { ExpectRejected(Bytes({0xF0, 0x00}), {}); }

// ------------------------------------------------------------------ 5.0 ----

TEST_F(RawV5, MQTT_2_1_3_1_MQTT_3_6_1_1_PubrelFlagsMustBe0010) {
  ExpectRejected(Bytes({0x60, 0x02, 0x00, 0x01}), kMalformed);
}

TEST_F(RawV5, MQTT_2_1_3_1_MQTT_3_8_1_1_SubscribeFlagsMustBe0010) {
  ExpectRejected(SubscribeBytes(version(), 0x80, Str("a/b") + Bytes({1})), kMalformed);
}

TEST_F(RawV5, MQTT_2_1_3_1_MQTT_3_10_1_1_UnsubscribeFlagsMustBe0010) {
  ExpectRejected(Frame(0xA0, Bytes({0, 1, 0}) + Str("a/b")), kMalformed);
}

TEST_F(RawV5, MQTT_2_1_3_1_PingreqWithFlagsIsMalformed) { ExpectRejected(Bytes({0xC4, 0x00}), kMalformed); }

TEST_F(RawV5, MQTT_1_5_5_1_RemainingLengthNotMinimalIsMalformed) {
  ExpectRejected(Bytes({0xC0, 0x80, 0x00}), kMalformed);  // 0 written in two bytes
}

TEST_F(RawV5, MQTT_4_13_1_1_RemainingLengthOfFiveBytesIsMalformed) {
  ExpectRejected(Bytes({0x30, 0xFF, 0xFF, 0xFF, 0xFF, 0x01}), kMalformed);
}

TEST_F(RawV5, MQTT_1_5_4_1_MQTT_3_3_2_1_IllFormedUtf8IsMalformed) {
  ExpectRejected(PublishBytes(version(), 0, "a/\xff", std::nullopt), kMalformed);
  ExpectRejected(PublishBytes(version(), 0, "a/\xed\xbf\xbf", std::nullopt), kMalformed);  // a surrogate
}

TEST_F(RawV5, MQTT_1_5_4_2_MQTT_4_7_3_2_NullCharacterIsMalformed) {
  ExpectRejected(PublishBytes(version(), 0, std::string("a/\0b", 4), std::nullopt), kMalformed);
}

TEST_F(RawV5, MQTT_1_5_4_3_ByteOrderMarkKept) {
  const std::string topic = "\xEF\xBB\xBF" + Unique("bom/");
  auto exact = Subscriber(topic);
  RawPublish(topic, "with BOM", 1);
  auto got = ReceivePublish(*exact);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->topic, topic) << "the BOM was stripped";
}

TEST_F(RawV5, MQTT_1_5_7_1_UserPropertyStringsMustBeUtf8) {
  const std::string property = Bytes({0x26}) + Str("key\xff") + Str("value");
  ExpectRejected(PublishBytes(version(), 0, "a/b", std::nullopt, property), kMalformed);
}

TEST_F(RawV5, MQTT_3_3_1_4_Qos3IsMalformed) {
  ExpectRejected(PublishBytes(version(), kQos3, "a/b", uint16_t{1}), kMalformed);
}

TEST_F(RawV5, MQTT_3_3_1_2_DupOnQos0IsRejected) {
  ExpectRejected(PublishBytes(version(), kDup, "a/b", std::nullopt), kEither);
}

TEST_F(RawV5, MQTT_2_2_1_3_ZeroPacketIdIsRejected) {
  ExpectRejected(PublishBytes(version(), kQos1, "a/b", uint16_t{0}), kEither);
  ExpectRejected(SubscribeBytes(version(), 0x82, Str("a/b") + Bytes({1}), 0), kEither);
}

TEST_F(RawV5, MQTT_3_3_2_2_MQTT_4_7_0_1_WildcardInTopicNameIsTopicNameInvalid) {
  ExpectRejected(PublishBytes(version(), 0, "a/+", std::nullopt), {ReasonCode::kTopicNameInvalid});
  ExpectRejected(PublishBytes(version(), 0, "#", std::nullopt), {ReasonCode::kTopicNameInvalid});
}

TEST_F(RawV5, MQTT_4_7_3_1_EmptyTopicWithoutAliasIsAProtocolError) {
  ExpectRejected(PublishBytes(version(), 0, "", std::nullopt), kProtocolError);
}

TEST_F(RawV5, MQTT_3_3_2_13_ResponseTopicMustBeUtf8) {
  ExpectRejected(PublishBytes(version(), 0, "a/b", std::nullopt, Bytes({0x08}) + Str("r/\xff")), kMalformed);
}

TEST_F(RawV5, MQTT_3_3_2_14_ResponseTopicWithWildcardsIsRefused) {
  // The server would otherwise send subscribers a Response Topic with wildcards.
  ExpectRejected(PublishBytes(version(), 0, "a/b", std::nullopt, Bytes({0x08}) + Str("replies/#")),
                 {ReasonCode::kProtocolError, ReasonCode::kMalformedPacket, ReasonCode::kTopicNameInvalid});
}

TEST_F(RawV5, MQTT_3_3_2_19_ContentTypeMustBeUtf8) {
  ExpectRejected(PublishBytes(version(), 0, "a/b", std::nullopt, Bytes({0x03}) + Str("text/\xfe")), kMalformed);
}

TEST_F(RawV5, MQTT_3_3_4_6_SubscriptionIdentifierFromAClientIsAProtocolError) {
  ExpectRejected(PublishBytes(version(), 0, "a/b", std::nullopt, Bytes({0x0B, 0x05})), kProtocolError);
}

TEST_F(RawV5, MQTT_3_3_2_8_TopicAliasZeroIsInvalid) {
  ExpectRejected(PublishBytes(version(), 0, "a/b", std::nullopt, Bytes({0x23, 0x00, 0x00})),
                 {ReasonCode::kTopicAliasInvalid});
}

TEST_F(RawV5, MQTT_4_13_1_1_UnknownPropertyIsMalformed) {
  ExpectRejected(PublishBytes(version(), 0, "a/b", std::nullopt, Bytes({0x7F, 0x00})), kMalformed);
}

TEST_F(RawV5, MQTT_4_13_1_1_DuplicatePropertyIsAProtocolError) {
  const std::string content_type = Bytes({0x03}) + Str("text/plain");
  ExpectRejected(PublishBytes(version(), 0, "a/b", std::nullopt, content_type + content_type), kProtocolError);
}

TEST_F(RawV5, MQTT_4_13_1_1_PropertyNotValidForThePacketIsMalformed) {
  // Session Expiry Interval in a PUBLISH: "an Identifier which is not valid
  // for its packet type" makes a Malformed Packet (section 2.2.2.2).
  ExpectRejected(PublishBytes(version(), 0, "a/b", std::nullopt, Bytes({0x11, 0, 0, 0, 10})), kMalformed);
}

TEST_F(RawV5, MQTT_3_8_3_1_TopicFilterMustBeUtf8) {
  ExpectRejected(SubscribeBytes(version(), 0x82, Str("a/\xff") + Bytes({1})), kMalformed);
}

TEST_F(RawV5, MQTT_3_8_3_2_SubscribeWithoutFiltersIsAProtocolError) {
  ExpectRejected(SubscribeBytes(version(), 0x82, ""), kProtocolError);
}

TEST_F(RawV5, MQTT_3_8_3_5_SubscriptionOptionReservedBitsAreMalformed) {
  ExpectRejected(SubscribeBytes(version(), 0x82, Str("a/b") + Bytes({0x41})), kMalformed);
}

TEST_F(RawV5, MQTT_4_13_1_1_RetainHandling3IsAProtocolError) {
  ExpectRejected(SubscribeBytes(version(), 0x82, Str("a/b") + Bytes({0x31})), kProtocolError);
}

TEST_F(RawV5, MQTT_3_8_3_4_NoLocalOnASharedSubscriptionIsAProtocolError) {
  ExpectRejected(SubscribeBytes(version(), 0x82, Str("$share/g/a/b") + Bytes({0x05})), kProtocolError);
}

TEST_F(RawV5, MQTT_3_10_3_1_UnsubscribeFilterMustBeUtf8) {
  ExpectRejected(Frame(0xA2, Bytes({0, 1, 0}) + Str("a/\xc0")), kMalformed);
}

TEST_F(RawV5, MQTT_3_10_3_2_UnsubscribeWithoutFiltersIsAProtocolError) {
  ExpectRejected(Frame(0xA2, Bytes({0, 1, 0})), kProtocolError);
}

TEST_F(RawV5, MQTT_4_13_1_1_ReservedPacketTypeIsMalformed) { ExpectRejected(Bytes({0x00, 0x00}), kMalformed); }

TEST_F(RawV5, MQTT_4_13_1_1_ServerOnlyPacketFromAClientIsAProtocolError) {
  ExpectRejected(Bytes({0xD0, 0x00}), kEither);  // PINGRESP
}

}  // namespace
}  // namespace estuary::conformance
