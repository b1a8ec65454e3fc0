#include "balancer/proxy_connection.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "balancer/connect_peek.h"
#include "balancer/proxy_protocol.h"
#include "io/uv/tcp.h"

namespace estuary::balancer {
namespace {

// "ip" and port of a socket address; false for other families.
bool SplitAddress(const sockaddr_storage& address, proxy::Address& out) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    out = {text, ntohs(in->sin_port)};
    return true;
  }
  if (address.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address);
    inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
    out = {text, ntohs(in6->sin6_port)};
    return true;
  }
  return false;
}

bool ToSockaddr(const std::string& address_text, sockaddr_storage& out) {
  auto endpoint = io::ParseEndpoint(address_text);
  if (!endpoint) return false;
  std::string host = endpoint->host == "localhost" ? "127.0.0.1" : endpoint->host;
  if (uv_ip4_addr(host.c_str(), endpoint->port, reinterpret_cast<sockaddr_in*>(&out)) == 0) return true;
  return uv_ip6_addr(host.c_str(), endpoint->port, reinterpret_cast<sockaddr_in6*>(&out)) == 0;
}

}  // namespace

struct ProxyConnection::Side {
  explicit Side(ProxyConnection& owner_in) : owner(owner_in) {
    tcp.data = this;
    write_req.data = this;
    shutdown_req.data = this;
    connect_req.data = this;
  }
  size_t queued() const { return pending.size() + in_flight.size(); }
  uv_stream_t* stream() { return reinterpret_cast<uv_stream_t*>(&tcp); }
  uv_handle_t* handle() { return reinterpret_cast<uv_handle_t*>(&tcp); }

  ProxyConnection& owner;
  uv_tcp_t tcp{};
  uv_write_t write_req{};
  uv_shutdown_t shutdown_req{};
  uv_connect_t connect_req{};
  std::string pending;    // waiting behind the write in flight
  std::string in_flight;  // owned by the uv_write in flight
  bool write_in_flight = false;
  bool reading = false;
  bool blocked = false;  // not read: the other side's queue is over the high watermark
  bool eof = false;      // this side sent FIN
  bool shutdown_sent = false;
  bool shutdown_done = false;
  bool connected = false;
  bool closing = false;
};

ProxyConnection* ProxyConnection::Start(io::UvLoop& loop, int fd, Service service, const ProxyOptions& options,
                            const ProxyHost& host) {
  auto* connection = new ProxyConnection(loop, service, options, host);
  if (!connection->OpenClient(fd)) return connection;  // it is closing itself
  if (service == Service::kMqtt) {
    connection->timer_ = loop.AddTimer(options.connect_timeout_ms, [connection] {
      connection->timer_ = 0;
      connection->End("dropped: no complete CONNECT in time", false);
    });
    connection->StartReading(*connection->client_);
  } else {
    connection->phase_ = Phase::kDialing;
    connection->Dial();
  }
  return connection;
}

ProxyConnection::ProxyConnection(io::UvLoop& loop, Service service, const ProxyOptions& options,
                                 const ProxyHost& host)
    : loop_(loop), service_(service), options_(options), host_(host) {
  loop_.RegisterOwner(this);
}

ProxyConnection::~ProxyConnection() { loop_.UnregisterOwner(this); }

bool ProxyConnection::OpenClient(int fd) {
  client_ = new Side(*this);
  uv_tcp_init(loop_.raw(), &client_->tcp);
  ++open_sides_;
  client_->connected = true;
  if (uv_tcp_open(&client_->tcp, fd) != 0) {
    ::close(fd);
    client_->connected = false;
    End("dropped: cannot adopt the socket", false);
    return false;
  }
  uv_tcp_nodelay(&client_->tcp, 1);
  sockaddr_storage peer{}, local{};
  int length = sizeof(peer);
  proxy::Address source, destination;
  bool known = uv_tcp_getpeername(&client_->tcp, reinterpret_cast<sockaddr*>(&peer), &length) == 0 &&
               SplitAddress(peer, source);
  length = sizeof(local);
  known = known && uv_tcp_getsockname(&client_->tcp, reinterpret_cast<sockaddr*>(&local), &length) == 0 &&
          SplitAddress(local, destination);
  stats_.client = known ? source.ToString() : "?";
  if (options_.send_proxy_header) {
    auto header = known ? proxy::Encode(source, destination) : MakeError(std::string("unknown address"));
    proxy_header_ = header ? *header : proxy::EncodeLocal();
  }
  return true;
}

// ---- before the node: the CONNECT, the choice, the dial ------------------

