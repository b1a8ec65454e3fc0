// PUBACK, PUBREC, PUBREL, PUBCOMP, DISCONNECT, AUTH, PINGREQ, PINGRESP: the
// v5 short forms and reason codes.
#include <gtest/gtest.h>

#include "frontends/mqtt/codec/test_util.h"

namespace estuary::mqtt {
namespace {

using testing::Bytes;
using testing::DecodeReason;
using testing::Encode;

constexpr auto kV311 = ProtocolVersion::kV311;
constexpr auto kV5 = ProtocolVersion::kV5;

AckPacket DecodeAck(const std::string& bytes) {
  auto decoded = DecodePacket(bytes, kV5);
  EXPECT_TRUE(decoded.has_value()) << (decoded ? "" : decoded.error().message);
  return decoded ? std::get<AckPacket>(*decoded) : AckPacket{};
}

// §3.4.2.1: remaining length 2 means Success and no properties, 3 a reason
// code alone, 4 and more a reason code and properties.
TEST(AckTest, V5ShortForms) {
  EXPECT_EQ(DecodeAck(Bytes({0x40, 0x02, 0x00, 0x05})),
            (AckPacket{PacketType::kPuback, 5, ReasonCode::kSuccess, {}}));
  EXPECT_EQ(DecodeAck(Bytes({0x50, 0x03, 0x00, 0x05, 0x10})),
            (AckPacket{PacketType::kPubrec, 5, ReasonCode::kNoMatchingSubscribers, {}}));
  EXPECT_EQ(DecodeAck(Bytes({0x62, 0x04, 0x00, 0x05, 0x92, 0x00})),
            (AckPacket{PacketType::kPubrel, 5, ReasonCode::kPacketIdentifierNotFound, {}}));
  EXPECT_EQ(DecodeAck(Bytes({0x70, 0x04, 0x00, 0x05, 0x00, 0x00})),
            (AckPacket{PacketType::kPubcomp, 5, ReasonCode::kSuccess, {}}));
}

TEST(AckTest, V5EncodesTheShortestForm) {
  EXPECT_EQ(Encode(AckPacket{PacketType::kPuback, 5, ReasonCode::kSuccess, {}}, kV5),
            Bytes({0x40, 0x02, 0x00, 0x05}));
  EXPECT_EQ(Encode(AckPacket{PacketType::kPubrec, 5, ReasonCode::kQuotaExceeded, {}}, kV5),
            Bytes({0x50, 0x03, 0x00, 0x05, 0x97}));
  Properties properties;
  properties.reason_string = "r";
  EXPECT_EQ(Encode(AckPacket{PacketType::kPubcomp, 5, ReasonCode::kSuccess, properties}, kV5),
            Bytes({0x70, 0x08, 0x00, 0x05, 0x00, 0x04, 0x1F, 0x00, 0x01, 'r'}));
}

TEST(AckTest, V3IsExactlyAPacketId) {
  EXPECT_EQ(Encode(AckPacket{PacketType::kPubrel, 9, ReasonCode::kPacketIdentifierNotFound, {}},
                   kV311),
            Bytes({0x62, 0x02, 0x00, 0x09}));
  EXPECT_EQ(DecodeReason(Bytes({0x40, 0x03, 0x00, 0x05, 0x00}), kV311),
            ReasonCode::kMalformedPacket);
  EXPECT_EQ(DecodeReason(Bytes({0x40, 0x01, 0x00}), kV311), ReasonCode::kMalformedPacket);
}

TEST(AckTest, PacketIdZeroIsAProtocolError) {
  for (int first : {0x40, 0x50, 0x62, 0x70}) {
    EXPECT_EQ(DecodeReason(Bytes({first, 0x02, 0x00, 0x00}), kV311), ReasonCode::kProtocolError);
    EXPECT_EQ(DecodeReason(Bytes({first, 0x02, 0x00, 0x00}), kV5), ReasonCode::kProtocolError);
  }
}

TEST(AckTest, ReasonCodesBelongToThePacket) {
  EXPECT_EQ(DecodeReason(Bytes({0x40, 0x03, 0x00, 0x01, 0x99}), kV5), ReasonCode::kSuccess);
  EXPECT_EQ(DecodeReason(Bytes({0x40, 0x03, 0x00, 0x01, 0x92}), kV5), ReasonCode::kProtocolError);
  EXPECT_EQ(DecodeReason(Bytes({0x62, 0x03, 0x00, 0x01, 0x10}), kV5), ReasonCode::kProtocolError);
  EXPECT_EQ(DecodeReason(Bytes({0x70, 0x03, 0x00, 0x01, 0x92}), kV5), ReasonCode::kSuccess);
}

TEST(DisconnectTest, V5Forms) {
  auto normal = DecodePacket(Bytes({0xE0, 0x00}), kV5);
  ASSERT_TRUE(normal.has_value());
  EXPECT_EQ(std::get<DisconnectPacket>(*normal), DisconnectPacket{});
  auto with_will = DecodePacket(Bytes({0xE0, 0x01, 0x04}), kV5);
  ASSERT_TRUE(with_will.has_value());
  EXPECT_EQ(std::get<DisconnectPacket>(*with_will).reason, ReasonCode::kDisconnectWithWill);
  EXPECT_EQ(DecodeReason(Bytes({0xE0, 0x02, 0x8E, 0x00}), kV5), ReasonCode::kSuccess);
  EXPECT_EQ(DecodeReason(Bytes({0xE0, 0x01, 0x10}), kV5), ReasonCode::kProtocolError);
}

TEST(DisconnectTest, Encoding) {
  EXPECT_EQ(Encode(DisconnectPacket{}, kV5), Bytes({0xE0, 0x00}));
  EXPECT_EQ(Encode(DisconnectPacket{ReasonCode::kSessionTakenOver, {}}, kV5),
            Bytes({0xE0, 0x01, 0x8E}));
  EXPECT_EQ(Encode(DisconnectPacket{ReasonCode::kSessionTakenOver, {}}, kV311),
            Bytes({0xE0, 0x00}));
}

TEST(AuthTest, Forms) {
  EXPECT_EQ(Encode(AuthPacket{}, kV5), Bytes({0xF0, 0x00}));
  EXPECT_EQ(Encode(AuthPacket{ReasonCode::kReAuthenticate, {}}, kV5),
            Bytes({0xF0, 0x02, 0x19, 0x00}));
  EXPECT_EQ(DecodeReason(Bytes({0xF0, 0x00}), kV5), ReasonCode::kSuccess);
  EXPECT_EQ(DecodeReason(Bytes({0xF0, 0x02, 0x18, 0x00}), kV5), ReasonCode::kSuccess);
  EXPECT_EQ(DecodeReason(Bytes({0xF0, 0x02, 0x87, 0x00}), kV5), ReasonCode::kProtocolError);
}

TEST(PingTest, Bytes) {
  EXPECT_EQ(Encode(PingreqPacket{}, kV311), Bytes({0xC0, 0x00}));
  EXPECT_EQ(Encode(PingrespPacket{}, kV5), Bytes({0xD0, 0x00}));
  EXPECT_EQ(DecodeReason(Bytes({0xD0, 0x00}), kV5), ReasonCode::kSuccess);
}

}  // namespace
}  // namespace estuary::mqtt
