#include "tools/ctl/http_client.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string_view>

#include "io/tls/tls_context.h"
#include "io/tls/tls_session.h"

namespace estuary::ctl {
namespace {

class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

// Connects with a deadline (non-blocking connect + poll).
Expected<int, std::string> ConnectTo(const addrinfo* address, int timeout_ms) {
  const int fd = ::socket(address->ai_family, address->ai_socktype | SOCK_CLOEXEC, address->ai_protocol);
  if (fd < 0) return MakeError(std::string(std::strerror(errno)));
  const int flags = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  int rc = ::connect(fd, address->ai_addr, address->ai_addrlen);
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd pfd{fd, POLLOUT, 0};
    rc = ::poll(&pfd, 1, timeout_ms);
    if (rc == 0) {
      ::close(fd);
      return MakeError(std::string("connect timed out"));
    }
    int error = 0;
    socklen_t size = sizeof(error);
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size);
    rc = error == 0 ? 0 : -1;
    errno = error;
  }
  if (rc != 0) {
    const std::string message = std::strerror(errno);
    ::close(fd);
    return MakeError(message);
  }
  ::fcntl(fd, F_SETFL, flags);
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  return fd;
}

Expected<int, std::string> Dial(const std::string& host, uint16_t port, int timeout_ms) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return MakeError(std::string(::gai_strerror(rc)));
  }
  Expected<int, std::string> result = MakeError(std::string("no address"));
  for (addrinfo* address = found; address != nullptr; address = address->ai_next) {
    result = ConnectTo(address, timeout_ms);
    if (result) break;
  }
  ::freeaddrinfo(found);
  return result;
}

struct ParsedReply : HttpReply {
  bool complete = false;  // a Content-Length body fully arrived
};

Expected<ParsedReply, std::string> Parse(std::string_view raw) {
  const size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string_view::npos) return MakeError(std::string("incomplete HTTP response"));
  std::string_view head = raw.substr(0, head_end);
  ParsedReply reply;
  // "HTTP/1.1 200 OK"
  const size_t space = head.find(' ');
  if (!head.starts_with("HTTP/1.") || space == std::string_view::npos || head.size() < space + 4) {
    return MakeError(std::string("not an HTTP response"));
  }
  reply.status = std::atoi(std::string(head.substr(space + 1, 3)).c_str());
  size_t content_length = std::string_view::npos;
  size_t line_start = head.find("\r\n");
  while (line_start != std::string_view::npos) {
    line_start += 2;
    const size_t line_end = head.find("\r\n", line_start);
    std::string line(head.substr(line_start, line_end - line_start));
    const size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::string value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(' '));
      if (name == "content-type") reply.content_type = value;
      if (name == "content-length") content_length = std::strtoul(value.c_str(), nullptr, 10);
    }
    line_start = line_end;
  }
  std::string_view body = raw.substr(head_end + 4);
  if (content_length != std::string_view::npos) {
    if (body.size() < content_length) return MakeError(std::string("response body cut short"));
    body = body.substr(0, content_length);
    reply.complete = true;
  }
  reply.body = std::string(body);
  return reply;
}

std::string& BearerToken() {
  static std::string token;
  return token;
}

std::string& AdminCa() {
  static std::string ca;
  return ca;
}

// The connection's byte stream: the socket, or TLS over it (--admin-ca).
class Stream {
 public:
  explicit Stream(int fd) : fd_(fd) {}
  ~Stream() {
    if (ssl_ != nullptr) SSL_free(ssl_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // A TLS handshake that verifies the node's certificate against `ca` and
  // its name or IP address against `host`.
  Expected<void, std::string> StartTls(const std::string& ca, const std::string& host) {
    auto context = io::BuildClientContext(ca);
    if (!context) return MakeError("--admin-ca " + context.error());
    context_ = std::move(*context);
    ssl_ = SSL_new(context_.get());
    SSL_set_fd(ssl_, fd_);
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl_);
    if (X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) != 1) {
      SSL_set_tlsext_host_name(ssl_, host.c_str());
      SSL_set1_host(ssl_, host.c_str());
    }
    if (SSL_connect(ssl_) != 1) {
      const long verified = SSL_get_verify_result(ssl_);
      if (verified != X509_V_OK) {
        return MakeError(std::string("TLS: the node's certificate: ") + X509_verify_cert_error_string(verified));
      }
      return MakeError("TLS: " + io::OpenSslErrors());
    }
    return {};
  }
  ssize_t Send(const char* data, size_t size) {
    if (ssl_ == nullptr) return ::send(fd_, data, size, MSG_NOSIGNAL);
    size_t written = 0;
    return SSL_write_ex(ssl_, data, size, &written) == 1 ? ssize_t(written) : -1;
  }
  // 0 at the end of the stream, -1 on an error (errno set for sockets).
  ssize_t Receive(char* data, size_t size) {
    if (ssl_ == nullptr) return ::recv(fd_, data, size, 0);
    size_t got = 0;
    if (SSL_read_ex(ssl_, data, size, &got) == 1) return ssize_t(got);
    const int error = SSL_get_error(ssl_, 0);
    if (error == SSL_ERROR_ZERO_RETURN) return 0;
    if (error == SSL_ERROR_SYSCALL && errno == 0) return 0;  // closed without close_notify
    return -1;
  }

 private:
  int fd_;
  std::shared_ptr<ssl_ctx_st> context_;
  SSL* ssl_ = nullptr;
};

}  // namespace

void SetBearerToken(std::string token) { BearerToken() = std::move(token); }

void SetAdminCa(std::string ca_file) { AdminCa() = std::move(ca_file); }

Expected<HttpReply, std::string> HttpRequest(const std::string& host, uint16_t port, const std::string& method,
                                             const std::string& target, int timeout_ms) {
  auto fd = Dial(host, port, timeout_ms);
  if (!fd) return MakeError(fd.error());
  Socket socket(*fd);
  std::string request = method + " " + target + " HTTP/1.1\r\nHost: " + host + ":" + std::to_string(port) +
                        "\r\nConnection: close\r\nContent-Length: 0\r\nUser-Agent: estuaryctl\r\n";
  if (!BearerToken().empty()) request += "Authorization: Bearer " + BearerToken() + "\r\n";
  request += "\r\n";
  Stream stream(socket.fd());
  if (!AdminCa().empty()) {
    if (auto started = stream.StartTls(AdminCa(), host); !started) return MakeError(started.error());
  }
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = stream.Send(request.data() + sent, request.size() - sent);
    if (n <= 0) return MakeError(std::string("send: ") + std::strerror(errno));
    sent += static_cast<size_t>(n);
  }
  std::string raw;
  char buffer[16384];
  for (;;) {
    errno = 0;
    const ssize_t n = stream.Receive(buffer, sizeof(buffer));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return MakeError(std::string("no answer (timed out)"));
      return MakeError(std::string("receive: ") + std::strerror(errno));
    }
    raw.append(buffer, static_cast<size_t>(n));
    if (raw.size() > (64u << 20)) return MakeError(std::string("response too large"));
    if (auto reply = Parse(raw); reply && reply->complete) break;  // even if the server keeps the connection
  }
  auto reply = Parse(raw);
  if (!reply) return MakeError(reply.error());
  return HttpReply(*reply);
}

}  // namespace estuary::ctl
