#include "io/ws/websocket_handshake.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include "io/uv/http_request.h"

namespace estuary::io {
namespace {

using Status = WebSocketUpgrade::Status;

constexpr std::string_view kGuid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// The comma-separated tokens of a field value.
std::vector<std::string_view> Tokens(std::string_view value) {
  std::vector<std::string_view> tokens;
  while (true) {
    const size_t comma = value.find(',');
    std::string_view token = Trim(value.substr(0, comma));
    if (!token.empty()) tokens.push_back(token);
    if (comma == std::string_view::npos) return tokens;
    value.remove_prefix(comma + 1);
  }
}

// Every token of every field named `name` (a field may be repeated).
std::vector<std::string_view> FieldTokens(const HttpRequest& request, std::string_view name) {
  std::vector<std::string_view> tokens;
  for (const auto& [field, value] : request.fields) {
    if (!EqualsIgnoreCase(field, name)) continue;
    for (std::string_view token : Tokens(value)) tokens.push_back(token);
  }
  return tokens;
}

const std::string* Field(const HttpRequest& request, std::string_view name) {
  for (const auto& [field, value] : request.fields) {
    if (EqualsIgnoreCase(field, name)) return &value;
  }
  return nullptr;
}

bool HasToken(const std::vector<std::string_view>& tokens, std::string_view wanted) {
  for (std::string_view token : tokens) {
    if (EqualsIgnoreCase(token, wanted)) return true;
  }
  return false;
}

// A Sec-WebSocket-Key is the base64 of 16 bytes: 22 characters and "==".
bool ValidKey(std::string_view key) {
  if (key.size() != 24 || key.substr(22) != "==") return false;
  unsigned char decoded[18] = {};
  return EVP_DecodeBlock(decoded, reinterpret_cast<const unsigned char*>(key.data()), 24) == 18;
}

WebSocketUpgrade Refuse(int status, std::string reason, std::string extra_fields = {}) {
  const char* text = status == 404   ? "Not Found"
                     : status == 426 ? "Upgrade Required"
                     : status == 431 ? "Request Header Fields Too Large"
                     : status == 405 ? "Method Not Allowed"
                                     : "Bad Request";
  WebSocketUpgrade refusal;
  refusal.status = Status::kRefused;
  refusal.http_status = status;
  refusal.error = reason;
  const std::string body = "websocket: " + reason + "\n";
  refusal.response = fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n{}\r\n{}",
      status, text, body.size(), extra_fields, body);
  return refusal;
}

std::string Offered(const WebSocketPolicy& policy) {
  std::string list;
  for (const std::string& name : policy.subprotocols) list += (list.empty() ? "" : ", ") + name;
  return list;
}

// The checks of RFC 6455 4.2.1 on a complete request, in its order.
WebSocketUpgrade Check(const HttpRequest& request, const WebSocketPolicy& policy) {
  if (request.method != "GET") return Refuse(405, "the opening handshake is a GET", "Allow: GET\r\n");
  if (request.minor_version != 1) return Refuse(400, "the opening handshake needs HTTP/1.1");
  if (Field(request, "host") == nullptr) return Refuse(400, "no Host field");
  if (!HasToken(FieldTokens(request, "upgrade"), "websocket") ||
      !HasToken(FieldTokens(request, "connection"), "upgrade")) {
    return Refuse(426, "this port speaks WebSocket only (Upgrade: websocket, Connection: Upgrade)",
                  "Upgrade: websocket\r\nConnection: Upgrade\r\n");
  }
  const std::string* version = Field(request, "sec-websocket-version");
  if (version == nullptr || Trim(*version) != "13") {
    return Refuse(426, "Sec-WebSocket-Version must be 13", "Sec-WebSocket-Version: 13\r\n");
  }
  const std::string* key = Field(request, "sec-websocket-key");
  if (key == nullptr || !ValidKey(Trim(*key))) return Refuse(400, "Sec-WebSocket-Key missing or not 16 bytes in base64");
  const std::string_view target = request.target;
  const std::string_view path = target.substr(0, target.find('?'));
  bool served = false;
  for (const std::string& accepted : policy.paths) served = served || path == accepted;
  if (!served) return Refuse(404, fmt::format("no WebSocket endpoint at {}", path));
  const std::vector<std::string_view> offered = FieldTokens(request, "sec-websocket-protocol");
  std::string chosen;
  for (const std::string& name : policy.subprotocols) {
    if (chosen.empty() && HasToken(offered, name)) chosen = name;
  }
  if (chosen.empty()) {
    return Refuse(400, fmt::format("Sec-WebSocket-Protocol must offer {}", Offered(policy)));
  }
  WebSocketUpgrade accepted;
  accepted.status = Status::kAccepted;
  accepted.http_status = 101;
  accepted.subprotocol = chosen;
  accepted.path = std::string(path);
  accepted.consumed = request.consumed;
  accepted.response = fmt::format(
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Accept: {}\r\nSec-WebSocket-Protocol: {}\r\n\r\n",
      WebSocketAccept(Trim(*key)), chosen);
  return accepted;
}

}  // namespace

WebSocketPolicy MqttWebSocketPolicy() { return {{"/mqtt", "/"}, {"mqtt", "mqttv3.1"}, 8 * 1024}; }
WebSocketPolicy AmqpWebSocketPolicy() { return {{"/", "/amqp"}, {"amqp", "AMQPWSB10"}, 8 * 1024}; }

std::string WebSocketAccept(std::string_view key) {
  std::string input(key);
  input += kGuid;
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest);
  unsigned char encoded[4 * ((SHA_DIGEST_LENGTH + 2) / 3) + 1] = {};
  const int length = EVP_EncodeBlock(encoded, digest, SHA_DIGEST_LENGTH);
  return std::string(reinterpret_cast<const char*>(encoded), static_cast<size_t>(length));
}

WebSocketUpgrade ParseWebSocketUpgrade(std::string_view buffer, const WebSocketPolicy& policy) {
  // Anything but "GET " is refused from its first bytes, not held until
  // the size bound or the deadline (an MQTT or AMQP client on this port).
  constexpr std::string_view kGet = "GET ";
  const std::string_view start = buffer.substr(0, kGet.size());
  if (start != kGet.substr(0, start.size())) {
    return Refuse(400, "expected an HTTP GET with Upgrade: websocket (MQTT or AMQP bytes belong on the plain listener)");
  }
  HttpParseResult parsed = ParseHttpRequest(buffer, policy.max_request_bytes);
  if (parsed.status == HttpParseResult::Status::kIncomplete) return {};
  if (parsed.status == HttpParseResult::Status::kBad) {
    if (parsed.error == "request too large") {
      return Refuse(431, fmt::format("request head over {} bytes", policy.max_request_bytes));
    }
    return Refuse(400, parsed.error);
  }
  // A body (Content-Length) on an upgrade request would be read as frames.
  for (const auto& [field, value] : parsed.request.fields) {
    if (EqualsIgnoreCase(field, "content-length") && Trim(value) != "0") {
      return Refuse(400, "an opening handshake has no body");
    }
  }
  return Check(parsed.request, policy);
}

}  // namespace estuary::io
