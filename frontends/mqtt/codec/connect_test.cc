// CONNECT and CONNACK (§3.1, §3.2): versions, flags, and the errors a
// session answers with a CONNACK.
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

// A CONNECT with client id "c" and whatever `payload_tail` adds after it.
std::string Connect(std::string_view name, int level, int flags,
                    std::string_view payload_tail = "", bool v5_properties = false) {
  std::string body = Str(name) + Bytes({level, flags, 0x00, 0x3C});
  if (v5_properties) body += Bytes({0x00});
  body += Str("c");
  body += payload_tail;
  return Frame(0x10, body);
}

DecodeError ConnectError(const std::string& frame) {
  auto decoded = DecodePacket(frame, kV311);
  EXPECT_FALSE(decoded.has_value());
  return decoded ? DecodeError{} : decoded.error();
}

TEST(ConnectTest, VersionComesFromThePacketNotTheArgument) {
  auto decoded = DecodePacket(Connect("MQTT", 5, 0x02, "", true), kV311);
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  EXPECT_EQ(std::get<ConnectPacket>(*decoded).version, kV5);
  decoded = DecodePacket(Connect("MQIsdp", 3, 0x02), kV5);
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  EXPECT_EQ(std::get<ConnectPacket>(*decoded).version, kV31);
  EXPECT_EQ(std::get<ConnectPacket>(*decoded).protocol_name, "MQIsdp");
}

TEST(ConnectTest, UnsupportedLevelSaysWhichConnackToSend) {
  DecodeError error = ConnectError(Connect("MQTT", 3, 0x02));
  EXPECT_EQ(error.reason, ReasonCode::kUnsupportedProtocolVersion);
  EXPECT_EQ(error.version_hint, kV311);
  EXPECT_EQ(ToV3ConnackCode(error.reason), 0x01);

  error = ConnectError(Connect("MQTT", 6, 0x02));
  EXPECT_EQ(error.reason, ReasonCode::kUnsupportedProtocolVersion);
  EXPECT_EQ(error.version_hint, kV5);

  error = ConnectError(Connect("MQTT", 0x84, 0x02));  // 3.1.1 with the bridge bit
  EXPECT_EQ(error.reason, ReasonCode::kUnsupportedProtocolVersion);
  EXPECT_EQ(error.version_hint, kV311);

  error = ConnectError(Connect("MQIsdp", 4, 0x02));
  EXPECT_EQ(error.reason, ReasonCode::kUnsupportedProtocolVersion);
  EXPECT_EQ(error.version_hint, kV31);
}

TEST(ConnectTest, UnknownProtocolNameHasNoHint) {
  const DecodeError error = ConnectError(Connect("MQTX", 4, 0x02));
  EXPECT_EQ(error.reason, ReasonCode::kProtocolError);
  EXPECT_FALSE(error.version_hint.has_value());
}

TEST(ConnectTest, LaterErrorsCarryTheVersion) {
  const DecodeError error = ConnectError(Connect("MQTT", 5, 0x03, "", true));
  EXPECT_EQ(error.reason, ReasonCode::kMalformedPacket);
  EXPECT_EQ(error.version_hint, kV5);
}

// [MQTT-3.1.2-3]
TEST(ConnectTest, ReservedFlagIsMalformed) {
  EXPECT_EQ(DecodeReason(Connect("MQTT", 4, 0x03), kV311), ReasonCode::kMalformedPacket);
  EXPECT_EQ(DecodeReason(Connect("MQTT", 5, 0x01, "", true), kV5), ReasonCode::kMalformedPacket);
}

TEST(ConnectTest, WillFlagsMustBeConsistent) {
  const std::string will = Str("w/t") + Str("msg");
  EXPECT_EQ(DecodeReason(Connect("MQTT", 4, 0x04 | 0x08, will), kV311), ReasonCode::kSuccess);
  EXPECT_EQ(DecodeReason(Connect("MQTT", 4, 0x04 | 0x18, will), kV311),
            ReasonCode::kMalformedPacket);  // will QoS 3
  EXPECT_EQ(DecodeReason(Connect("MQTT", 4, 0x08), kV311),
            ReasonCode::kMalformedPacket);  // will QoS without will flag
  EXPECT_EQ(DecodeReason(Connect("MQTT", 4, 0x20), kV311),
            ReasonCode::kMalformedPacket);  // will retain without will flag
}

TEST(ConnectTest, WillFieldsAreRead) {
  const std::string will = Bytes({0x05, 0x18, 0x00, 0x00, 0x00, 0x05}) + Str("w/t") + Str("msg");
  auto decoded = DecodePacket(Connect("MQTT", 5, 0x04 | 0x10 | 0x20, will, true), kV5);
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  const auto& connect = std::get<ConnectPacket>(*decoded);
  ASSERT_TRUE(connect.will.has_value());
  EXPECT_EQ(connect.will->topic, "w/t");
  EXPECT_EQ(connect.will->payload, "msg");
  EXPECT_EQ(connect.will->qos, 2);
  EXPECT_TRUE(connect.will->retain);
  EXPECT_EQ(connect.will->properties.will_delay_interval, 5u);
}

