#pragma once
// The server side of the WebSocket opening handshake (RFC 6455 section 4.2):
// pure, no I/O. A client's HTTP/1.1 Upgrade request is read from the start
// of a buffer (which may hold frames behind it) and answered with either
// "101 Switching Protocols" (Sec-WebSocket-Accept from the key, the
// subprotocol chosen from the client's offer) or a refusal whose status and
// body say why: 400 (a malformed request or a required header missing or
// wrong), 404 (a path this listener does not serve), 426 (not a WebSocket
// upgrade, or a version other than 13), 431 (a head over the size bound).
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace estuary::io {

struct WebSocketPolicy {
  std::vector<std::string> paths;         // accepted request paths (the query is ignored)
  std::vector<std::string> subprotocols;  // accepted Sec-WebSocket-Protocol tokens, preferred first
  size_t max_request_bytes = 8 * 1024;    // the whole request head
};

// The policies of the two listeners: MQTT 5.0 section 6 ("mqtt"; "mqttv3.1"
// as MQTT 3.1 clients send), the OASIS AMQP WebSocket binding ("amqp";
// "AMQPWSB10" of its drafts, which some clients still send).
WebSocketPolicy MqttWebSocketPolicy();
WebSocketPolicy AmqpWebSocketPolicy();

struct WebSocketUpgrade {
  enum class Status { kIncomplete, kAccepted, kRefused };
  Status status = Status::kIncomplete;
  std::string response;     // the bytes to send (kAccepted, kRefused)
  size_t consumed = 0;      // request bytes used (kAccepted); frames may follow
  std::string subprotocol;  // chosen (kAccepted)
  std::string path;         // requested (kAccepted)
  int http_status = 0;      // 101, or the refusal's
  std::string error;        // why it was refused
};

WebSocketUpgrade ParseWebSocketUpgrade(std::string_view buffer, const WebSocketPolicy& policy);

// base64(SHA-1(key + the RFC's GUID)): the Sec-WebSocket-Accept value.
std::string WebSocketAccept(std::string_view key);

}  // namespace estuary::io
