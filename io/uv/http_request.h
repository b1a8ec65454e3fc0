#pragma once
// Parsing of HTTP/1.x request heads for HttpServer: pure, no I/O. Enough
// of RFC 9112 for GET probes and scrapes: the request line, headers (only
// Connection and Content-Length interpreted), and a Content-Length body
// that is skipped. Transfer-Encoding is refused. Authorization is kept
// for the admin token check (io/uv/admin_token.h).
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace estuary::io {

struct HttpRequest {
  std::string method;
  std::string target;  // as sent: path and query
  int minor_version = 1;  // HTTP/1.minor_version
  bool keep_alive = true;
  std::string authorization;  // the Authorization field's value, "" if absent
  // Every field as sent (name, trimmed value), in order: for the WebSocket
  // upgrade (io/ws/websocket_handshake.h), which reads several.
  std::vector<std::pair<std::string, std::string>> fields;
  size_t consumed = 0;  // bytes of the buffer this request used, body included
};

struct HttpParseResult {
  enum class Status { kIncomplete, kComplete, kBad };
  Status status = Status::kIncomplete;
  HttpRequest request;  // when kComplete
  std::string error;    // when kBad
};

inline constexpr size_t kMaxHttpRequestBytes = 8 * 1024;

// Parses the request at the start of `buffer` (which may hold more).
// Case-insensitive ASCII comparison of header names and tokens.
bool EqualsIgnoreCase(std::string_view a, std::string_view b);

HttpParseResult ParseHttpRequest(std::string_view buffer, size_t max_bytes = kMaxHttpRequestBytes);

}  // namespace estuary::io
