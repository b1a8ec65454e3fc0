#include "balancer/proxy_protocol.h"

#include <gtest/gtest.h>

#include "base/pinned_bytes.h"

namespace estuary::proxy {
namespace {

TEST(ProxyProtocolTest, Ipv4RoundTripWithExactBytes) {
  auto encoded = Encode({"192.0.2.7", 51000}, {"10.0.0.1", 1883});
  ASSERT_TRUE(encoded) << encoded.error();
  const std::string expected =
      std::string(kSignature) + std::string("\x21\x11\x00\x0c", 4) + std::string("\xc0\x00\x02\x07", 4) +
      std::string("\x0a\x00\x00\x01", 4) + std::string("\xc7\x38\x07\x5b", 4);
  EXPECT_EQ(*encoded, expected);
  DecodeResult decoded = Decode(*encoded + "MQTT bytes");
  ASSERT_EQ(decoded.status, DecodeStatus::kComplete) << decoded.error;
  EXPECT_EQ(decoded.header.size, 28u);
  EXPECT_FALSE(decoded.header.local);
  EXPECT_EQ(decoded.header.source, (Address{"192.0.2.7", 51000}));
  EXPECT_EQ(decoded.header.destination, (Address{"10.0.0.1", 1883}));
  EXPECT_EQ(decoded.header.source.ToString(), "192.0.2.7:51000");
}

TEST(ProxyProtocolTest, Ipv6RoundTrip) {
  auto encoded = Encode({"2001:db8::1", 40000}, {"::1", 5672});
  ASSERT_TRUE(encoded);
  EXPECT_EQ(encoded->size(), 16u + 36u);
  DecodeResult decoded = Decode(*encoded);
  ASSERT_EQ(decoded.status, DecodeStatus::kComplete);
  EXPECT_EQ(decoded.header.source.ToString(), "[2001:db8::1]:40000");
  EXPECT_EQ(decoded.header.destination, (Address{"::1", 5672}));
}

TEST(ProxyProtocolTest, MixedFamiliesAndNamesAreRefused) {
  EXPECT_FALSE(Encode({"127.0.0.1", 1}, {"::1", 2}));
  EXPECT_FALSE(Encode({"localhost", 1}, {"127.0.0.1", 2}));
}

TEST(ProxyProtocolTest, LocalCommandHasNoAddresses) {
  DecodeResult decoded = Decode(EncodeLocal());
  ASSERT_EQ(decoded.status, DecodeStatus::kComplete);
  EXPECT_TRUE(decoded.header.local);
  EXPECT_EQ(decoded.header.size, 16u);
  EXPECT_TRUE(decoded.header.source.ip.empty());
}

TEST(ProxyProtocolTest, EveryPrefixNeedsMore) {
  auto encoded = Encode({"127.0.0.1", 5}, {"127.0.0.1", 6});
  ASSERT_TRUE(encoded);
  for (size_t n = 0; n < encoded->size(); ++n) {
    EXPECT_EQ(Decode(encoded->substr(0, n)).status, DecodeStatus::kNeedMore) << n;
  }
}

TEST(ProxyProtocolTest, GarbageIsInvalidAtTheFirstWrongByte) {
  EXPECT_EQ(Decode("\x10").status, DecodeStatus::kInvalid);  // an MQTT CONNECT
  EXPECT_EQ(Decode("PROXY TCP4 1.2.3.4").status, DecodeStatus::kInvalid);  // v1 text
  EXPECT_EQ(Decode(std::string("\r\n\r\n\0X", 6)).status, DecodeStatus::kInvalid);
}

TEST(ProxyProtocolTest, BadVersionCommandFamilyAndLength) {
  auto header = [](uint8_t version_command, uint8_t family, uint16_t length) {
    std::string out(kSignature);
    out += char(version_command);
    out += char(family);
    out += char(length >> 8);
    out += char(length & 0xff);
    return out + std::string(length, '\0');
  };
  EXPECT_EQ(Decode(header(0x11, 0x11, 12)).status, DecodeStatus::kInvalid);  // version 1
  EXPECT_EQ(Decode(header(0x22, 0x11, 12)).status, DecodeStatus::kInvalid);  // command 2
  EXPECT_EQ(Decode(header(0x21, 0x11, 8)).status, DecodeStatus::kInvalid);   // short IPv4 block
  EXPECT_EQ(Decode(header(0x21, 0x12, 12)).status, DecodeStatus::kInvalid);  // UDP
  EXPECT_EQ(Decode(header(0x21, 0x11, 2000)).status, DecodeStatus::kInvalid);  // too long
  DecodeResult with_tlv = Decode(header(0x21, 0x11, 20));  // TLVs are skipped
  ASSERT_EQ(with_tlv.status, DecodeStatus::kComplete);
  EXPECT_EQ(with_tlv.header.size, 36u);
}

// Version 6 and LOCAL bytes, pinned too (issue 23: the byte codec was replaced).
TEST(ProxyProtocolTest, BytesArePinned) {
  auto encoded = Encode({"2001:db8::1", 40000}, {"::1", 5672});
  ASSERT_TRUE(encoded);
  EXPECT_EQ(base::PinnedBytes(*encoded), "52 bytes fnv1a64=7d2faf2654ca4e55");
  EXPECT_EQ(base::PinnedBytes(EncodeLocal()), "16 bytes fnv1a64=daf2c286df79beff");
}

}  // namespace
}  // namespace estuary::proxy
