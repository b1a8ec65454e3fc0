#include "tools/cluster/http_get.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <utility>

namespace estuary::launcher {
namespace {

using Clock = std::chrono::steady_clock;

std::string& BearerToken() {
  static std::string token;
  return token;
}

int MillisecondsLeft(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

// Waits until `fd` is ready for `events` or the deadline passes.
bool WaitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd poll_fd{fd, events, 0};
    const int ready = ::poll(&poll_fd, 1, MillisecondsLeft(deadline));
    if (ready < 0 && errno == EINTR) continue;
    return ready > 0;
  }
}

int Connect(const std::string& host, uint16_t port, Clock::time_point deadline) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1) return -1;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 && errno != EINPROGRESS) {
    ::close(fd);
    return -1;
  }
  int error = 0;
  socklen_t length = sizeof(error);
  if (!WaitFor(fd, POLLOUT, deadline) || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0 ||
      error != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::optional<HttpReply> Parse(const std::string& received) {
  const size_t end_of_headers = received.find("\r\n\r\n");
  if (received.rfind("HTTP/1.", 0) != 0 || end_of_headers == std::string::npos) return std::nullopt;
  HttpReply reply;
  reply.status = std::atoi(received.c_str() + received.find(' ') + 1);
  reply.body = received.substr(end_of_headers + 4);
  return reply;
}

// True once `received` holds the headers and Content-Length bytes of body.
bool Complete(const std::string& received) {
  const size_t end_of_headers = received.find("\r\n\r\n");
  if (end_of_headers == std::string::npos) return false;
  std::string headers = received.substr(0, end_of_headers);
  for (auto& c : headers) c = char(std::tolower(static_cast<unsigned char>(c)));
  const size_t field = headers.find("\r\ncontent-length:");
  if (field == std::string::npos) return false;
  const size_t length = std::strtoul(headers.c_str() + field + 17, nullptr, 10);
  return received.size() - end_of_headers - 4 >= length;
}

}  // namespace

std::pair<std::string, uint16_t> SplitAddress(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return {address, 0};
  const long port = std::strtol(address.c_str() + colon + 1, nullptr, 10);
  return {address.substr(0, colon), port > 0 && port < 65536 ? uint16_t(port) : uint16_t(0)};
}

void SetBearerToken(std::string token) { BearerToken() = std::move(token); }

std::optional<HttpReply> HttpGet(const std::string& host, uint16_t port, const std::string& path,
                                 std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  const int fd = Connect(host, port, deadline);
  if (fd < 0) return std::nullopt;
  std::string request = "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n";
  if (!BearerToken().empty()) request += "Authorization: Bearer " + BearerToken() + "\r\n";
  request += "\r\n";
  size_t sent = 0;
  while (sent < request.size() && WaitFor(fd, POLLOUT, deadline)) {
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;
    sent += size_t(n);
  }
  std::string received;
  bool closed = false;
  while (sent == request.size() && !closed && WaitFor(fd, POLLIN, deadline)) {
    char chunk[4096];
    const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      closed = true;
    } else {
      received.append(chunk, size_t(n));
      closed = Complete(received);
    }
  }
  ::close(fd);
  if (!closed) return std::nullopt;
  return Parse(received);
}

}  // namespace estuary::launcher
