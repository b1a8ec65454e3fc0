#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <cctype>
#include <charconv>
#include <cstring>

#include "io/uv/sockaddr.h"
#include "io/uv/tcp.h"

namespace estuary::io {
namespace {

Unexpected<std::string> Bad(std::string_view text, std::string_view why) {
  return MakeError("endpoint \"" + std::string(text) + "\": " + std::string(why));
}

bool IsIpv4(const std::string& host) {
  in_addr addr{};
  return inet_pton(AF_INET, host.c_str(), &addr) == 1;
}

bool IsIpv6(const std::string& host) {
  in6_addr addr{};
  return inet_pton(AF_INET6, host.c_str(), &addr) == 1;
}

// RFC 1123 host names: dot-separated labels of letters, digits and '-'.
bool IsHostName(std::string_view host) {
  if (host.empty() || host.size() > 253) return false;
  size_t label = 0;
  for (char c : host) {
    if (c == '.') {
      if (label == 0) return false;
      label = 0;
    } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '-') {
      if (++label > 63) return false;
    } else {
      return false;
    }
  }
  return label != 0 || host.size() > 1;  // a trailing dot is allowed
}

bool AllDigitsAndDots(std::string_view host) {
  for (char c : host) {
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '.') return false;
  }
  return true;
}

}  // namespace

std::string Endpoint::ToString() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

Expected<Endpoint, std::string> ParseEndpoint(std::string_view text) {
  if (text.empty()) return Bad(text, "empty, expected HOST:PORT");
  Endpoint endpoint;
  std::string_view port_text;
  if (text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) return Bad(text, "missing ']' after IPv6 address");
    endpoint.host = std::string(text.substr(1, close - 1));
    if (close + 1 >= text.size() || text[close + 1] != ':') return Bad(text, "missing ':PORT' after ']'");
    port_text = text.substr(close + 2);
    if (!IsIpv6(endpoint.host)) return Bad(text, "\"" + endpoint.host + "\" is not an IPv6 address");
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return Bad(text, "missing ':PORT'");
    endpoint.host = std::string(text.substr(0, colon));
    port_text = text.substr(colon + 1);
    if (endpoint.host.find(':') != std::string::npos) {
      return Bad(text, "IPv6 addresses need brackets, as in [::1]:1883");
    }
    if (endpoint.host.empty()) return Bad(text, "missing host (use 0.0.0.0 for every address)");
    if (AllDigitsAndDots(endpoint.host) ? !IsIpv4(endpoint.host) : !IsHostName(endpoint.host)) {
      return Bad(text, "\"" + endpoint.host + "\" is neither an IPv4 address nor a host name");
    }
  }
  if (port_text.empty()) return Bad(text, "missing port number");
  unsigned port = 0;
  auto [end, error] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (error != std::errc() || end != port_text.data() + port_text.size() || port > 65535 ||
      port_text.size() > 5) {
    return Bad(text, "port \"" + std::string(port_text) + "\" is not a number from 0 to 65535");
  }
  endpoint.port = static_cast<uint16_t>(port);
  return endpoint;
}

namespace detail {

std::optional<sockaddr_storage> NumericAddress(const Endpoint& endpoint) {
  sockaddr_storage storage{};
  const std::string& host = endpoint.host == "localhost" ? std::string("127.0.0.1") : endpoint.host;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(endpoint.port);
    return storage;
  }
  storage = {};
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
  if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(endpoint.port);
    return storage;
  }
  return std::nullopt;
}

Expected<sockaddr_storage, std::string> ResolveBlocking(const Endpoint& endpoint) {
  if (auto numeric = NumericAddress(endpoint)) return *numeric;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_ADDRCONFIG | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string port = std::to_string(endpoint.port);
  int rc = getaddrinfo(endpoint.host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0 || found == nullptr) {
    return MakeError("cannot resolve \"" + endpoint.host + "\": " + gai_strerror(rc));
  }
  sockaddr_storage storage{};
  std::memcpy(&storage, found->ai_addr, found->ai_addrlen);
  freeaddrinfo(found);
  return storage;
}

socklen_t AddressLength(const sockaddr_storage& address) {
  return address.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

std::string FormatAddress(const sockaddr* address) {
  char ip[INET6_ADDRSTRLEN] = {};
  if (address->sa_family == AF_INET) {
    auto* v4 = reinterpret_cast<const sockaddr_in*>(address);
    inet_ntop(AF_INET, &v4->sin_addr, ip, sizeof(ip));
    return std::string(ip) + ":" + std::to_string(ntohs(v4->sin_port));
  }
  if (address->sa_family == AF_INET6) {
    auto* v6 = reinterpret_cast<const sockaddr_in6*>(address);
    inet_ntop(AF_INET6, &v6->sin6_addr, ip, sizeof(ip));
    return "[" + std::string(ip) + "]:" + std::to_string(ntohs(v6->sin6_port));
  }
  return "";
}

}  // namespace detail
}  // namespace estuary::io
