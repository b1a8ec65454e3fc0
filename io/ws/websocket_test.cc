#include <gtest/gtest.h>

#include <string>

#include "io/ws/websocket_handshake.h"
#include "io/ws/websocket_session.h"

namespace estuary::io {
namespace {

// A client frame (RFC 6455 5.2): FIN, `opcode`, masked with a fixed key.
std::string ClientFrame(uint8_t opcode, std::string_view payload, bool fin = true, bool masked = true) {
  std::string frame;
  frame.push_back(static_cast<char>((fin ? 0x80 : 0) | opcode));
  const uint8_t mask_bit = masked ? 0x80 : 0;
  if (payload.size() < 126) {
    frame.push_back(static_cast<char>(mask_bit | payload.size()));
  } else if (payload.size() < 65536) {
    frame.push_back(static_cast<char>(mask_bit | 126));
    frame.push_back(static_cast<char>(payload.size() >> 8));
    frame.push_back(static_cast<char>(payload.size() & 0xff));
  } else {
    frame.push_back(static_cast<char>(mask_bit | 127));
    for (int shift = 56; shift >= 0; shift -= 8) frame.push_back(static_cast<char>((payload.size() >> shift) & 0xff));
  }
  const char key[4] = {0x11, 0x22, 0x33, 0x44};
  if (masked) frame.append(key, 4);
  for (size_t i = 0; i < payload.size(); ++i) frame.push_back(masked ? static_cast<char>(payload[i] ^ key[i % 4]) : payload[i]);
  return frame;
}

std::string Request(std::string_view path = "/mqtt", std::string_view protocol = "mqtt",
                    std::string_view version = "13") {
  return "GET " + std::string(path) +
         " HTTP/1.1\r\nHost: broker\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n"
         "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: " +
         std::string(version) + "\r\nSec-WebSocket-Protocol: " + std::string(protocol) + "\r\n\r\n";
}

TEST(WebSocketHandshakeTest, AcceptKeyIsTheRfcExample) {
  EXPECT_EQ(WebSocketAccept("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");  // RFC 6455 1.3
}

TEST(WebSocketHandshakeTest, Mqtt_6_0_0_4_AcceptsAndSelectsMqtt) {
  std::string request = Request("/mqtt?x=1", "foo, mqtt") + "\x82";
  auto upgrade = ParseWebSocketUpgrade(request, MqttWebSocketPolicy());
  ASSERT_EQ(upgrade.status, WebSocketUpgrade::Status::kAccepted) << upgrade.error;
  EXPECT_EQ(upgrade.subprotocol, "mqtt");
  EXPECT_EQ(upgrade.consumed, request.size() - 1);  // the frame behind it stays
  EXPECT_NE(upgrade.response.find("101 Switching Protocols"), std::string::npos);
  EXPECT_NE(upgrade.response.find("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"), std::string::npos);
  EXPECT_NE(upgrade.response.find("Sec-WebSocket-Protocol: mqtt\r\n"), std::string::npos);
}

TEST(WebSocketHandshakeTest, WaitsForTheWholeHead) {
  std::string request = Request();
  auto upgrade = ParseWebSocketUpgrade(std::string_view(request).substr(0, request.size() - 2), MqttWebSocketPolicy());
  EXPECT_EQ(upgrade.status, WebSocketUpgrade::Status::kIncomplete);
}

TEST(WebSocketHandshakeTest, RefusalsSayWhy) {
  auto refused = [](const std::string& request, const WebSocketPolicy& policy = MqttWebSocketPolicy()) {
    auto upgrade = ParseWebSocketUpgrade(request, policy);
    EXPECT_EQ(upgrade.status, WebSocketUpgrade::Status::kRefused);
    return upgrade.http_status;
  };
  EXPECT_EQ(refused(Request("/mqtt", "amqp")), 400);  // [MQTT-6.0.0-3] no mqtt offered
  EXPECT_EQ(refused(Request("/other")), 404);
  EXPECT_EQ(refused(Request("/mqtt", "mqtt", "8")), 426);
  EXPECT_EQ(refused("GET /mqtt HTTP/1.1\r\nHost: x\r\n\r\n"), 426);  // plain HTTP
  EXPECT_EQ(refused("\x10\x0c\x00\x04MQTT\x04\x02\x00\x3c"), 400);  // MQTT bytes on the WebSocket port
  EXPECT_EQ(refused("GET /mqtt HTTP/1.1\r\nX: " + std::string(9000, 'a')), 431);
  EXPECT_EQ(refused(Request("/", "mqtt"), AmqpWebSocketPolicy()), 400);  // amqp not offered
}

TEST(WebSocketHandshakeTest, AmqpPolicyTakesAmqp) {
  auto upgrade = ParseWebSocketUpgrade(Request("/", "AMQPWSB10, amqp"), AmqpWebSocketPolicy());
  ASSERT_EQ(upgrade.status, WebSocketUpgrade::Status::kAccepted) << upgrade.error;
  EXPECT_EQ(upgrade.subprotocol, "amqp");
}

TEST(WebSocketSessionTest, PayloadOfBinaryFramesSplitAnywhere) {
  WebSocketSession session(1024);
  std::string wire = ClientFrame(0x2, "hello ", false) + ClientFrame(0x0, "world") + ClientFrame(0x2, "!");
  std::string payload;
  for (char c : wire) ASSERT_TRUE(session.Receive(std::string_view(&c, 1), payload));
  EXPECT_EQ(payload, "hello world!");
  EXPECT_FALSE(session.has_output());
}

TEST(WebSocketSessionTest, SendFramesOneBinaryMessage) {
  WebSocketSession session(1024);
  ASSERT_TRUE(session.Send("abc"));
  std::string out;
  session.TakeOutput(out);
  EXPECT_EQ(out, std::string("\x82\x03" "abc", 5));  // unmasked from the server
}

TEST(WebSocketSessionTest, PingIsAnsweredWithPong) {
  WebSocketSession session(1024);
  std::string payload;
  ASSERT_TRUE(session.Receive(ClientFrame(0x9, "hi"), payload));
  std::string out;
  session.TakeOutput(out);
  EXPECT_EQ(out, std::string("\x8a\x02hi", 4));
}

uint16_t ClosedWith(WebSocketSession& session, const std::string& wire) {
  std::string payload;
  EXPECT_FALSE(session.Receive(wire, payload));
  std::string out;
  session.TakeOutput(out);
  if (out.size() < 4 || static_cast<uint8_t>(out[0]) != 0x88) return 0;
  return static_cast<uint16_t>((static_cast<uint8_t>(out[2]) << 8) | static_cast<uint8_t>(out[3]));
}

TEST(WebSocketSessionTest, UnmaskedClientFrameIsAProtocolError) {
  WebSocketSession session(1024);
  EXPECT_EQ(ClosedWith(session, ClientFrame(0x2, "x", true, false)), 1002);
}

TEST(WebSocketSessionTest, Mqtt_6_0_0_1_TextFrameCloses) {
  WebSocketSession session(1024);
  EXPECT_EQ(ClosedWith(session, ClientFrame(0x1, "x")), 1003);
}

TEST(WebSocketSessionTest, OversizedFrameIs1009) {
  WebSocketSession session(100);
  EXPECT_EQ(ClosedWith(session, ClientFrame(0x2, std::string(200, 'x'))), 1009);
  EXPECT_NE(session.error().find("1009"), std::string::npos);
}

TEST(WebSocketSessionTest, PeerCloseIsEchoed) {
  WebSocketSession session(1024);
  EXPECT_EQ(ClosedWith(session, ClientFrame(0x8, std::string("\x03\xe8", 2))), 1000);
  EXPECT_EQ(session.error(), "closed by the peer (1000)");
}

TEST(WebSocketSessionTest, ServerCloseCarriesItsStatus) {
  WebSocketSession session(1024);
  session.Close(1001, "going away");
  std::string out;
  session.TakeOutput(out);
  ASSERT_GE(out.size(), 4u);
  EXPECT_EQ(static_cast<uint8_t>(out[0]), 0x88);
  EXPECT_EQ(out.substr(4), "going away");
  EXPECT_FALSE(session.Send("late"));
}

}  // namespace
}  // namespace estuary::io
