#include "cluster-core/links/uv_transport.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "io/tls/tls_session.h"

namespace estuary::cluster {
namespace {

enum class LinkState {
  kConnecting,  // dialled, TCP connect in progress
  kTls,         // TLS handshake (config.tls)
  kAwaitHello,  // waiting for the peer's hello
  kAwaitAuth,   // hellos exchanged, waiting for the peer's MAC
  kUp,          // authenticated: cluster frames flow
  kClosed,      // forgotten by the transport (the socket may still be draining)
};

constexpr int64_t kLinkCloseTimeoutMs = 1000;
constexpr size_t kEncryptNowBytes = 256 * 1024;  // TLS: plaintext frames waiting for the iteration's encryption

}  // namespace

struct UvTransport::Link : std::enable_shared_from_this<Link> {
  uint64_t id = 0;
  std::shared_ptr<io::TcpConnection> connection;
  bool dialled = false;
  std::string dial_address;  // the Dialer this link belongs to, if dialled
  std::string remote;        // for logs: the socket's peer address
  LinkState state = LinkState::kConnecting;
  wire::FrameReader reader;
  wire::Nonce our_nonce{};
  wire::Nonce their_nonce{};
  NodeId node = 0;          // from the peer's hello
  std::string advertised;   // the peer's cluster address, from its hello
  uint8_t minor = 0;        // the link protocol minor of its hello
  int64_t started_ms = 0;
  int64_t last_received_ms = 0;
  int64_t last_sent_ms = 0;   // as of the last tick (see sent_since_tick)
  bool sent_since_tick = false;  // a frame was written since: the tick stamps last_sent_ms
  uint64_t writes_at_up = 0;
  bool want_writable = false;  // Send returned kFull
  // config.tls: the session; frames wait in plaintext_out until one
  // encryption per loop iteration (few records for a burst of frames).
  std::unique_ptr<io::TlsSession> tls;
  std::string plaintext_out;
  bool encrypt_posted = false;
};

struct UvTransport::Dialer {
  std::string address;
  io::Endpoint endpoint;
  NodeId node = 0;  // the node last found behind the address
  LinkPtr link;     // the link being dialled or up through this dialer
  uint32_t attempts = 0;
  io::TimerId timer = 0;
  bool leads_to_self = false;
};

struct UvTransport::Peer {
  std::string address;
  LinkPtr link;  // the authenticated link, or null
  uint64_t frames_in = 0, frames_out = 0, bytes_in = 0, bytes_out = 0;
  uint64_t writes_done = 0;  // of links already closed
  uint64_t ups = 0;
};

UvTransport::UvTransport(io::UvLoop& loop, UvTransportConfig config)
    : loop_(loop), config_(std::move(config)), random_(config_.seed) {
  if (2 * uint64_t{config_.heartbeat_ms} > config_.dead_after_ms) {
    spdlog::warn("links: heartbeat_ms {} is more than half of dead_after_ms {}: idle links may flap",
                 config_.heartbeat_ms, config_.dead_after_ms);
  }
  Tick();  // schedules the periodic tick
}

UvTransport::~UvTransport() { Close(); }

Expected<uint16_t, std::string> UvTransport::Listen(const io::Endpoint& at) {
  if (closed_) return MakeError(std::string("cluster links: transport closed"));
  if (config_.secret.empty()) return MakeError(std::string("cluster links: the cluster secret is empty"));
  auto listener = io::TcpListener::Listen(loop_, at, [this](int fd) { Accept(fd); });
  if (!listener) return MakeError("cluster links: " + listener.error());
  listener_ = std::move(*listener);
  // Port 0 was asked for: the hello must carry the port really bound.
  auto advertised = io::ParseEndpoint(config_.advertised_address);
  if (config_.advertised_address.empty()) {
    config_.advertised_address = io::Endpoint{at.host, listener_->port()}.ToString();
  } else if (advertised && advertised->port == 0) {
    config_.advertised_address = io::Endpoint{advertised->host, listener_->port()}.ToString();
  }
  return listener_->port();
}

void UvTransport::Close() {
  if (closed_) return;
  closed_ = true;
  if (listener_) listener_->Close();
  listener_.reset();
  loop_.CancelTimer(tick_timer_);
  for (auto& [address, dialer] : dialers_) loop_.CancelTimer(dialer->timer);
  dialers_.clear();
  for (auto& [id, link] : links_) {
    if (link->state == LinkState::kUp) WriteFrame(*link, wire::kError, "node shutting down");
    if (link->tls && link->tls->open()) {
      EncryptPending(*link);
      link->tls->Shutdown();
      link->tls->TakeOutput(link->connection->output_buffer());
      link->connection->MarkDirty();
    }
    link->state = LinkState::kClosed;
    link->connection->SetHandlers({});
    link->connection->Close();
  }
  links_.clear();
  for (auto& [node, peer] : peers_) peer.link.reset();
}

// ---- dialling and accepting --------------------------------------------------

void UvTransport::AddPeerAddress(const std::string& address) {
  // Our own address among the seeds: skipped here; an alias of it is found
  // in the handshake (the hello carries our own id) and not redialled.
  if (closed_ || dialers_.count(address) != 0 || address == config_.advertised_address) return;
  if (config_.secret.empty()) {
    spdlog::error("links: not dialling {}: the cluster secret is empty", address);
    return;
  }
  auto endpoint = io::ParseEndpoint(address);
  if (!endpoint) {
    spdlog::error("links: not dialling: {}", endpoint.error());
    return;
  }
  auto dialer = std::make_unique<Dialer>();
  dialer->address = address;
  dialer->endpoint = *endpoint;
  Dialer& ref = *dialer;
  dialers_[address] = std::move(dialer);
  Dial(ref);
}

void UvTransport::RemovePeer(NodeId node) {
  for (auto it = dialers_.begin(); it != dialers_.end();) {
    Dialer& dialer = *it->second;
    if (dialer.node != node) {
      ++it;
      continue;
    }
    loop_.CancelTimer(dialer.timer);
    LinkPtr pending = dialer.link;
    it = dialers_.erase(it);
    if (pending && pending->state != LinkState::kUp) DropLink(pending, false);
  }
  auto peer = peers_.find(node);
  if (peer != peers_.end() && peer->second.link) DropLink(peer->second.link, false);
}

// The node behind an address is skipped while it is connected through
// another link (it dialled us): one link per pair.
void UvTransport::Dial(Dialer& dialer) {
  if (closed_ || isolated_ || dialer.link || dialer.leads_to_self) return;
  if (dialer.node != 0 && connected(dialer.node)) return;
  auto link = std::make_shared<Link>();
  std::weak_ptr<Link> weak = link;
  link->connection = io::TcpConnection::Connect(loop_, dialer.endpoint, [this, weak](int status) {
    LinkPtr self = weak.lock();
    if (!self || self->state == LinkState::kClosed) return;
    if (status != 0) {
      spdlog::debug("links: dial {} failed: {}", self->dial_address, uv_strerror(status));
      ReportDialFailed(*self, status == UV_ECONNREFUSED ? DialError::kRefused : DialError::kOther,
                       uv_strerror(status));
      return;  // on_close follows and schedules the redial
    }
    self->remote = self->connection->peer_address();
    if (config_.tls) {
      self->tls = config_.tls->NewClientSession();
      self->state = LinkState::kTls;
      self->tls->Connect();
      self->tls->TakeOutput(self->connection->output_buffer());
      self->connection->MarkDirty();
      return;
    }
    self->state = LinkState::kAwaitHello;
    WriteFrame(*self, wire::kHello,
               wire::EncodeHello({.node = config_.self, .address = config_.advertised_address, .nonce = self->our_nonce}));
  });
  link->dialled = true;
  link->dial_address = dialer.address;
  link->remote = dialer.address;
  link->state = LinkState::kConnecting;
  dialer.link = link;
  StartLink(link);
}

void UvTransport::ReportDialFailed(const Link& link, DialError error, const std::string& detail) {
  auto it = dialers_.find(link.dial_address);
  const NodeId node = it != dialers_.end() ? it->second->node : 0;
  ReportDialFailure({.address = link.dial_address, .node = node, .error = error, .detail = detail});
}

void UvTransport::Accept(int fd) {
  if (closed_) return;
  auto link = std::make_shared<Link>();
  link->connection = io::TcpConnection::Adopt(loop_, fd);
  if (!link->connection) return;
  if (isolated_) return link->connection->Abort();  // SetIsolated: refused with a reset
  link->remote = link->connection->peer_address();
  link->state = LinkState::kAwaitHello;
  if (config_.tls) {
    link->tls = config_.tls->NewSession();
    link->state = LinkState::kTls;
  }
  StartLink(link);
}

void UvTransport::StartLink(const LinkPtr& link) {
  link->id = next_link_id_++;
  link->our_nonce = wire::RandomNonce();
  link->started_ms = loop_.NowMs();
  link->last_received_ms = link->started_ms;
  link->last_sent_ms = link->started_ms;
  link->reader.set_max_frame(wire::kHandshakeMaxFrame);
  links_[link->id] = link;
  std::weak_ptr<Link> weak = link;
  io::TcpConnection& connection = *link->connection;
  connection.set_watermarks(config_.queue_low_bytes, config_.queue_high_bytes);
  connection.set_close_timeout(kLinkCloseTimeoutMs);
  connection.SetHandlers({
      .on_data =
          [this, weak](std::string_view bytes) {
            LinkPtr self = weak.lock();
            if (self && self->state != LinkState::kClosed) OnData(self, bytes);
          },
      .on_close =
          [this, weak](int status) {
            LinkPtr self = weak.lock();
            if (!self || self->state == LinkState::kClosed) return;
            if (self->state == LinkState::kUp) {
              spdlog::info("links: link to node {} ({}) closed: {}", self->node, self->remote,
                           status == 0 ? "closed" : uv_strerror(status));
            }
            Forget(self);
          },
      .on_drain =
          [this, weak] {
            LinkPtr self = weak.lock();
            if (!self || self->state != LinkState::kUp || !self->want_writable) return;
            self->want_writable = false;
            if (handler_ != nullptr) handler_->OnWritable(self->node);
          },
  });
}

void UvTransport::ScheduleRedial(Dialer& dialer) {
  if (closed_ || dialer.timer != 0 || dialer.link || dialer.leads_to_self) return;
  uint64_t base = config_.backoff_min_ms;
  for (uint32_t i = 0; i < dialer.attempts && base < config_.backoff_max_ms; ++i) base *= 2;
  base = std::max<uint64_t>(1, std::min<uint64_t>(base, config_.backoff_max_ms));
  ++dialer.attempts;
  // Jitter in [base/2, base]: peers that lost each other at once do not
  // redial in lockstep.
  uint64_t delay = base / 2 + random_() % (base / 2 + 1);
  std::string address = dialer.address;
  dialer.timer = loop_.AddTimer(static_cast<int64_t>(delay), [this, address] {
    auto it = dialers_.find(address);
    if (it == dialers_.end()) return;
    it->second->timer = 0;
    Dial(*it->second);
  });
}

// ---- reading -----------------------------------------------------------------

// Frames complete in one read are handled where libuv put them; only a
// frame split across reads is assembled in the link's reader.
void UvTransport::OnData(const LinkPtr& link, std::string_view bytes) {
  link->last_received_ms = loop_.NowMs();
  if (link->tls) return OnTlsData(link, bytes);
  ReadFrames(link, bytes);
}

void UvTransport::ReadFrames(const LinkPtr& link, std::string_view bytes) {
  const auto status = link->reader.Read(bytes, [&](const wire::FrameReader::Frame& frame) {
    OnFrame(link, frame.type, frame.body);
    return link->state != LinkState::kClosed;
  });
  if (link->state == LinkState::kClosed) return;
  switch (status) {
    case wire::FrameReader::Status::kOversize:
      return Refuse(link, link->state == LinkState::kUp ? "oversize frame" : "garbage: oversize handshake frame");
    case wire::FrameReader::Status::kEmptyFrame:
      return Refuse(link, "garbage: empty frame");
    case wire::FrameReader::Status::kFrame:
    case wire::FrameReader::Status::kNeedMore:
      return;
  }
}

void UvTransport::OnFrame(const LinkPtr& link, uint8_t type, std::string_view body) {
  if (type < wire::kFirstClusterType) return OnLinkFrame(link, type, body);
  if (link->state != LinkState::kUp) return Refuse(link, "cluster frame before authentication");
  Peer& peer = peers_[link->node];
  ++peer.frames_in;
  peer.bytes_in += wire::kHeaderBytes + body.size();
  if (handler_ != nullptr) handler_->OnFrame(link->node, type, body);
}

void UvTransport::OnLinkFrame(const LinkPtr& link, uint8_t type, std::string_view body) {
  switch (type) {
    case wire::kHello:
      if (link->state != LinkState::kAwaitHello) return Refuse(link, "unexpected hello");
      return OnHello(link, body);
    case wire::kAuth:
      if (link->state != LinkState::kAwaitAuth) return Refuse(link, "unexpected auth");
      return OnAuth(link, body);
    case wire::kHeartbeat:
      if (link->state != LinkState::kUp) return Refuse(link, "heartbeat before authentication");
      return;
    case wire::kError:
      if (body == "duplicate link") {
        spdlog::debug("links: {} (node {}) kept its own link to us", link->remote, link->node);
      } else {
        spdlog::warn("links: {} (node {}) closed the link: {}", link->remote, link->node,
                     std::string(body.substr(0, 200)));
        // Refused before the link came up: membership reports it (/healthz).
        if (link->state != LinkState::kUp && body != "node shutting down" && handler_ != nullptr) {
          handler_->OnRefusedBy(link->remote, std::string(body.substr(0, 200)));
        }
      }
      return DropLink(link, false);
    default:
      return Refuse(link, fmt::format("unknown link frame type 0x{:02x}", type));
  }
}

void UvTransport::OnHello(const LinkPtr& link, std::string_view body) {
  auto hello = wire::DecodeHello(body);
  if (!hello) return Refuse(link, "garbage: malformed hello");
  if (hello->magic != wire::kMagic) return Refuse(link, "garbage: bad magic");
  if (hello->major != wire::kVersionMajor) {
    return Refuse(link, fmt::format("unsupported protocol version {}.{} (we speak {}.{})", hello->major,
                                    hello->minor, wire::kVersionMajor, wire::kVersionMinor));
  }
  if (hello->node == 0) return Refuse(link, "node id 0");
  Dialer* dialer = nullptr;
  if (link->dialled) {
    auto it = dialers_.find(link->dial_address);
    if (it != dialers_.end()) dialer = it->second.get();
  }
  if (hello->node == config_.self) {
    if (dialer != nullptr) dialer->leads_to_self = true;  // our own address: stop dialling it
    if (!link->dialled) {
      // Our hello first, so that a dialer that is ourselves learns it and stops.
      WriteFrame(*link, wire::kHello,
                 wire::EncodeHello({.node = config_.self, .address = config_.advertised_address, .nonce = link->our_nonce}));
    }
    return Refuse(link, fmt::format("node id {} is our own", hello->node));
  }
  if (config_.tls_node_names && link->tls) {
    const std::string wanted = fmt::format("estuary-node-{}", hello->node);
    const std::optional<std::string> name = link->tls->peer_common_name();
    if (!name || *name != wanted) {
      return Refuse(link, fmt::format("its certificate names {} but its hello node {} (--cluster-tls-node-names "
                                      "wants CN={})",
                                      name ? "CN=" + *name : std::string("no common name"), hello->node, wanted));
    }
  }
  link->node = hello->node;
  link->advertised = hello->address;
  link->minor = hello->minor;
  link->their_nonce = hello->nonce;
  link->state = LinkState::kAwaitAuth;
  if (!link->dialled) {
    WriteFrame(*link, wire::kHello,
               wire::EncodeHello({.node = config_.self, .address = config_.advertised_address, .nonce = link->our_nonce}));
    return;
  }
  if (dialer != nullptr) {
    if (dialer->node != 0 && dialer->node != hello->node) {
      spdlog::info("links: {} is now node {} (was node {})", dialer->address, hello->node, dialer->node);
    }
    dialer->node = hello->node;
  }
  if (connected(hello->node)) {
    // It dialled us first and that link is up: this one is redundant.
    WriteFrame(*link, wire::kError, "duplicate link");
    return DropLink(link, false);
  }
  wire::Mac mac = wire::ComputeMac(config_.secret, wire::Role::kDialer, link->our_nonce, link->their_nonce,
                                   config_.self, link->node);
  WriteFrame(*link, wire::kAuth, std::string_view(reinterpret_cast<const char*>(mac.data()), mac.size()));
}

void UvTransport::OnAuth(const LinkPtr& link, std::string_view body) {
  wire::Mac expected =
      link->dialled ? wire::ComputeMac(config_.secret, wire::Role::kAcceptor, link->our_nonce, link->their_nonce,
                                       config_.self, link->node)
                    : wire::ComputeMac(config_.secret, wire::Role::kDialer, link->their_nonce, link->our_nonce,
                                       link->node, config_.self);
  if (!wire::MacEquals(expected, body)) return Refuse(link, "authentication failed (wrong cluster secret?)");
  if (!link->dialled) {
    if (!Arbitrate(link)) return;
    wire::Mac mac = wire::ComputeMac(config_.secret, wire::Role::kAcceptor, link->their_nonce, link->our_nonce,
                                     link->node, config_.self);
    WriteFrame(*link, wire::kAuth, std::string_view(reinterpret_cast<const char*>(mac.data()), mac.size()));
  }
  MarkUp(link);
}

// The acceptor decides which of two simultaneous links survives: the one
// dialled by the lower node id. A dial of ours to that node whose hello
// already arrived is the other candidate.
bool UvTransport::Arbitrate(const LinkPtr& link) {
  std::vector<LinkPtr> ours;
  for (auto& [id, other] : links_) {
    if (other != link && other->dialled && other->node == link->node && other->state == LinkState::kAwaitAuth) {
      ours.push_back(other);
    }
  }
  if (ours.empty()) return true;
  if (config_.self < link->node) {
    spdlog::debug("links: node {} dialled us while we dial it: keeping ours", link->node);
    WriteFrame(*link, wire::kError, "duplicate link");
    DropLink(link, false);
    return false;
  }
  for (const LinkPtr& other : ours) {
    WriteFrame(*other, wire::kError, "duplicate link");
    DropLink(other, false);
  }
  return true;
}

void UvTransport::MarkUp(const LinkPtr& link) {
  Peer& peer = peers_[link->node];
  if (peer.link && peer.link != link) {
    spdlog::info("links: node {} opened a new link: replacing the old one", link->node);
    WriteFrame(*peer.link, wire::kError, "replaced by a newer link");
    DropLink(peer.link, false);  // OnPeerDown for the old link first
  }
  Peer& fresh = peers_[link->node];
  link->state = LinkState::kUp;
  link->reader.set_max_frame(config_.max_frame_bytes);
  link->last_received_ms = loop_.NowMs();
  link->writes_at_up = link->connection->writes_issued();
  fresh.link = link;
  fresh.address = link->advertised;
  if (fresh.ups++ > 0) spdlog::info("links: node {} ({}) reconnected", link->node, link->remote);
  for (auto& [address, dialer] : dialers_) {
    bool same = (link->dialled && address == link->dial_address) || address == link->advertised;
    if (!same) continue;
    dialer->node = link->node;
    // Whichever side dialled, the address answers now: after a loss the
    // first redial comes within backoff_min_ms, not after the backoff (or a
    // redial still pending) that dials at start-up, before the peer
    // listened, ran up. A refused redial is how membership tells a dead
    // process quickly (docs/membership.md).
    dialer->attempts = 0;
    if (dialer->timer != 0) loop_.CancelTimer(dialer->timer);
    dialer->timer = 0;
    // A dial still in handshake to the same node is redundant now.
    if (dialer->link && dialer->link != link && dialer->link->state != LinkState::kUp) {
      DropLink(dialer->link, false);
    }
  }
  spdlog::info("links: node {} up ({}, {})", link->node, link->advertised, link->dialled ? "dialled" : "accepted");
  if (handler_ != nullptr) handler_->OnPeerUp({link->node, link->advertised, link->minor});
}

// ---- TLS (config.tls) ---------------------------------------------------------

void UvTransport::OnTlsData(const LinkPtr& link, std::string_view ciphertext) {
  // One scratch buffer per thread: frames are handled before it is reused.
  thread_local std::string plaintext;
  plaintext.clear();
  io::TlsSession& session = *link->tls;
  const bool ok = session.Receive(ciphertext, plaintext);
  if (session.has_output()) {
    session.TakeOutput(link->connection->output_buffer());
    link->connection->MarkDirty();
  }
  if (link->state == LinkState::kTls) {
    if (!ok) return RefuseTls(link, session.error());
    if (!session.open()) return;
    TlsEstablished(link);
  }
  if (!plaintext.empty() && link->state != LinkState::kClosed) ReadFrames(link, plaintext);
  if (ok || link->state == LinkState::kClosed) return;
  const bool failed = session.state() == io::TlsSession::State::kFailed;
  // TLS 1.3: a client is open before the server checked its certificate;
  // the server's alert arrives after, and is a refusal like any other.
  if (failed && link->state != LinkState::kUp) return RefuseTls(link, session.error());
  // close_notify, or a record that does not decrypt: the link ends.
  if (failed) {
    ++refused_;
    spdlog::warn("links: TLS record error from {} (node {}): {}", link->remote, link->node, session.error());
  }
  DropLink(link, false);
}

void UvTransport::TlsEstablished(const LinkPtr& link) {
  spdlog::debug("links: TLS with {} up ({}, {})", link->remote, link->tls->protocol_version(),
                link->dialled ? "dialled" : "accepted");
  link->state = LinkState::kAwaitHello;
  if (link->dialled) {
    WriteFrame(*link, wire::kHello,
               wire::EncodeHello({.node = config_.self, .address = config_.advertised_address, .nonce = link->our_nonce}));
  }
}

// No error frame can pass before TLS is up: the alert OpenSSL queued (if
// any) goes out before the FIN. The dialler's side tells membership.
void UvTransport::RefuseTls(const LinkPtr& link, const std::string& reason) {
  ++refused_;
  spdlog::warn("links: refused {} ({}): TLS handshake failed: {}", link->remote,
               link->dialled ? "dialled" : "accepted", reason);
  if (link->dialled && handler_ != nullptr) handler_->OnRefusedBy(link->remote, "TLS: " + reason);
  DropLink(link, false);
}

void UvTransport::EncryptPending(Link& link) {
  link.encrypt_posted = false;
  if (link.plaintext_out.empty() || !link.connection->is_open()) return;
  if (link.tls->Send(link.plaintext_out)) {
    link.tls->TakeOutput(link.connection->output_buffer());
    link.connection->MarkDirty();
  }
  link.plaintext_out.clear();
  if (link.plaintext_out.capacity() > 1024 * 1024) std::string().swap(link.plaintext_out);
}

// ---- closing -----------------------------------------------------------------

void UvTransport::Refuse(const LinkPtr& link, const std::string& reason) {
  ++refused_;
  if (link->node != 0) {
    spdlog::warn("links: refused {} (node {}): {}", link->remote, link->node, reason);
  } else {
    spdlog::warn("links: refused {}: {}", link->remote, reason);
  }
  WriteFrame(*link, wire::kError, reason);
  DropLink(link, false);
}

void UvTransport::DropLink(const LinkPtr& link, bool abort) {
  if (link->state == LinkState::kClosed) return;
  LinkPtr keep = link;  // the caller's reference may live in links_
  keep->connection->SetHandlers({});
  if (keep->tls && !abort && keep->tls->open()) {
    EncryptPending(*keep);  // the last frames (an error saying why) go first
    keep->tls->Shutdown();  // close_notify
    keep->tls->TakeOutput(keep->connection->output_buffer());
    keep->connection->MarkDirty();
  }
  if (abort) {
    keep->connection->Abort();
  } else {
    keep->connection->Close();
  }
  Forget(keep);
}

// Bookkeeping once a link is gone, whoever closed it.
void UvTransport::Forget(const LinkPtr& link) {
  bool was_up = link->state == LinkState::kUp;
  link->state = LinkState::kClosed;
  links_.erase(link->id);
  if (link->dialled) {
    auto it = dialers_.find(link->dial_address);
    if (it != dialers_.end() && it->second->link == link) {
      it->second->link.reset();
      ScheduleRedial(*it->second);
    }
  }
  if (was_up) PeerDown(link);
}

void UvTransport::PeerDown(const LinkPtr& link) {
  Peer& peer = peers_[link->node];
  if (peer.link != link) return;
  peer.writes_done += link->connection->writes_issued() - link->writes_at_up;
  peer.link.reset();
  // A dialer standing by while the node had dialled us takes over.
  for (auto& [address, dialer] : dialers_) {
    if (dialer->node == link->node) ScheduleRedial(*dialer);
  }
  if (handler_ != nullptr && !closed_) handler_->OnPeerDown(link->node);
}

// ---- writing -----------------------------------------------------------------

SendResult UvTransport::Send(NodeId to, uint8_t type, std::string_view body) {
  if (closed_) return SendResult::kNoLink;
  auto it = peers_.find(to);
  if (it == peers_.end() || !it->second.link) return SendResult::kNoLink;
  if (type < wire::kFirstClusterType || body.size() + 1 > config_.max_frame_bytes) {
    spdlog::error("links: refusing to send frame type 0x{:02x} of {} bytes to node {}", type, body.size(), to);
    return SendResult::kNoLink;
  }
  Link& link = *it->second.link;
  if (link.connection->above_high_watermark()) {
    link.want_writable = true;
    return SendResult::kFull;
  }
  WriteFrame(link, type, body);
  ++it->second.frames_out;
  it->second.bytes_out += wire::kHeaderBytes + body.size();
  return SendResult::kQueued;
}

void UvTransport::WriteFrame(Link& link, uint8_t type, std::string_view body) {
  if (!link.connection->is_open()) return;
  if (link.tls) {
    if (!link.tls->open()) return;  // before TLS is up nothing but TLS passes
    wire::AppendFrame(link.plaintext_out, type, body);
    // A burst within one iteration is encrypted as it grows, so that the
    // socket's queue (and its watermarks, which Send obeys) sees it: the
    // plaintext waiting here stays under kEncryptNowBytes.
    if (link.plaintext_out.size() >= kEncryptNowBytes) {
      EncryptPending(link);
    } else if (!link.encrypt_posted) {
      link.encrypt_posted = true;
      loop_.Post([this, weak = std::weak_ptr<Link>(link.shared_from_this())] {
        if (LinkPtr self = weak.lock(); self && self->state != LinkState::kClosed) EncryptPending(*self);
      });
    }
  } else {
    wire::AppendFrame(link.connection->output_buffer(), type, body);
    link.connection->MarkDirty();
  }
  // No clock read per frame: the next tick, at most a tick interval later,
  // takes this as the time of the last send (heartbeats only need it to
  // within that).
  link.sent_since_tick = true;
}

// ---- timers ------------------------------------------------------------------

// One periodic tick for every link: heartbeats, dead peers, handshake
// timeouts. A tick that comes late (the loop was stalled) first refreshes
// the receive times: the heartbeats may be waiting in the socket, and the
// timers of an iteration run before its reads.
void UvTransport::Tick() {
  const int64_t interval = std::max<int64_t>(1, std::min(config_.heartbeat_ms, config_.dead_after_ms) / 4);
  const int64_t now = loop_.NowMs();
  const bool stalled = last_tick_ms_ != 0 && now - last_tick_ms_ > std::max<int64_t>(4 * interval, config_.dead_after_ms / 2);
  last_tick_ms_ = now;
  std::vector<LinkPtr> snapshot;
  snapshot.reserve(links_.size());
  for (auto& [id, link] : links_) snapshot.push_back(link);
  for (const LinkPtr& link : snapshot) {
    if (link->state == LinkState::kClosed) continue;
    if (link->state != LinkState::kUp) {
      if (now - link->started_ms <= config_.handshake_timeout_ms) continue;
      if (link->state == LinkState::kConnecting) {
        spdlog::debug("links: dial {} timed out", link->dial_address);
        ReportDialFailed(*link, DialError::kOther, "timed out");
        DropLink(link, true);
      } else {
        Refuse(link, "handshake timeout");
      }
      continue;
    }
    if (stalled) link->last_received_ms = now;
    if (now - link->last_received_ms > config_.dead_after_ms) {
      spdlog::warn("links: node {} ({}) silent for {} ms: link down", link->node, link->remote,
                   now - link->last_received_ms);
      DropLink(link, true);
      continue;
    }
    if (link->sent_since_tick) {
      link->last_sent_ms = now;
      link->sent_since_tick = false;
    }
    if (now - link->last_sent_ms >= config_.heartbeat_ms) {
      WriteFrame(*link, wire::kHeartbeat, {});
      link->last_sent_ms = now;
      link->sent_since_tick = false;
    }
  }
  if (!closed_) tick_timer_ = loop_.AddTimer(interval, [this] { Tick(); });
}

// ---- fault injection -----------------------------------------------------------

void UvTransport::SetIsolated(bool isolated) {
  if (closed_ || isolated_ == isolated) return;
  isolated_ = isolated;
  if (isolated) {
    spdlog::warn("links: fault injection: isolated (every link dropped, none accepted or dialled)");
    std::vector<LinkPtr> snapshot;
    for (auto& [id, link] : links_) snapshot.push_back(link);
    for (const LinkPtr& link : snapshot) DropLink(link, true);  // a dialer's redial finds isolated_ set
    return;
  }
  spdlog::warn("links: fault injection: isolation healed, redialling {} address(es)", dialers_.size());
  for (auto& [address, dialer] : dialers_) {
    loop_.CancelTimer(dialer->timer);
    dialer->timer = 0;
    dialer->attempts = 0;
    Dial(*dialer);
  }
}

// ---- queries -----------------------------------------------------------------

bool UvTransport::connected(NodeId node) const {
  auto it = peers_.find(node);
  return it != peers_.end() && it->second.link != nullptr;
}

std::vector<PeerInfo> UvTransport::peers() const {
  std::vector<PeerInfo> out;
  for (const auto& [node, peer] : peers_) {
    if (peer.link) out.push_back({node, peer.address});
  }
  return out;
}

std::vector<UvTransport::PeerStats> UvTransport::stats() const {
  std::vector<PeerStats> out;
  for (const auto& [node, peer] : peers_) {
    uint64_t writes = peer.writes_done;
    size_t queued = 0;
    if (peer.link) {
      writes += peer.link->connection->writes_issued() - peer.link->writes_at_up;
      queued = peer.link->connection->queued_bytes() + peer.link->plaintext_out.size();
    }
    out.push_back({node, peer.address, peer.link != nullptr, peer.frames_in, peer.frames_out, peer.bytes_in,
                   peer.bytes_out, writes, peer.ups > 0 ? peer.ups - 1 : 0, queued});
  }
  return out;
}

}  // namespace estuary::cluster
