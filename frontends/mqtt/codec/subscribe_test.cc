// SUBSCRIBE, SUBACK, UNSUBSCRIBE, UNSUBACK (§3.8 to §3.11).
#include <gtest/gtest.h>

#include "frontends/mqtt/codec/test_util.h"

namespace estuary::mqtt {
namespace {

using testing::Bytes;
using testing::DecodeReason;
using testing::Frame;
using testing::Str;

constexpr auto kV31 = ProtocolVersion::kV31;
constexpr auto kV311 = ProtocolVersion::kV311;
constexpr auto kV5 = ProtocolVersion::kV5;

std::string Subscribe(int options, ProtocolVersion version) {
  const std::string properties = version == kV5 ? Bytes({0}) : "";
  return Frame(0x82, Bytes({0, 1}) + properties + Str("a/b") + Bytes({options}));
}

TEST(SubscribeTest, V5OptionsAreDecoded) {
  auto decoded = DecodePacket(Subscribe(0x2E, kV5), kV5);
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  const SubscribeOptions& options = std::get<SubscribePacket>(*decoded).subscriptions[0].options;
  EXPECT_EQ(options.qos, 2);
  EXPECT_TRUE(options.no_local);
  EXPECT_TRUE(options.retain_as_published);
  EXPECT_EQ(options.retain_handling, 2);
}

// v5 [MQTT-3.8.3-5]: reserved bits are Malformed; QoS 3 and Retain
// Handling 3 are Protocol Errors (§3.8.3.1).
TEST(SubscribeTest, V5BadOptions) {
  EXPECT_EQ(DecodeReason(Subscribe(0x40, kV5), kV5), ReasonCode::kMalformedPacket);
  EXPECT_EQ(DecodeReason(Subscribe(0x80, kV5), kV5), ReasonCode::kMalformedPacket);
  EXPECT_EQ(DecodeReason(Subscribe(0x03, kV5), kV5), ReasonCode::kProtocolError);
  EXPECT_EQ(DecodeReason(Subscribe(0x30, kV5), kV5), ReasonCode::kProtocolError);
}

// 3.1.1 [MQTT-3.8.3-4]: only the QoS bits may be set, and QoS 3 is malformed.
TEST(SubscribeTest, V3BadRequestedQos) {
  for (const ProtocolVersion version : {kV31, kV311}) {
    EXPECT_EQ(DecodeReason(Subscribe(0x02, version), version), ReasonCode::kSuccess);
    EXPECT_EQ(DecodeReason(Subscribe(0x03, version), version), ReasonCode::kMalformedPacket);
    EXPECT_EQ(DecodeReason(Subscribe(0x04, version), version), ReasonCode::kMalformedPacket);
    EXPECT_EQ(DecodeReason(Subscribe(0x80, version), version), ReasonCode::kMalformedPacket);
  }
}

// v5 [MQTT-3.8.3-2] Protocol Error; 3.1.1 [MQTT-3.8.3-3] protocol violation.
TEST(SubscribeTest, NoSubscriptions) {
  EXPECT_EQ(DecodeReason(Frame(0x82, Bytes({0, 1, 0})), kV5), ReasonCode::kProtocolError);
  EXPECT_EQ(DecodeReason(Frame(0x82, Bytes({0, 1})), kV311), ReasonCode::kMalformedPacket);
}

TEST(SubscribeTest, FilterWithoutOptionsIsMalformed) {
  EXPECT_EQ(DecodeReason(Frame(0x82, Bytes({0, 1}) + Str("a")), kV311),
            ReasonCode::kMalformedPacket);
}

TEST(SubscribeTest, PacketIdZero) {
  EXPECT_EQ(DecodeReason(Frame(0x82, Bytes({0, 0}) + Str("a") + Bytes({0})), kV311),
            ReasonCode::kProtocolError);
  EXPECT_EQ(DecodeReason(Frame(0xA2, Bytes({0, 0}) + Str("a")), kV311),
            ReasonCode::kProtocolError);
  EXPECT_EQ(DecodeReason(Frame(0x90, Bytes({0, 0, 0})), kV311), ReasonCode::kProtocolError);
  EXPECT_EQ(DecodeReason(Frame(0xB0, Bytes({0, 0})), kV311), ReasonCode::kProtocolError);
}

TEST(SubscribeTest, FilterMustBeUtf8) {
  EXPECT_EQ(DecodeReason(Frame(0x82, Bytes({0, 1}) + Str(Bytes({0xFE})) + Bytes({0})), kV311),
            ReasonCode::kMalformedPacket);
}

TEST(SubscribeTest, V3EncodingDropsV5Options) {
  SubscribePacket subscribe{1, {}, {{"t", {1, true, true, 2}}}};
  subscribe.properties.subscription_identifiers = {9};
  EXPECT_EQ(testing::Encode(subscribe, kV311), Frame(0x82, Bytes({0, 1}) + Str("t") + Bytes({1})));
}

// [MQTT-3.10.3-2]
TEST(UnsubscribeTest, NoFiltersIsAProtocolError) {
  EXPECT_EQ(DecodeReason(Frame(0xA2, Bytes({0, 1, 0})), kV5), ReasonCode::kProtocolError);
  EXPECT_EQ(DecodeReason(Frame(0xA2, Bytes({0, 1})), kV311), ReasonCode::kProtocolError);
}

TEST(SubackTest, V3ReturnCodes) {
  auto decoded = DecodePacket(Frame(0x90, Bytes({0, 1, 0x00, 0x01, 0x02, 0x80})), kV311);
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(std::get<SubackPacket>(*decoded).reasons,
            (std::vector<ReasonCode>{ReasonCode::kSuccess, ReasonCode::kGrantedQos1,
                                     ReasonCode::kGrantedQos2, ReasonCode::kUnspecifiedError}));
  EXPECT_EQ(DecodeReason(Frame(0x90, Bytes({0, 1, 0x03})), kV311), ReasonCode::kMalformedPacket);
  EXPECT_EQ(DecodeReason(Frame(0x90, Bytes({0, 1, 0x87})), kV311), ReasonCode::kMalformedPacket);
}

TEST(SubackTest, V3EncodingFoldsErrorsTo0x80) {
  const SubackPacket suback{1, {}, {ReasonCode::kGrantedQos1, ReasonCode::kNotAuthorized,
                                    ReasonCode::kTopicFilterInvalid}};
  EXPECT_EQ(testing::Encode(suback, kV311), Frame(0x90, Bytes({0, 1, 0x01, 0x80, 0x80})));
  EXPECT_EQ(testing::Encode(suback, kV5), Frame(0x90, Bytes({0, 1, 0, 0x01, 0x87, 0x8F})));
}

TEST(SubackTest, V5ReasonCodesMustBeSubackOnes) {
  EXPECT_EQ(DecodeReason(Frame(0x90, Bytes({0, 1, 0, 0xA2})), kV5), ReasonCode::kSuccess);
  EXPECT_EQ(DecodeReason(Frame(0x90, Bytes({0, 1, 0, 0x10})), kV5), ReasonCode::kProtocolError);
  EXPECT_EQ(DecodeReason(Frame(0x90, Bytes({0, 1, 0})), kV5), ReasonCode::kProtocolError);
}

TEST(UnsubackTest, V3HasOnlyAPacketId) {
  EXPECT_EQ(DecodeReason(Frame(0xB0, Bytes({0, 1})), kV311), ReasonCode::kSuccess);
  EXPECT_EQ(DecodeReason(Frame(0xB0, Bytes({0, 1, 0})), kV311), ReasonCode::kMalformedPacket);
}

TEST(UnsubackTest, V5ReasonCodes) {
  EXPECT_EQ(DecodeReason(Frame(0xB0, Bytes({0, 1, 0, 0x11, 0x8F})), kV5), ReasonCode::kSuccess);
  EXPECT_EQ(DecodeReason(Frame(0xB0, Bytes({0, 1, 0, 0x01})), kV5), ReasonCode::kProtocolError);
  EXPECT_EQ(DecodeReason(Frame(0xB0, Bytes({0, 1, 0})), kV5), ReasonCode::kProtocolError);
  EXPECT_EQ(DecodeReason(Frame(0xB0, Bytes({0, 1})), kV5), ReasonCode::kMalformedPacket);
}

}  // namespace
}  // namespace estuary::mqtt