void ProxyConnection::OnClientBytes(std::string_view bytes) {
  initial_.append(bytes);
  const PeekResult peek = PeekConnect(initial_, options_.connect_max_bytes);
  switch (peek.status) {
    case PeekStatus::kNeedMore:
      if (initial_.size() >= options_.connect_max_bytes) End("dropped: CONNECT over the size limit", false);
      return;
    case PeekStatus::kReject:
      return End("dropped: " + peek.why, false);
    case PeekStatus::kClientId:
      client_id_ = peek.client_id;
      break;
    case PeekStatus::kOpaque:
    case PeekStatus::kForward:
      break;
  }
  CancelTimer();
  phase_ = Phase::kDialing;
  StopReading(*client_);
  Dial();
}

void ProxyConnection::Dial() {
  // A dial that fails at once (an address libuv refuses) moves on to the
  // next node here; one that fails later comes back through OnDialed.
  while (tried_.size() < options_.dial_attempts) {
    std::optional<Choice> choice = host_.choose ? host_.choose(service_, client_id_, tried_) : std::nullopt;
    if (!choice) break;
    tried_.push_back(choice->admin);
    stats_.node = choice->admin;
    sockaddr_storage address{};
    node_ = new Side(*this);
    uv_tcp_init(loop_.raw(), &node_->tcp);
    ++open_sides_;
    int rc = ToSockaddr(choice->address, address) ? 0 : UV_EINVAL;
    if (rc == 0) {
      uv_tcp_nodelay(&node_->tcp, 1);
      rc = uv_tcp_connect(&node_->connect_req, &node_->tcp, reinterpret_cast<const sockaddr*>(&address),
                          [](uv_connect_t* req, int status) {
                            auto* side = static_cast<Side*>(req->data);
                            if (!side->closing) side->owner.OnDialed(status);
                          });
    }
    if (rc == 0) {
      timer_ = loop_.AddTimer(options_.dial_timeout_ms, [this] {
        timer_ = 0;
        OnDialed(UV_ETIMEDOUT);
      });
      return;
    }
    if (host_.dial_failed) host_.dial_failed(choice->admin, rc);
    Side* failed = node_;
    node_ = nullptr;
    CloseSide(failed, false);
  }
  End(tried_.empty() ? "no node available" : "no node reachable", false);
}

void ProxyConnection::OnDialed(int status) {
  if (phase_ != Phase::kDialing) return;
  CancelTimer();
  if (status == 0) return StartSplicing();
  if (host_.dial_failed) host_.dial_failed(stats_.node, status);
  Side* failed = node_;
  node_ = nullptr;
  CloseSide(failed, false);
  Dial();
}

void ProxyConnection::StartSplicing() {
  phase_ = Phase::kSplicing;
  node_->connected = true;
  stats_.bytes_to_node += initial_.size();
  std::string first = std::move(proxy_header_);
  first += initial_;
  std::string().swap(initial_);
  Forward(*node_, first);
  if (!client_->blocked) StartReading(*client_);
  StartReading(*node_);
}

// ---- copying ---------------------------------------------------------------

void ProxyConnection::StartReading(Side& side) {
  if (side.reading || side.closing || side.eof) return;
  int rc = uv_read_start(
      side.stream(),
      [](uv_handle_t* handle, size_t, uv_buf_t* buf) {
        *buf = static_cast<Side*>(handle->data)->owner.loop_.read_buffer();
      },
      [](uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
        auto* from = static_cast<Side*>(stream->data);
        from->owner.OnRead(*from, nread, buf);
      });
  if (rc != 0) return End("reset: cannot read", true);
  side.reading = true;
}

void ProxyConnection::StopReading(Side& side) {
  if (!side.reading || side.closing) return;
  uv_read_stop(side.stream());
  side.reading = false;
}

void ProxyConnection::OnRead(Side& from, ssize_t nread, const uv_buf_t* buf) {
  if (nread == 0 || phase_ == Phase::kEnding) return;
  if (nread > 0) {
    const std::string_view bytes(buf->base, static_cast<size_t>(nread));
    if (phase_ == Phase::kPeeking) return OnClientBytes(bytes);
    if (&from == client_) {
      stats_.bytes_to_node += bytes.size();
    } else {
      stats_.bytes_to_client += bytes.size();
    }
    return Forward(*Other(from), bytes);
  }
  if (nread == UV_EOF && phase_ == Phase::kSplicing) return OnEof(from);
  if (nread == UV_EOF) return End("dropped: closed before CONNECT", false);
  End(std::string("reset: ") + uv_err_name(static_cast<int>(nread)), true);
}

