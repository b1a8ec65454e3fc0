#include "io/uv/http_request.h"

#include <charconv>
#include <optional>

namespace estuary::io {
namespace {

using Status = HttpParseResult::Status;

HttpParseResult Bad(std::string error) {
  HttpParseResult result;
  result.status = Status::kBad;
  result.error = std::move(error);
  return result;
}

// RFC 9110 tchar.
bool IsTokenChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool IsToken(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!IsTokenChar(c)) return false;
  }
  return true;
}

bool IsTargetChar(char c) { return c > 0x20 && c < 0x7f; }

// Field values: visible ASCII, space, tab and obs-text; no controls.
bool IsFieldValue(std::string_view text) {
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 && c != '\t') return false;
    if (u == 0x7f) return false;
  }
  return true;
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// "GET /path HTTP/1.1"; empty error when valid.
std::string ParseRequestLine(std::string_view line, HttpRequest& request) {
  size_t first = line.find(' ');
  size_t second = first == std::string_view::npos ? first : line.find(' ', first + 1);
  if (second == std::string_view::npos) return "request line is not METHOD TARGET VERSION";
  std::string_view method = line.substr(0, first);
  std::string_view target = line.substr(first + 1, second - first - 1);
  std::string_view version = line.substr(second + 1);
  if (!IsToken(method)) return "bad method";
  if (target.empty() || (target.front() != '/' && target != "*")) return "bad request target";
  for (char c : target) {
    if (!IsTargetChar(c)) return "bad request target";
  }
  if (version == "HTTP/1.1") {
    request.minor_version = 1;
  } else if (version == "HTTP/1.0") {
    request.minor_version = 0;
  } else {
    return "unsupported version";
  }
  request.method = std::string(method);
  request.target = std::string(target);
  request.keep_alive = request.minor_version == 1;
  return "";
}

void ApplyConnection(std::string_view value, HttpRequest& request) {
  while (!value.empty()) {
    size_t comma = value.find(',');
    std::string_view option = Trim(value.substr(0, comma));
    if (EqualsIgnoreCase(option, "close")) request.keep_alive = false;
    if (EqualsIgnoreCase(option, "keep-alive") && request.minor_version == 0) request.keep_alive = true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
}

// The header fields, each ending in CRLF: Connection, Authorization and
// Content-Length are applied to `request` and `content_length`. Returns an error or "".
std::string ParseFields(std::string_view fields, HttpRequest& request, std::optional<size_t>& content_length) {
  while (!fields.empty()) {
    size_t end = fields.find("\r\n");
    std::string_view field = fields.substr(0, end);
    fields.remove_prefix(end + 2);
    size_t colon = field.find(':');
    if (colon == std::string_view::npos) return "header without ':'";
    std::string_view name = field.substr(0, colon);
    std::string_view value = Trim(field.substr(colon + 1));
    if (!IsToken(name)) return "bad header name";  // also catches obs-fold and "Name :"
    if (!IsFieldValue(value)) return "bad header value";
    request.fields.emplace_back(std::string(name), std::string(value));
    if (EqualsIgnoreCase(name, "connection")) ApplyConnection(value, request);
    if (EqualsIgnoreCase(name, "authorization")) {
      if (!request.authorization.empty()) return "more than one authorization field";
      request.authorization = std::string(value);
    }
    if (EqualsIgnoreCase(name, "transfer-encoding")) return "transfer-encoding not supported";
    if (EqualsIgnoreCase(name, "content-length")) {
      size_t length = 0;
      auto [ptr, error] = std::from_chars(value.data(), value.data() + value.size(), length);
      if (value.empty() || error != std::errc() || ptr != value.data() + value.size()) {
        return "bad content-length";
      }
      if (content_length && *content_length != length) return "conflicting content-length";
      content_length = length;
    }
  }
  return "";
}

}  // namespace

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i] >= 'A' && a[i] <= 'Z' ? static_cast<char>(a[i] + 32) : a[i];
    char y = b[i] >= 'A' && b[i] <= 'Z' ? static_cast<char>(b[i] + 32) : b[i];
    if (x != y) return false;
  }
  return true;
}

HttpParseResult ParseHttpRequest(std::string_view buffer, size_t max_bytes) {
  // Refuse a bad request line as soon as it is complete, so garbage is not
  // held until the size limit.
  std::string_view window = buffer.substr(0, max_bytes);
  size_t line_end = window.find("\r\n");
  size_t head_end = line_end == std::string_view::npos ? line_end : window.find("\r\n\r\n", line_end);
  if (line_end == std::string_view::npos && buffer.size() >= max_bytes) return Bad("request too large");
  if (line_end == std::string_view::npos) return {};
  HttpRequest request;
  if (std::string error = ParseRequestLine(buffer.substr(0, line_end), request); !error.empty()) {
    return Bad(error);
  }
  if (head_end == std::string_view::npos && buffer.size() >= max_bytes) return Bad("request too large");
  if (head_end == std::string_view::npos) return {};
  std::optional<size_t> content_length;
  std::string_view fields = buffer.substr(line_end + 2, head_end - line_end);
  if (std::string error = ParseFields(fields, request, content_length); !error.empty()) return Bad(error);
  size_t head = head_end + 4;
  size_t body = content_length.value_or(0);
  if (body > max_bytes - head) return Bad("request too large");
  if (buffer.size() < head + body) return {};
  request.consumed = head + body;
  HttpParseResult result;
  result.status = Status::kComplete;
  result.request = std::move(request);
  return result;
}

}  // namespace estuary::io
