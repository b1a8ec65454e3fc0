#include "balancer/connect_peek.h"

#include <gtest/gtest.h>

#include "frontends/mqtt/codec/encoder.h"

namespace estuary::balancer {
namespace {

std::string Connect(const std::string& client_id, mqtt::ProtocolVersion version) {
  mqtt::ConnectPacket connect;
  connect.protocol_name = version == mqtt::ProtocolVersion::kV31 ? "MQIsdp" : "MQTT";
  connect.version = version;
  connect.client_id = client_id;
  connect.keep_alive = 30;
  std::string out;
  mqtt::EncodePacket(connect, version, out);
  return out;
}

TEST(ConnectPeekTest, ReadsTheClientIdOfEveryVersion) {
  for (auto version : {mqtt::ProtocolVersion::kV31, mqtt::ProtocolVersion::kV311, mqtt::ProtocolVersion::kV5}) {
    const std::string bytes = Connect("sensor-17", version) + "\x30\x03\x00\x01t";  // a PUBLISH follows
    PeekResult result = PeekConnect(bytes, 1024);
    ASSERT_EQ(result.status, PeekStatus::kClientId) << result.why;
    EXPECT_EQ(result.client_id, "sensor-17");
  }
}

TEST(ConnectPeekTest, PrefixesNeedMore) {
  const std::string bytes = Connect("abc", mqtt::ProtocolVersion::kV5);
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_EQ(PeekConnect(bytes.substr(0, n), 1024).status, PeekStatus::kNeedMore) << n;
  }
}

TEST(ConnectPeekTest, GarbageAndOtherPacketsAreRejected) {
  EXPECT_EQ(PeekConnect("GET / HTTP/1.1\r\n", 1024).status, PeekStatus::kReject);
  EXPECT_EQ(PeekConnect(std::string("\x30\x02\x00\x00", 4), 1024).status, PeekStatus::kReject);
  EXPECT_EQ(PeekConnect(std::string("\x10\xff\xff\xff\xff\x01", 6), 1024).status, PeekStatus::kReject);
  // A CONNECT with a body that does not parse.
  EXPECT_EQ(PeekConnect(std::string("\x10\x02\x00\x00", 4), 1024).status, PeekStatus::kReject);
}

TEST(ConnectPeekTest, OverTheLimitIsRejected) {
  const std::string bytes = Connect(std::string(600, 'x'), mqtt::ProtocolVersion::kV311);
  EXPECT_EQ(PeekConnect(bytes.substr(0, 4), 512).status, PeekStatus::kReject);
  EXPECT_EQ(PeekConnect(bytes, 1024).status, PeekStatus::kClientId);
}

TEST(ConnectPeekTest, TlsIsOpaqueAndUnsupportedVersionsGoToANode) {
  EXPECT_EQ(PeekConnect(std::string("\x16\x03\x01\x02\x00", 5), 1024).status, PeekStatus::kOpaque);
  std::string v6 = Connect("c", mqtt::ProtocolVersion::kV311);
  v6[8] = 6;  // protocol level after "\x10 len \x00\x04MQTT"
  EXPECT_EQ(PeekConnect(v6, 1024).status, PeekStatus::kForward);
}

TEST(ConnectPeekTest, EmptyClientIdIsReported) {
  PeekResult result = PeekConnect(Connect("", mqtt::ProtocolVersion::kV5), 1024);
  ASSERT_EQ(result.status, PeekStatus::kClientId);
  EXPECT_TRUE(result.client_id.empty());
}

}  // namespace
}  // namespace estuary::balancer
