// TcpListener: the socket is made by hand (SO_REUSEADDR + SO_REUSEPORT,
// which libuv 1.44 cannot set before bind) and watched with a uv_poll_t;
// accept4() hands out plain fds, so no temporary uv_tcp_t per connection.
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "base/check.h"
#include "io/uv/sockaddr.h"
#include "io/uv/tcp.h"

namespace estuary::io {
namespace {

constexpr int kBacklog = SOMAXCONN;
constexpr int kAcceptsPerWakeup = 64;    // then let other handles run
constexpr int64_t kAcceptBackoffMs = 50;  // after EMFILE and friends

// Errors that belong to one connection (already gone, or a pending network
// error reported by accept): skip it and accept the next one.
bool IsPerConnectionError(int error) {
  switch (error) {
    case EINTR:
    case ECONNABORTED:
    case EPROTO:
    case EPERM:
    case ENETDOWN:
    case ENOPROTOOPT:
    case EHOSTDOWN:
    case ENONET:
    case EHOSTUNREACH:
    case EOPNOTSUPP:
    case ENETUNREACH:
      return true;
    default:
      return false;
  }
}

std::string SystemError(const std::string& what, int error) { return what + ": " + std::strerror(error); }

}  // namespace

class TcpListener::State final : public UvLoop::HandleOwner {
 public:
  State(UvLoop& loop_in, int fd_in, OnAccept on_accept_in)
      : loop(loop_in), fd(fd_in), on_accept(std::move(on_accept_in)) {}

  bool Start();
  void OnReadable();
  void Backoff();
  void BeginClose();
  void CloseForShutdown() override;

  UvLoop& loop;
  int fd;
  OnAccept on_accept;
  TcpListener* owner = nullptr;  // null once closing
  uv_poll_t poll{};
  bool closing = false;
  TimerId backoff_timer = 0;
  uint64_t accept_failures = 0;
};

bool TcpListener::State::Start() {
  if (uv_poll_init_socket(loop.raw(), &poll, fd) != 0) return false;
  poll.data = this;
  loop.RegisterOwner(this);
  ESTUARY_CHECK(uv_poll_start(&poll, UV_READABLE, [](uv_poll_t* handle, int, int) {
                     static_cast<State*>(handle->data)->OnReadable();
                   }) == 0);
  return true;
}

void TcpListener::State::OnReadable() {
  for (int i = 0; i < kAcceptsPerWakeup && !closing; ++i) {
    int accepted = ::accept4(fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (accepted >= 0) {
      // on_accept may close or destroy the listener; `closing` then ends the
      // loop and this State lives on until the close callback.
      if (on_accept) {
        on_accept(accepted);
      } else {
        ::close(accepted);
      }
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    if (IsPerConnectionError(errno)) continue;
    // Out of descriptors or memory: the socket stays readable, so polling
    // on would spin. Pause; the backlog holds the connections meanwhile.
    ++accept_failures;
    if (owner != nullptr) owner->accept_failures_ = accept_failures;
    return Backoff();
  }
}

void TcpListener::State::Backoff() {
  uv_poll_stop(&poll);
  backoff_timer = loop.AddTimer(kAcceptBackoffMs, [this] {
    backoff_timer = 0;
    if (!closing) {
      uv_poll_start(&poll, UV_READABLE, [](uv_poll_t* handle, int, int) {
        static_cast<State*>(handle->data)->OnReadable();
      });
    }
  });
}

void TcpListener::State::BeginClose() {
  if (closing) return;
  closing = true;
  if (owner != nullptr) {
    owner->accept_failures_ = accept_failures;
    owner->state_.release();  // from here on the close callback owns this State
    owner = nullptr;
  }
  if (backoff_timer != 0) loop.CancelTimer(backoff_timer);
  backoff_timer = 0;
  uv_close(reinterpret_cast<uv_handle_t*>(&poll), [](uv_handle_t* handle) {
    auto* state = static_cast<State*>(handle->data);
    state->loop.UnregisterOwner(state);
    ::close(state->fd);  // uv_poll never owns its fd
    delete state;
  });
}

void TcpListener::State::CloseForShutdown() {
  on_accept = nullptr;
  BeginClose();
}

Expected<std::unique_ptr<TcpListener>, std::string> TcpListener::Listen(UvLoop& loop, const Endpoint& at,
                                                                        OnAccept on_accept) {
  auto address = detail::ResolveBlocking(at);
  if (!address) return MakeError("listen on " + at.ToString() + ": " + address.error());
  const std::string where = "listen on " + at.ToString();
  int fd = ::socket(address->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return MakeError(SystemError(where + ": socket", errno));
  int one = 1;
  if (::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) {
    int error = errno;
    ::close(fd);
    return MakeError(SystemError(where + ": setsockopt", error));
  }
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&*address), detail::AddressLength(*address)) != 0 ||
      ::listen(fd, kBacklog) != 0) {
    int error = errno;
    ::close(fd);
    return MakeError(SystemError(where, error));
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
  uint16_t port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                    : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);

  std::unique_ptr<TcpListener> listener(new TcpListener());
  listener->state_ = std::make_unique<State>(loop, fd, std::move(on_accept));
  listener->state_->owner = listener.get();
  listener->port_ = port;
  if (!listener->state_->Start()) {
    listener->state_.reset();
    ::close(fd);
    return MakeError(where + ": cannot watch the socket");
  }
  return listener;
}

uint16_t TcpListener::port() const { return port_; }

uint64_t TcpListener::accept_failures() const { return accept_failures_; }

void TcpListener::Close() {
  if (state_) state_->BeginClose();
}

TcpListener::~TcpListener() { Close(); }

}  // namespace estuary::io
