#include "conformance/support/raw_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "frontends/mqtt/codec/decoder.h"
#include "frontends/mqtt/codec/encoder.h"

namespace estuary::testing {

int ConnectTcp(const std::string& host, uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}


RawClient::~RawClient() { Close(); }

bool RawClient::Open(const std::string& host, uint16_t port) {
  fd_ = ConnectTcp(host, port);
  return fd_ >= 0;
}

void RawClient::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void RawClient::SendBytes(std::string_view bytes) {
  while (!bytes.empty() && fd_ >= 0) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

void RawClient::Send(const mqtt::Packet& packet) {
  std::string bytes;
  mqtt::EncodePacket(packet, version, bytes);
  SendBytes(bytes);
}

bool RawClient::ReadMore(std::chrono::steady_clock::time_point deadline) {
  if (fd_ < 0 || closed_) return false;
  // Rounded up: a short wait (1 ms) must still look at the socket once,
  // or a closed connection or waiting bytes go unseen.
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0) return false;
  pollfd poll_fd{fd_, POLLIN, 0};
  const int ready = ::poll(&poll_fd, 1, static_cast<int>(left.count()));
  if (ready <= 0) return false;
  char chunk[65536];
  const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
  if (n <= 0) {
    closed_ = true;
    return false;
  }
  buffer_.append(chunk, static_cast<size_t>(n));
  return true;
}

std::optional<mqtt::Packet> RawClient::Receive(std::chrono::milliseconds timeout) {
  if (!held_.empty()) {
    mqtt::Packet packet = std::move(held_.front());
    held_.pop_front();
    return packet;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto header = mqtt::PeekFrame(buffer_, UINT32_MAX);
    if (header && header->header_size != 0 && buffer_.size() >= header->total_size()) {
      auto packet = mqtt::DecodePacket(std::string_view(buffer_).substr(0, header->total_size()), version);
      buffer_.erase(0, header->total_size());
      if (packet) return std::move(*packet);
      return std::nullopt;
    }
    if (!ReadMore(deadline)) return std::nullopt;
  }
}

bool RawClient::WaitClosed(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!closed_) {
    auto packet = Receive(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()));
    if (packet) {
      last_discarded = std::move(packet);
      continue;
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
  }
  return closed_;
}

std::optional<mqtt::ConnackPacket> RawClient::Connect(const std::string& client_id, bool clean_start,
                                                      mqtt::Properties properties, uint16_t keep_alive) {
  mqtt::ConnectPacket connect;
  connect.protocol_name = version == mqtt::ProtocolVersion::kV31 ? "MQIsdp" : "MQTT";
  connect.version = version;
  connect.client_id = client_id;
  connect.clean_start = clean_start;
  connect.keep_alive = keep_alive;
  connect.properties = std::move(properties);
  Send(connect);
  auto reply = Receive();
  if (!reply || !std::holds_alternative<mqtt::ConnackPacket>(*reply)) return std::nullopt;
  return std::get<mqtt::ConnackPacket>(*reply);
}

std::optional<mqtt::ConnackPacket> RawClient::Connect(const mqtt::ConnectPacket& connect) {
  version = connect.version;
  Send(connect);
  return ReceiveAs<mqtt::ConnackPacket>();
}

namespace {

// Whether `received` holds a whole reply: the header and Content-Length
// bytes of body (a reply without the field ends when the peer closes).
bool WholeReply(const std::string& received) {
  const size_t end = received.find("\r\n\r\n");
  const size_t field = received.find("ontent-Length:");
  if (end == std::string::npos || field == std::string::npos || field > end) return false;
  return received.size() - end - 4 >= std::strtoul(received.c_str() + field + 14, nullptr, 10);
}

std::string& AdminToken() {
  static std::string token;
  return token;
}

}  // namespace

void SetAdminToken(std::string token) { AdminToken() = std::move(token); }

HttpResult HttpRequest(const std::string& host, uint16_t port, const std::string& method, const std::string& path,
                       std::chrono::milliseconds timeout) {
  HttpResult result;
  const int fd = ConnectTcp(host, port);
  if (fd < 0) return result;
  std::string request = method + " " + path + " HTTP/1.1\r\nHost: " + host +
                        "\r\nConnection: close\r\nContent-Length: 0\r\n";
  if (!AdminToken().empty()) request += "Authorization: Bearer " + AdminToken() + "\r\n";
  request += "\r\n";
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string received;
  bool whole = false;
  while (!whole) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd poll_fd{fd, POLLIN, 0};
    const int ready = ::poll(&poll_fd, 1, std::max(0, static_cast<int>(left.count())));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    char chunk[65536];
    const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      whole = true;  // closed by the server: the reply is complete
      break;
    }
    received.append(chunk, static_cast<size_t>(n));
    whole = WholeReply(received);
  }
  ::close(fd);
  const size_t end = received.find("\r\n\r\n");
  if (!whole || received.rfind("HTTP/1.", 0) != 0 || end == std::string::npos) return result;
  result.status = std::atoi(received.c_str() + received.find(' ') + 1);
  result.body = received.substr(end + 4);
  return result;
}

}  // namespace estuary::testing
