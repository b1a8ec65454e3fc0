// The fixed header (§2.1): PeekFrame on a byte stream, remaining length and
// reserved flags in DecodePacket.
#include <gtest/gtest.h>

#include "frontends/mqtt/codec/test_util.h"

namespace estuary::mqtt {
namespace {

using testing::Bytes;
using testing::DecodeReason;
using testing::Encode;
using testing::Frame;

constexpr uint32_t kNoLimit = 0xFFFFFFFF;
constexpr auto kV311 = ProtocolVersion::kV311;
constexpr auto kV5 = ProtocolVersion::kV5;

TEST(PeekFrameTest, EmptyBufferNeedsMore) {
  auto header = PeekFrame("", kNoLimit);
  ASSERT_TRUE(header.has_value());
  EXPECT_EQ(header->header_size, 0u);
}

// Feeding a stream one byte at a time: the header is reported as soon as
// its last length byte arrives, and never before.
TEST(PeekFrameTest, ByteByByteFeeding) {
  const std::string payload(20000, 'p');  // a three-byte remaining length
  const std::string stream =
      Encode(PublishPacket{false, 0, false, "t", 0, {}, payload}, kV5) +
      Encode(PingreqPacket{}, kV5);
  std::string buffer;
  std::vector<Packet> packets;
  for (char byte : stream) {
    buffer.push_back(byte);
    auto header = PeekFrame(buffer, kNoLimit);
    ASSERT_TRUE(header.has_value());
    if (header->header_size == 0 || buffer.size() < header->total_size()) continue;
    ASSERT_EQ(buffer.size(), header->total_size());
    auto packet = DecodePacket(buffer, kV5);
    ASSERT_TRUE(packet.has_value()) << packet.error().message;
    packets.push_back(*packet);
    buffer.clear();
  }
  ASSERT_EQ(packets.size(), 2u);
  EXPECT_EQ(std::get<PublishPacket>(packets[0]).payload, payload);
  EXPECT_TRUE(std::holds_alternative<PingreqPacket>(packets[1]));
}

TEST(PeekFrameTest, HeaderSizeAndTotalSize) {
  auto header = PeekFrame(Bytes({0x30, 0x80, 0x01}), kNoLimit);
  ASSERT_TRUE(header.has_value());
  EXPECT_EQ(header->header_size, 3u);
  EXPECT_EQ(header->remaining_length, 128u);
  EXPECT_EQ(header->total_size(), 131u);
  EXPECT_EQ(header->type(), PacketType::kPublish);
}

TEST(PeekFrameTest, FiveLengthBytesAreMalformed) {
  auto header = PeekFrame(Bytes({0x30, 0xFF, 0xFF, 0xFF, 0xFF, 0x01}), kNoLimit);
  ASSERT_FALSE(header.has_value());
  EXPECT_EQ(header.error().reason, ReasonCode::kMalformedPacket);
}

TEST(PeekFrameTest, FourContinuationBytesWithoutFifthAreAlreadyMalformed) {
  auto header = PeekFrame(Bytes({0x30, 0xFF, 0xFF, 0xFF, 0xFF}), kNoLimit);
  ASSERT_FALSE(header.has_value());
  EXPECT_EQ(header.error().reason, ReasonCode::kMalformedPacket);
}

TEST(PeekFrameTest, LargestRemainingLength) {
  auto header = PeekFrame(Bytes({0x30, 0xFF, 0xFF, 0xFF, 0x7F}), kNoLimit);
  ASSERT_TRUE(header.has_value());
  EXPECT_EQ(header->remaining_length, 268'435'455u);
  EXPECT_EQ(header->header_size, 5u);
}

TEST(PeekFrameTest, MaximumPacketSizeCountsTheWholePacket) {
  const std::string packet = Encode(PublishPacket{false, 0, false, "t", 0, {}, "0123456789"}, kV5);
  EXPECT_TRUE(PeekFrame(packet, static_cast<uint32_t>(packet.size())).has_value());
  auto too_large = PeekFrame(packet, static_cast<uint32_t>(packet.size() - 1));
  ASSERT_FALSE(too_large.has_value());
  EXPECT_EQ(too_large.error().reason, ReasonCode::kPacketTooLarge);
  // Known as soon as the length is: the body need not have arrived.
  auto early = PeekFrame(packet.substr(0, 2), static_cast<uint32_t>(packet.size() - 1));
  ASSERT_FALSE(early.has_value());
  EXPECT_EQ(early.error().reason, ReasonCode::kPacketTooLarge);
}

TEST(DecodePacketTest, RemainingLengthMustMatchExactly) {
  const std::string ping = Bytes({0xC0, 0x00});
  EXPECT_EQ(DecodeReason(ping, kV311), ReasonCode::kSuccess);
  EXPECT_EQ(DecodeReason(Bytes({0xC0, 0x00, 0x00}), kV311), ReasonCode::kMalformedPacket);
  EXPECT_EQ(DecodeReason(Bytes({0xC0, 0x01}), kV311), ReasonCode::kMalformedPacket);
  EXPECT_EQ(DecodeReason(Bytes({0xC0}), kV311), ReasonCode::kMalformedPacket);
}

// A remaining length that covers bytes the packet does not use.
TEST(DecodePacketTest, TrailingBytesAreMalformed) {
  EXPECT_EQ(DecodeReason(Bytes({0xC0, 0x01, 0x00}), kV311), ReasonCode::kMalformedPacket);
  EXPECT_EQ(DecodeReason(Bytes({0x40, 0x03, 0x00, 0x01, 0x00}), kV311),
            ReasonCode::kMalformedPacket);
  EXPECT_EQ(DecodeReason(Bytes({0xE0, 0x01, 0x00}), kV311), ReasonCode::kMalformedPacket);
}

TEST(DecodePacketTest, ReservedPacketTypes) {
  EXPECT_EQ(DecodeReason(Bytes({0x00, 0x00}), kV5), ReasonCode::kMalformedPacket);
  EXPECT_EQ(DecodeReason(Bytes({0xF0, 0x00}), kV311), ReasonCode::kMalformedPacket);
  EXPECT_EQ(DecodeReason(Bytes({0xF0, 0x00}), ProtocolVersion::kV31), ReasonCode::kMalformedPacket);
  EXPECT_EQ(DecodeReason(Bytes({0xF0, 0x00}), kV5), ReasonCode::kSuccess);
}

// §2.1.3: flags other than these are Malformed.
TEST(DecodePacketTest, ReservedFixedHeaderFlags) {
  for (const ProtocolVersion version : testing::kAllVersions) {
    for (const auto& sample : testing::SamplePackets(version)) {
      const PacketType type = TypeOf(sample.packet);
      if (type == PacketType::kPublish) continue;
      std::string bytes = Encode(sample.packet, version);
      const uint8_t expected_flags = bytes[0] & 0x0F;
      for (uint8_t flags = 0; flags < 16; ++flags) {
        if (flags == expected_flags) continue;
        if (version == ProtocolVersion::kV31 && expected_flags == 0x02 && flags == 0x0A) continue;
        bytes[0] = static_cast<char>(static_cast<uint8_t>(type) << 4 | flags);
        EXPECT_EQ(DecodeReason(bytes, version), ReasonCode::kMalformedPacket)
            << sample.name << " flags " << int{flags};
      }
    }
  }
}

// MQTT 3.1 clients set DUP on resent PUBREL, SUBSCRIBE and UNSUBSCRIBE.
TEST(DecodePacketTest, V31AllowsDupOnPubrelSubscribeUnsubscribe) {
  const auto v31 = ProtocolVersion::kV31;
  EXPECT_EQ(DecodeReason(Bytes({0x6A, 0x02, 0x00, 0x01}), v31), ReasonCode::kSuccess);
  EXPECT_EQ(DecodeReason(Frame(0x8A, Bytes({0x00, 0x01, 0x00, 0x01, 'a', 0x00})), v31),
            ReasonCode::kSuccess);
  EXPECT_EQ(DecodeReason(Bytes({0x6A, 0x02, 0x00, 0x01}), kV311), ReasonCode::kMalformedPacket);
}

TEST(ToStringTest, PacketTypesAndReasonCodes) {
  EXPECT_STREQ(ToString(PacketType::kConnect), "CONNECT");
  EXPECT_STREQ(ToString(PacketType::kUnsuback), "UNSUBACK");
  EXPECT_STREQ(ToString(PacketType::kAuth), "AUTH");
  EXPECT_STREQ(ToString(static_cast<PacketType>(0)), "RESERVED");
  EXPECT_STREQ(ToString(ReasonCode::kMalformedPacket), "Malformed Packet");
  EXPECT_STREQ(ToString(ReasonCode::kWildcardSubscriptionsNotSupported),
               "Wildcard Subscriptions not supported");
  EXPECT_STREQ(ToString(static_cast<ReasonCode>(0x03)), "Unknown reason code");
}

}  // namespace
}  // namespace estuary::mqtt