TEST(ConnectTest, WillPropertiesOnlyAllowWillProperties) {
  // Session Expiry Interval belongs to CONNECT, not to the will.
  const std::string will = Bytes({0x05, 0x11, 0x00, 0x00, 0x00, 0x05}) + Str("w") + Str("m");
  EXPECT_EQ(DecodeReason(Connect("MQTT", 5, 0x04, will, true), kV5), ReasonCode::kMalformedPacket);
}

// [MQTT-3.1.2-22] in 3.1.1; v5 allows a password without a user name.
TEST(ConnectTest, PasswordWithoutUserName) {
  EXPECT_EQ(DecodeReason(Connect("MQTT", 4, 0x40, Str("pw")), kV311),
            ReasonCode::kMalformedPacket);
  EXPECT_EQ(DecodeReason(Connect("MQIsdp", 3, 0x40, Str("pw")), kV31),
            ReasonCode::kMalformedPacket);
  auto decoded = DecodePacket(Connect("MQTT", 5, 0x40, Str("pw"), true), kV5);
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  EXPECT_EQ(std::get<ConnectPacket>(*decoded).password, "pw");
  EXPECT_FALSE(std::get<ConnectPacket>(*decoded).username.has_value());
}

TEST(ConnectTest, MissingFlaggedFieldsAreMalformed) {
  EXPECT_EQ(DecodeReason(Connect("MQTT", 4, 0x80), kV311), ReasonCode::kMalformedPacket);
  EXPECT_EQ(DecodeReason(Connect("MQTT", 4, 0x04, Str("w")), kV311), ReasonCode::kMalformedPacket);
  EXPECT_EQ(DecodeReason(Connect("MQTT", 4, 0x02, Str("extra")), kV311),
            ReasonCode::kMalformedPacket);
}

TEST(ConnectTest, InvalidUtf8ClientIdIsMalformed) {
  const std::string body = Str("MQTT") + Bytes({4, 0x02, 0, 60}) + Str(Bytes({0xC3, 0x28}));
  EXPECT_EQ(DecodeReason(Frame(0x10, body), kV311), ReasonCode::kMalformedPacket);
}

TEST(ConnackTest, V3ReturnCodes) {
  const std::pair<int, ReasonCode> codes[] = {
      {0, ReasonCode::kSuccess}, {1, ReasonCode::kUnsupportedProtocolVersion},
      {2, ReasonCode::kClientIdentifierNotValid}, {3, ReasonCode::kServerUnavailable},
      {4, ReasonCode::kBadUserNameOrPassword}, {5, ReasonCode::kNotAuthorized}};
  for (const auto& [code, reason] : codes) {
    auto decoded = DecodePacket(Bytes({0x20, 0x02, 0x00, code}), kV311);
    ASSERT_TRUE(decoded.has_value());
    EXPECT_EQ(std::get<ConnackPacket>(*decoded).reason, reason);
    EXPECT_EQ(ToV3ConnackCode(reason), code);
  }
  EXPECT_EQ(DecodeReason(Bytes({0x20, 0x02, 0x00, 0x06}), kV311), ReasonCode::kMalformedPacket);
}

TEST(ConnackTest, ToV3ConnackCodeFoldsV5Refusals) {
  EXPECT_EQ(ToV3ConnackCode(ReasonCode::kBanned), 5);
  EXPECT_EQ(ToV3ConnackCode(ReasonCode::kBadAuthenticationMethod), 5);
  EXPECT_EQ(ToV3ConnackCode(ReasonCode::kServerBusy), 3);
  EXPECT_EQ(ToV3ConnackCode(ReasonCode::kUseAnotherServer), 3);
  const std::string encoded =
      testing::Encode(ConnackPacket{false, ReasonCode::kBanned, {}}, kV311);
  EXPECT_EQ(encoded, Bytes({0x20, 0x02, 0x00, 0x05}));
}

TEST(ConnackTest, ReservedFlagsAndSessionPresentRules) {
  EXPECT_EQ(DecodeReason(Bytes({0x20, 0x02, 0x02, 0x00}), kV311), ReasonCode::kMalformedPacket);
  EXPECT_EQ(DecodeReason(Bytes({0x20, 0x02, 0x01, 0x05}), kV311), ReasonCode::kProtocolError);
  EXPECT_EQ(DecodeReason(Bytes({0x20, 0x03, 0x01, 0x87, 0x00}), kV5), ReasonCode::kProtocolError);
  // 3.1 had no Session Present flag: the byte is ignored.
  auto decoded = DecodePacket(Bytes({0x20, 0x02, 0x01, 0x00}), kV31);
  ASSERT_TRUE(decoded.has_value());
  EXPECT_FALSE(std::get<ConnackPacket>(*decoded).session_present);
}

TEST(ConnackTest, V5NeedsPropertyLengthAndAValidReason) {
  EXPECT_EQ(DecodeReason(Bytes({0x20, 0x02, 0x00, 0x00}), kV5), ReasonCode::kMalformedPacket);
  EXPECT_EQ(DecodeReason(Bytes({0x20, 0x03, 0x00, 0x00, 0x00}), kV5), ReasonCode::kSuccess);
  EXPECT_EQ(DecodeReason(Bytes({0x20, 0x03, 0x00, 0x10, 0x00}), kV5), ReasonCode::kProtocolError);
  EXPECT_EQ(DecodeReason(Bytes({0x20, 0x03, 0x00, 0x8A, 0x00}), kV5), ReasonCode::kSuccess);
}

}  // namespace
}  // namespace estuary::mqtt
