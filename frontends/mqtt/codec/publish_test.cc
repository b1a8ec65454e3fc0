// PUBLISH (§3.3): flags, packet identifier, topic, and the fan-out encoder.
#include <gtest/gtest.h>

#include "frontends/mqtt/codec/test_util.h"

namespace estuary::mqtt {
namespace {

using testing::Bytes;
using testing::DecodeReason;
using testing::Encode;
using testing::Frame;
using testing::Str;

constexpr auto kV311 = ProtocolVersion::kV311;
constexpr auto kV5 = ProtocolVersion::kV5;

// [MQTT-3.3.1-4]: a QoS of 3 is malformed.
TEST(PublishTest, Qos3IsMalformed) {
  for (const ProtocolVersion version : testing::kAllVersions) {
    EXPECT_EQ(DecodeReason(Frame(0x36, Str("t") + Bytes({0, 1})), version),
              ReasonCode::kMalformedPacket);
  }
}

// [MQTT-3.3.1-2]: DUP must be 0 for QoS 0.
TEST(PublishTest, DupWithQos0IsMalformed) {
  EXPECT_EQ(DecodeReason(Frame(0x38, Str("t")), kV311), ReasonCode::kMalformedPacket);
  EXPECT_EQ(DecodeReason(Frame(0x38, Str("t") + Bytes({0})), kV5), ReasonCode::kMalformedPacket);
  EXPECT_EQ(DecodeReason(Frame(0x3A, Str("t") + Bytes({0, 1})), kV311), ReasonCode::kSuccess);
}

TEST(PublishTest, FlagsAreDecoded) {
  auto decoded = DecodePacket(Frame(0x3D, Str("a/b") + Bytes({0x12, 0x34}) + "pay"), kV311);
  ASSERT_TRUE(decoded.has_value());
  const auto& publish = std::get<PublishPacket>(*decoded);
  EXPECT_TRUE(publish.dup);
  EXPECT_EQ(publish.qos, 2);
  EXPECT_TRUE(publish.retain);
  EXPECT_EQ(publish.topic, "a/b");
  EXPECT_EQ(publish.packet_id, 0x1234);
  EXPECT_EQ(publish.payload, "pay");
}

// [MQTT-2.2.1-3]: QoS 1 and 2 need a non-zero packet identifier.
TEST(PublishTest, PacketIdZeroIsAProtocolError) {
  EXPECT_EQ(DecodeReason(Frame(0x32, Str("t") + Bytes({0, 0})), kV311), ReasonCode::kProtocolError);
  EXPECT_EQ(DecodeReason(Frame(0x34, Str("t") + Bytes({0, 0, 0})), kV5),
            ReasonCode::kProtocolError);
}

TEST(PublishTest, Qos0HasNoPacketId) {
  auto decoded = DecodePacket(Frame(0x30, Str("t") + Bytes({0, 0})), kV311);
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(std::get<PublishPacket>(*decoded).packet_id, 0);
  EXPECT_EQ(std::get<PublishPacket>(*decoded).payload, Bytes({0, 0}));
}

TEST(PublishTest, TopicMustBeUtf8ButWildcardsAreTheSessionsConcern) {
  EXPECT_EQ(DecodeReason(Frame(0x30, Str(Bytes({'a', 0x00}))), kV311),
            ReasonCode::kMalformedPacket);
  EXPECT_EQ(DecodeReason(Frame(0x30, Str("a/#")), kV311), ReasonCode::kSuccess);
  EXPECT_EQ(DecodeReason(Frame(0x30, Str("")), kV311), ReasonCode::kSuccess);
}

TEST(PublishTest, TruncatedTopicIsMalformed) {
  EXPECT_EQ(DecodeReason(Frame(0x30, Bytes({0x00})), kV311), ReasonCode::kMalformedPacket);
  EXPECT_EQ(DecodeReason(Frame(0x30, Bytes({0x00, 0x04, 'a'})), kV311),
            ReasonCode::kMalformedPacket);
  EXPECT_EQ(DecodeReason(Frame(0x32, Str("t") + Bytes({0x01})), kV311),
            ReasonCode::kMalformedPacket);
}

// v5 §3.3.2.1: a zero-length topic needs a Topic Alias.
TEST(PublishTest, V5EmptyTopicNeedsAnAlias) {
  EXPECT_EQ(DecodeReason(Frame(0x30, Str("") + Bytes({0})), kV5), ReasonCode::kProtocolError);
  EXPECT_EQ(DecodeReason(Frame(0x30, Str("") + Bytes({3, 0x23, 0, 1})), kV5),
            ReasonCode::kSuccess);
}

TEST(PublishTest, V5NeedsAPropertyLength) {
  EXPECT_EQ(DecodeReason(Frame(0x30, Str("t")), kV5), ReasonCode::kMalformedPacket);
  EXPECT_EQ(DecodeReason(Frame(0x30, Str("t")), kV311), ReasonCode::kSuccess);
}

TEST(EncodePublishTest, SameBytesAsEncodePacket) {
  PublishPacket header{true, 2, true, "fan/out", 77, {}, ""};
  header.properties.subscription_identifiers = {5};
  const std::string payload(300, 'q');
  for (const ProtocolVersion version : testing::kAllVersions) {
    std::string out = "previous";
    EncodePublish(header, payload, version, out);
    PublishPacket whole = header;
    whole.payload = payload;
    EXPECT_EQ(out, "previous" + Encode(whole, version));
    EXPECT_EQ(EncodedPublishSize(header, payload.size(), version), out.size() - 8);
  }
}

TEST(EncodePublishTest, IgnoresThePayloadField) {
  PublishPacket header{false, 0, false, "t", 0, {}, "not this"};
  std::string out;
  EncodePublish(header, "this", kV311, out);
  EXPECT_EQ(out, Frame(0x30, Str("t") + "this"));
}

TEST(EncodePublishTest, GrowsTheBufferOnce) {
  const PublishPacket header{false, 1, false, "t", 1, {}, ""};
  const std::string payload(100'000, 'x');
  std::string out;
  EncodePublish(header, payload, kV5, out);
  // One reservation of the exact size: no geometric growth left behind.
  EXPECT_LT(out.capacity(), out.size() + 64);
}

TEST(EncodePublishTest, FirstByteCarriesTheFlags) {
  EXPECT_EQ(Encode(PublishPacket{false, 0, false, "t", 0, {}, ""}, kV311)[0], '\x30');
  EXPECT_EQ(Encode(PublishPacket{false, 0, true, "t", 0, {}, ""}, kV311)[0], '\x31');
  EXPECT_EQ(Encode(PublishPacket{false, 1, false, "t", 1, {}, ""}, kV311)[0], '\x32');
  EXPECT_EQ(Encode(PublishPacket{true, 2, true, "t", 1, {}, ""}, kV311)[0], '\x3D');
}

}  // namespace
}  // namespace estuary::mqtt
