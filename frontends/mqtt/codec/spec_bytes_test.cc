// Exact bytes: whole packets built around the non-normative examples of the
// MQTT 3.1.1 and 5.0 specifications (the variable header and payload
// figures of §3.1, §3.3, §3.8, §3.9 and §3.10), decoded and encoded.
#include <gtest/gtest.h>

#include "frontends/mqtt/codec/test_util.h"

namespace estuary::mqtt {
namespace {

using testing::Bytes;
using testing::Encode;
using testing::Hex;

constexpr auto kV311 = ProtocolVersion::kV311;
constexpr auto kV5 = ProtocolVersion::kV5;

void ExpectBothWays(const std::string& bytes, const Packet& packet, ProtocolVersion version) {
  auto decoded = DecodePacket(bytes, version);
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  EXPECT_EQ(*decoded, packet);
  EXPECT_EQ(Hex(Encode(packet, version)), Hex(bytes));
}

ConnectPacket ExampleConnect(ProtocolVersion version) {
  ConnectPacket connect;
  connect.protocol_name = "MQTT";
  connect.version = version;
  connect.clean_start = true;
  connect.keep_alive = 10;
  connect.client_id = "cid";
  connect.will = Will{"w", "bye", 1, false, {}};
  connect.username = "u";
  connect.password = "p";
  return connect;
}

// 3.1.1 Figure 3.6: flags 0xCE (user name, password, will QoS 1, will,
// clean session), keep alive 10.
TEST(SpecBytesTest, ConnectV311) {
  const std::string bytes = Bytes({
      0x10, 0x1D,                                      // CONNECT, remaining length 29
      0x00, 0x04, 'M', 'Q', 'T', 'T', 0x04, 0xCE, 0x00, 0x0A,  // variable header
      0x00, 0x03, 'c', 'i', 'd',                       // client identifier
      0x00, 0x01, 'w', 0x00, 0x03, 'b', 'y', 'e',      // will topic, will payload
      0x00, 0x01, 'u', 0x00, 0x01, 'p'});              // user name, password
  ExpectBothWays(bytes, ExampleConnect(kV311), kV311);
}

// 5.0 Figure 3-6: the same flags, then properties: Session Expiry Interval 10.
TEST(SpecBytesTest, ConnectV5) {
  ConnectPacket connect = ExampleConnect(kV5);
  connect.properties.session_expiry_interval = 10;
  const std::string bytes = Bytes({
      0x10, 0x24,
      0x00, 0x04, 'M', 'Q', 'T', 'T', 0x05, 0xCE, 0x00, 0x0A,
      0x05, 0x11, 0x00, 0x00, 0x00, 0x0A,              // properties
      0x00, 0x03, 'c', 'i', 'd',
      0x00,                                            // will properties
      0x00, 0x01, 'w', 0x00, 0x03, 'b', 'y', 'e',
      0x00, 0x01, 'u', 0x00, 0x01, 'p'});
  ExpectBothWays(bytes, connect, kV5);
}

TEST(SpecBytesTest, ConnectV31) {
  ConnectPacket connect;
  connect.protocol_name = "MQIsdp";
  connect.version = ProtocolVersion::kV31;
  connect.keep_alive = 60;
  connect.client_id = "c";
  const std::string bytes = Bytes({0x10, 0x0F, 0x00, 0x06, 'M', 'Q', 'I', 's', 'd', 'p', 0x03,
                                   0x02, 0x00, 0x3C, 0x00, 0x01, 'c'});
  ExpectBothWays(bytes, connect, ProtocolVersion::kV31);
}

TEST(SpecBytesTest, Connack) {
  ExpectBothWays(Bytes({0x20, 0x02, 0x01, 0x00}), ConnackPacket{true, ReasonCode::kSuccess, {}},
                 kV311);
  ExpectBothWays(Bytes({0x20, 0x02, 0x00, 0x04}),
                 ConnackPacket{false, ReasonCode::kBadUserNameOrPassword, {}}, kV311);
  ConnackPacket v5{false, ReasonCode::kSuccess, {}};
  v5.properties.receive_maximum = 100;
  ExpectBothWays(Bytes({0x20, 0x06, 0x00, 0x00, 0x03, 0x21, 0x00, 0x64}), v5, kV5);
}

// 3.1.1 Figure 3.11 / 5.0 Figure 3-9: topic "a/b", packet identifier 10.
TEST(SpecBytesTest, Publish) {
  const PublishPacket publish{false, 1, false, "a/b", 10, {}, "hi"};
  ExpectBothWays(Bytes({0x32, 0x09, 0x00, 0x03, 'a', '/', 'b', 0x00, 0x0A, 'h', 'i'}), publish,
                 kV311);
  ExpectBothWays(Bytes({0x32, 0x0A, 0x00, 0x03, 'a', '/', 'b', 0x00, 0x0A, 0x00, 'h', 'i'}),
                 publish, kV5);
}

TEST(SpecBytesTest, PublishAcks) {
  ExpectBothWays(Bytes({0x40, 0x02, 0x00, 0x0A}),
                 AckPacket{PacketType::kPuback, 10, ReasonCode::kSuccess, {}}, kV311);
  ExpectBothWays(Bytes({0x50, 0x02, 0x00, 0x0A}),
                 AckPacket{PacketType::kPubrec, 10, ReasonCode::kSuccess, {}}, kV5);
  ExpectBothWays(Bytes({0x62, 0x02, 0x00, 0x0A}),
                 AckPacket{PacketType::kPubrel, 10, ReasonCode::kSuccess, {}}, kV311);
  ExpectBothWays(Bytes({0x70, 0x03, 0x00, 0x0A, 0x92}),
                 AckPacket{PacketType::kPubcomp, 10, ReasonCode::kPacketIdentifierNotFound, {}},
                 kV5);
}

// 3.1.1 Figures 3.21 and 3.22: packet identifier 10, "a/b" QoS 1, "c/d" QoS 2;
// 5.0 Figures 3-19 and 3-21 add a zero property length.
TEST(SpecBytesTest, Subscribe) {
  const SubscribePacket subscribe{
      10, {}, {{"a/b", {1, false, false, 0}}, {"c/d", {2, false, false, 0}}}};
  ExpectBothWays(Bytes({0x82, 0x0E, 0x00, 0x0A, 0x00, 0x03, 'a', '/', 'b', 0x01, 0x00, 0x03, 'c',
                        '/', 'd', 0x02}),
                 subscribe, kV311);
  ExpectBothWays(Bytes({0x82, 0x0F, 0x00, 0x0A, 0x00, 0x00, 0x03, 'a', '/', 'b', 0x01, 0x00, 0x03,
                        'c', '/', 'd', 0x02}),
                 subscribe, kV5);
}

// 3.1.1 Figure 3.26: granted QoS 0, granted QoS 2, failure.
TEST(SpecBytesTest, Suback) {
  const SubackPacket suback{10, {}, {ReasonCode::kSuccess, ReasonCode::kGrantedQos2,
                                     ReasonCode::kUnspecifiedError}};
  ExpectBothWays(Bytes({0x90, 0x05, 0x00, 0x0A, 0x00, 0x02, 0x80}), suback, kV311);
  ExpectBothWays(Bytes({0x90, 0x06, 0x00, 0x0A, 0x00, 0x00, 0x02, 0x80}), suback, kV5);
}

// 3.1.1 Figure 3.30: packet identifier 10, filters "a/b" and "c/d".
TEST(SpecBytesTest, UnsubscribeAndUnsuback) {
  const UnsubscribePacket unsubscribe{10, {}, {"a/b", "c/d"}};
  ExpectBothWays(Bytes({0xA2, 0x0C, 0x00, 0x0A, 0x00, 0x03, 'a', '/', 'b', 0x00, 0x03, 'c', '/',
                        'd'}),
                 unsubscribe, kV311);
  ExpectBothWays(Bytes({0xB0, 0x02, 0x00, 0x0A}), UnsubackPacket{10, {}, {}}, kV311);
  ExpectBothWays(Bytes({0xB0, 0x05, 0x00, 0x0A, 0x00, 0x00, 0x11}),
                 UnsubackPacket{10, {}, {ReasonCode::kSuccess, ReasonCode::kNoSubscriptionExisted}},
                 kV5);
}

TEST(SpecBytesTest, PingAndDisconnect) {
  ExpectBothWays(Bytes({0xC0, 0x00}), PingreqPacket{}, kV311);
  ExpectBothWays(Bytes({0xD0, 0x00}), PingrespPacket{}, kV311);
  ExpectBothWays(Bytes({0xE0, 0x00}), DisconnectPacket{}, kV311);
  DisconnectPacket v5{ReasonCode::kServerShuttingDown, {}};
  v5.properties.session_expiry_interval = 0;
  ExpectBothWays(Bytes({0xE0, 0x07, 0x8B, 0x05, 0x11, 0x00, 0x00, 0x00, 0x00}), v5, kV5);
}

}  // namespace
}  // namespace estuary::mqtt
