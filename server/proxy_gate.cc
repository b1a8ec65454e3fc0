#include "server/proxy_gate.h"

#include <arpa/inet.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "balancer/proxy_protocol.h"

namespace estuary::server {

struct ProxyGate::Pending {
  ProxyGate* gate = nullptr;
  uv_poll_t poll{};
  int fd = -1;
  Next next;
  io::TimerId timer = 0;
  std::string header;          // the header bytes read so far
  std::string client_address;  // set when the header was read
  bool pass = false;           // hand the fd on from the close callback
};

ProxyGate::ProxyGate(io::UvLoop& loop, std::vector<std::string> trusted, int64_t timeout_ms)
    : loop_(loop), trusted_(std::move(trusted)), timeout_ms_(timeout_ms) {}

ProxyGate::~ProxyGate() {
  // Sockets still waiting for a header are closed; their poll handles are
  // closed by the loop's shutdown (they are plain handles on raw()).
  for (Pending* pending : pending_) Finish(pending, {});
}

bool ProxyGate::Trusted(int fd) const {
  sockaddr_storage peer{};
  socklen_t length = sizeof(peer);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length) != 0) return false;
  char text[INET6_ADDRSTRLEN] = {};
  if (peer.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&peer)->sin_addr, text, sizeof(text));
  } else if (peer.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&peer)->sin6_addr, text, sizeof(text));
  }
  return std::find(trusted_.begin(), trusted_.end(), std::string(text)) != trusted_.end();
}

void ProxyGate::Accept(int fd, Next next) {
  if (!enabled() || !Trusted(fd)) return next(fd, {});
  auto* pending = new Pending;
  pending->gate = this;
  pending->fd = fd;
  pending->next = std::move(next);
  if (uv_poll_init_socket(loop_.raw(), &pending->poll, fd) != 0) {
    ::close(fd);
    delete pending;
    return;
  }
  pending->poll.data = pending;
  pending_.push_back(pending);
  uv_poll_start(&pending->poll, UV_READABLE, [](uv_poll_t* handle, int, int) {
    auto* self = static_cast<Pending*>(handle->data);
    self->gate->OnReadable(self);
  });
  pending->timer = loop_.AddTimer(timeout_ms_, [this, pending] {
    pending->timer = 0;
    spdlog::debug("proxy: no PROXY v2 header from a balancer in time; closing");
    ++refused_;
    Finish(pending, {});
  });
}

// Reads only bytes that belong to the header (the fixed 16 first, then the
// length they announce), so the protocol bytes behind it stay in the socket
// and a partial header does not leave the socket readable (no busy poll).
void ProxyGate::OnReadable(Pending* pending) {
  std::string& header = pending->header;
  size_t want = proxy::kFixedBytes;
  if (header.size() >= proxy::kFixedBytes) {
    want += (size_t(uint8_t(header[14])) << 8) | uint8_t(header[15]);
  }
  char buffer[proxy::kMaxHeaderBytes];
  const size_t room = std::min(want > header.size() ? want - header.size() : 0, sizeof(buffer));
  const ssize_t n = room == 0 ? 0 : ::recv(pending->fd, buffer, room, 0);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n > 0) header.append(buffer, size_t(n));
  proxy::DecodeResult result = proxy::Decode(header);
  if (n > 0 && result.status == proxy::DecodeStatus::kNeedMore) return;
  if (result.status != proxy::DecodeStatus::kComplete) {
    spdlog::debug("proxy: connection from a balancer address without a PROXY v2 header ({}); closing",
                  n <= 0 ? "closed" : result.error);
    ++refused_;
    return Finish(pending, {});
  }
  pending->pass = true;
  ++proxied_;
  Finish(pending, result.header.local ? "" : result.header.source.ToString());
}

void ProxyGate::Finish(Pending* pending, std::string client_address) {
  pending_.erase(std::remove(pending_.begin(), pending_.end(), pending), pending_.end());
  if (pending->timer != 0) loop_.CancelTimer(pending->timer);
  pending->timer = 0;
  pending->client_address = std::move(client_address);
  // The socket is handed on (or closed) only once the poll handle is gone,
  // so that no two libuv handles ever watch one descriptor.
  uv_close(reinterpret_cast<uv_handle_t*>(&pending->poll), [](uv_handle_t* handle) {
    std::unique_ptr<Pending> self(static_cast<Pending*>(handle->data));
    if (self->pass && self->next) {
      self->next(self->fd, std::move(self->client_address));
    } else {
      ::close(self->fd);
    }
  });
}

}  // namespace estuary::server