void ProxyConnection::Forward(Side& to, std::string_view bytes) {
  if (bytes.empty() || to.closing || to.shutdown_sent) return;
  if (!to.write_in_flight && to.pending.empty()) {
    // The common case: the socket takes it all now, with no copy.
    uv_buf_t buf = uv_buf_init(const_cast<char*>(bytes.data()), static_cast<unsigned>(bytes.size()));
    const int written = uv_try_write(to.stream(), &buf, 1);
    if (written > 0) bytes.remove_prefix(static_cast<size_t>(written));
    if (written < 0 && written != UV_EAGAIN) return End(std::string("reset: ") + uv_err_name(written), true);
    if (bytes.empty()) return;
  }
  to.pending.append(bytes);
  if (!to.write_in_flight) IssueWrite(to);
  Side& from = *Other(to);
  if (to.queued() > options_.high_watermark && !from.blocked) {
    from.blocked = true;
    StopReading(from);
  }
}

void ProxyConnection::IssueWrite(Side& to) {
  to.in_flight.swap(to.pending);
  uv_buf_t buf = uv_buf_init(to.in_flight.data(), static_cast<unsigned>(to.in_flight.size()));
  const int rc = uv_write(&to.write_req, to.stream(), &buf, 1, [](uv_write_t* req, int status) {
    auto* side = static_cast<Side*>(req->data);
    side->owner.OnWriteDone(*side, status);
  });
  if (rc != 0) return End(std::string("reset: ") + uv_err_name(rc), true);
  to.write_in_flight = true;
}

void ProxyConnection::OnWriteDone(Side& to, int status) {
  to.write_in_flight = false;
  to.in_flight.clear();
  if (to.in_flight.capacity() > options_.high_watermark) std::string().swap(to.in_flight);
  if (status == UV_ECANCELED || phase_ == Phase::kEnding) return;
  if (status < 0) return End(std::string("reset: ") + uv_err_name(status), true);
  if (!to.pending.empty()) IssueWrite(to);
  Side& from = *Other(to);
  if (from.blocked && to.queued() < options_.low_watermark) {
    from.blocked = false;
    StartReading(from);
  }
  MaybeShutdown(to);
}

void ProxyConnection::OnEof(Side& from) {
  StopReading(from);
  from.eof = true;
  MaybeShutdown(*Other(from));
  MaybeFinish();
}

// Passes a FIN on once everything before it was written.
void ProxyConnection::MaybeShutdown(Side& to) {
  if (!Other(to)->eof || to.shutdown_sent || to.queued() != 0 || to.closing) return;
  to.shutdown_sent = true;
  const int rc = uv_shutdown(&to.shutdown_req, to.stream(), [](uv_shutdown_t* req, int status) {
    auto* side = static_cast<Side*>(req->data);
    side->owner.OnShutdownDone(*side, status);
  });
  if (rc != 0) End(std::string("reset: ") + uv_err_name(rc), true);
}

void ProxyConnection::OnShutdownDone(Side& to, int status) {
  if (status == UV_ECANCELED || phase_ == Phase::kEnding) return;
  if (status < 0) return End(std::string("reset: ") + uv_err_name(status), true);
  to.shutdown_done = true;
  MaybeFinish();
}

void ProxyConnection::MaybeFinish() {
  if (client_ == nullptr || node_ == nullptr) return;
  if (client_->eof && node_->eof && client_->shutdown_done && node_->shutdown_done) End("closed", false);
}

// ---- ending ----------------------------------------------------------------

void ProxyConnection::End(std::string outcome, bool reset) {
  if (phase_ == Phase::kEnding) return;
  phase_ = Phase::kEnding;
  CancelTimer();
  stats_.outcome = std::move(outcome);
  Side* client = client_;
  Side* node = node_;
  CloseSide(client, reset);
  CloseSide(node, reset);
}

void ProxyConnection::Abort() { End("reset: balancer stopped", true); }

void ProxyConnection::CloseForShutdown() {
  notify_ = false;
  End("shutdown", false);
}

void ProxyConnection::CloseSide(Side* side, bool reset) {
  if (side == nullptr || side->closing) return;
  side->closing = true;
  side->reading = false;
  auto on_closed = [](uv_handle_t* handle) {
    auto* closed = static_cast<Side*>(handle->data);
    closed->owner.OnSideClosed(closed);
  };
  if (reset && side->connected) {
    if (uv_tcp_close_reset(&side->tcp, on_closed) == 0) return;
    // A shutdown in progress makes libuv refuse; on Linux a linger of 0
    // resets all the same.
    int fd = -1;
    if (uv_fileno(side->handle(), &fd) == 0) {
      linger zero{1, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &zero, sizeof(zero));
    }
  }
  uv_close(side->handle(), on_closed);
}

void ProxyConnection::OnSideClosed(Side* side) {
  if (client_ == side) client_ = nullptr;
  if (node_ == side) node_ = nullptr;
  delete side;
  if (--open_sides_ > 0) return;
  if (notify_ && host_.finished) host_.finished(this, stats_);
  delete this;
}

void ProxyConnection::CancelTimer() {
  if (timer_ != 0) loop_.CancelTimer(timer_);
  timer_ = 0;
}

}  // namespace estuary::balancer
