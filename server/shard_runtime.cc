#include "server/shard_runtime.h"
#include "server/shard_peers.h"

#include <arpa/inet.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>

#include "balancer/proxy_protocol.h"
#include "cluster-core/store/shard_store.h"

namespace estuary::server {
namespace {

// The PROXY v2 header that carries a client address across a hand-off.
std::optional<std::string> HandOffHeader(const std::string& address) {
  if (address.empty()) return std::nullopt;
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  std::string ip = address.substr(0, colon);
  if (ip.size() > 2 && ip.front() == '[') ip = ip.substr(1, ip.size() - 2);
  const auto port = static_cast<uint16_t>(std::strtoul(address.c_str() + colon + 1, nullptr, 10));
  const std::string any = ip.find(':') != std::string::npos ? "::" : "0.0.0.0";
  auto header = proxy::Encode({ip, port}, {any, 0});
  if (!header) return std::nullopt;
  return *header;
}

// The socket's peer IP ("" if it cannot be read): what the abuse limits
// count when no PROXY header named the client.
std::string PeerIp(int fd) {
  sockaddr_storage peer{};
  socklen_t length = sizeof(peer);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length) != 0) return {};
  char text[INET6_ADDRSTRLEN] = {};
  if (peer.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&peer)->sin_addr, text, sizeof(text));
  } else if (peer.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&peer)->sin6_addr, text, sizeof(text));
  }
  return text;
}

}  // namespace

ShardRuntime::ShardRuntime(core::ShardConfig config, core::ShardLink& link,
                           core::ShardMetrics& metrics, NodeShared& shared)
    : broker_(std::move(config), loop_, link, metrics), shared_(shared) {}

ShardRuntime::~ShardRuntime() {
  // Connections first: their sessions point into the broker.
  handshakes_.clear();
  peers_.clear();
  amqp_peers_.clear();
  // What the last loop iteration left pending (session records written as
  // clients were disconnected), then the engine's own sync.
  broker_.FlushStore();
  if (engine_) (void)engine_->Close();
}

void ShardRuntime::AttachStorage(std::unique_ptr<persistence::StorageEngine> engine) {
  engine_ = std::move(engine);
  broker_.AttachStore(*engine_);
  // Exactly-once AMQP senders' kept outcomes (docs/amqp.md "Exactly-once
  // links"): written beside the sessions, read back before any connection.
  core::store::ShardStore* store = broker_.durable_store();
  amqp_ledger_->set_persistence({[store](std::string key, std::string value) { store->PutLocal(std::move(key), std::move(value)); },
                                 [store](std::string key) { store->DeleteLocal(std::move(key)); }});
  std::vector<std::string> bad;
  size_t restored = 0;
  (void)engine_->Scan(std::string(1, amqp::InboundLedger::kKeyTag), [&](std::string_view key, std::string_view value) {
    if (amqp_ledger_->Restore(key, value)) {
      ++restored;
    } else {
      bad.emplace_back(key);
    }
    return true;
  });
  for (std::string& key : bad) store->DeleteLocal(std::move(key));
  if (restored != 0) spdlog::info("storage: {} kept AMQP exactly-once outcomes read back", restored);
}

Expected<uint16_t, std::string> ShardRuntime::ListenMqtt(const io::Endpoint& at) {
  // Behind a balancer the limits see the client its PROXY header names, so
  // they are applied once the header is read.
  auto listener = io::TcpListener::Listen(loop_, at, [this](int fd) {
    proxy_gate_.Accept(fd, [this](int accepted, std::string client) {
      auto admission = Admit(accepted, client);
      if (admission) Accept(accepted, {}, std::move(client), std::move(*admission));
    });
  });
  if (!listener) return MakeError(listener.error());
  mqtt_listener_ = std::move(*listener);
  return mqtt_listener_->port();
}

bool ShardRuntime::RetryHandOffLater(const ClientStream& stream, int& attempts) {
  // A socket moves only with nothing left to write. Over TLS the session
  // ticket written right after the handshake may still be in flight when
  // the CONNECT (or open) that came with the client's Finished is read.
  return stream.queued_bytes() > 0 && ++attempts <= kHandOffRetries;
}

std::string ShardRuntime::TakeHandOffAddress(std::string& received) {
  // A socket handed over by another shard carries its client address as a
  // PROXY v2 header in front of the bytes already read (see HandOff): that
  // header was made by this node, never read from the network.
  auto header = proxy::Decode(received);
  if (header.status != proxy::DecodeStatus::kComplete) return {};
  received.erase(0, header.header.size);
  return header.header.source.ToString();
}

std::optional<ConnectionGuard::TicketPtr> ShardRuntime::Admit(int fd, const std::string& client_address) {
  ConnectionGuard* guard = shared_.guard.get();
  if (guard == nullptr) return ConnectionGuard::TicketPtr();  // no limit set: nothing to do
  auto ticket = guard->Admit(client_address.empty() && guard->per_address() ? PeerIp(fd) : client_address);
  if (!ticket) {
    // Closed at once: no TLS, no protocol, no timer. The RST frees the
    // client's side too (no TIME_WAIT here).
    linger off{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &off, sizeof(off));
    ::close(fd);
    return std::nullopt;
  }
  return ticket;
}

void ShardRuntime::AdoptMqtt(ClientStream::Detached detached, std::string received,
                             ConnectionGuard::TicketPtr admission) {
  // Counted node-wide by the shard that accepted it.
  if (!detached.tls && !detached.ws) {
    Accept(detached.fd, std::move(received), {}, std::move(admission));
    return;
  }
  AdoptLayeredMqtt(std::move(detached), std::move(received), std::move(admission));
}

void ShardRuntime::Accept(int fd, std::string received, std::string client_address,
                          ConnectionGuard::TicketPtr admission) {
  if (std::string carried = TakeHandOffAddress(received); !carried.empty()) client_address = std::move(carried);
  if (shutting_down_) {
    ::close(fd);
    return;
  }
  auto tcp = io::TcpConnection::Adopt(loop_, fd);
  if (!tcp) return;
  auto stream = std::make_unique<TcpStream>(std::move(tcp));
  stream->set_client_address(std::move(client_address));
  stream->set_admission(std::move(admission));
  // A socket that comes with bytes was moved here: counted where it was accepted.
  const bool counted = !received.empty();
  StartMqttPeer(std::move(stream), std::move(received), counted);
}

std::shared_ptr<io::TcpConnection> ShardRuntime::AdoptCounted(int fd) {
  if (shutting_down_) {
    ::close(fd);
    return nullptr;
  }
  auto tcp = io::TcpConnection::Adopt(loop_, fd);
  if (!tcp) return nullptr;
  shared_.connections.fetch_add(1);
  core::ShardMetrics::Add(broker_.metrics().connections_total);
  return tcp;
}

void ShardRuntime::StartMqttPeer(std::unique_ptr<ClientStream> stream, std::string received, bool counted) {
  auto owned = std::make_unique<MqttPeer>();
  MqttPeer* peer = owned.get();
  peer->stream = std::move(stream);
  mqtt::ConnectionSettings settings;
  settings.authenticator = shared_.authenticator;
  settings.authorizer = shared_.authorizer;
  if (shared_.tls_identity_as_username && peer->stream->encrypted()) {
    // No CN: "" is refused at CONNECT.
    settings.certificate_username = peer->stream->certificate_identity().value_or("");
  }
  const core::ShardConfig& config = broker_.config();
  settings.route_connect = [config, peer](const std::string& client_id) {
    peer->handoff_target = core::ShardForClientId(client_id, config.shard_count);
    return peer->handoff_target != config.shard_id;
  };
  settings.admit_connection = [this] { return shared_.connections.load() <= shared_.max_connections; };
  settings.connect_timeout_ms = shared_.connect_timeout_ms.load(std::memory_order_relaxed);
  settings.connect_timed_out = [&shared = shared_] {
    shared.mqtt_connect_timeouts.fetch_add(1, std::memory_order_relaxed);
  };
  if (shared_.claim_client_id) {
    // The CONNACK waits for the cluster's registry; its answer comes back
    // to this shard's loop.
    settings.claim_client_id = [this](const std::string& client_id, bool clean_start,
                                      std::function<void(mqtt::ClaimOutcome)> done) {
      shared_.claim_client_id(client_id, clean_start, [this, client_id, done](NodeShared::ClaimReply reply) {
        loop_.mailbox().Send([this, client_id, done, reply = std::move(reply)] {
          // A session served elsewhere becomes this shard's before the
          // connection attaches to it.
          if (reply.granted && reply.session) {
            broker_.AdoptSession(client_id, *reply.session, /*taken_over=*/false, reply.taken_from);
          }
          if (reply.granted && reply.copy_fence) broker_.SessionCopyReplaced(client_id, *reply.copy_fence);
          done(reply.granted ? mqtt::ClaimOutcome::kGranted : mqtt::ClaimOutcome::kUnavailable);
        });
      });
    };
    settings.release_client_id = [this](const std::string& client_id) { shared_.release_client_id(client_id); };
  }
  peer->mqtt = std::make_shared<mqtt::MqttConnection>(broker_, *peer->stream, std::move(settings));
  peers_.emplace(peer, std::move(owned));
  if (!counted) {
    shared_.connections.fetch_add(1);
    core::ShardMetrics::Add(broker_.metrics().connections_total);
  }
  core::ShardMetrics::Add(broker_.metrics().connections);

  io::TcpConnection::Handlers handlers;
  handlers.on_data = [this, peer](std::string_view bytes) { OnData(peer, bytes); };
  handlers.on_close = [this, peer](int) {
    if (peers_.count(peer) == 0) return;
    peer->mqtt->OnStreamClosed();
    Remove(peer);
  };
  handlers.on_drain = [this, peer] {
    if (peers_.count(peer) != 0) peer->mqtt->OnWritable();
  };
  peer->stream->SetHandlers(std::move(handlers));
  peer->mqtt->Start();
  if (!received.empty()) OnData(peer, received);
  if (peers_.count(peer) != 0 && !peer->mqtt->handed_off()) peer->stream->ResumeReading();
}

void ShardRuntime::OnData(MqttPeer* peer, std::string_view bytes) {
  peer->mqtt->OnBytes(bytes);
  if (const auto& admission = peer->stream->admission();
      admission && peer->mqtt->state() != mqtt::MqttConnection::State::kAwaitingConnect &&
      peer->mqtt->state() != mqtt::MqttConnection::State::kAuthenticating) {
    admission->Established();  // the CONNECT is in and authenticated: no longer pending
  }
  if (peer->mqtt->handed_off()) {
    peer->stream->PauseReading();
    loop_.Post([this, peer] { HandOff(peer); });
    return;
  }
  // Reading is paused and resumed by the connection itself (its output
  // watermark and subscribers' congestion): see MqttConnection::UpdateReading.
}

void ShardRuntime::HandOff(MqttPeer* peer) {
  if (peers_.count(peer) == 0) return;
  std::string received = peer->mqtt->unprocessed_input();
  if (auto source = HandOffHeader(peer->stream->client_address())) {
    received.insert(0, *source);
  }
  ClientStream::Detached detached = peer->stream->Detach();
  if (detached.fd < 0 && RetryHandOffLater(*peer->stream, peer->handoff_attempts)) {
    // The stream stays here, inert, until its output is written.
    loop_.AddTimer(kHandOffRetryMs, [this, peer, weak = std::weak_ptr<mqtt::MqttConnection>(peer->mqtt)] {
      if (peers_.count(peer) != 0 && peer->mqtt == weak.lock()) HandOff(peer);
    });
    return;
  }
  core::ShardMetrics::Sub(broker_.metrics().connections);
  auto owned = std::move(peers_[peer]);
  peers_.erase(peer);
  if (detached.fd < 0) {
    spdlog::warn("mqtt: could not hand a connection to its shard; closing it");
    owned->stream->Abort();
    shared_.connections.fetch_sub(1);
    return;
  }
  handoff_(owned->handoff_target, std::move(detached), received, owned->stream->admission());
}

void ShardRuntime::Remove(MqttPeer* peer) {
  auto it = peers_.find(peer);
  if (it == peers_.end()) return;
  core::ShardMetrics::Sub(broker_.metrics().connections);
  shared_.connections.fetch_sub(1);
  // Destroy after the current callback: the TcpConnection is still in it.
  std::shared_ptr<MqttPeer> doomed(std::move(it->second));
  peers_.erase(it);
  loop_.Post([doomed] {});
  CheckStopped();
}

void ShardRuntime::BeginShutdown(uint32_t grace_ms, std::function<void()> on_stopped) {
  if (shutting_down_) return;
  shutting_down_ = true;
  on_stopped_ = std::move(on_stopped);
  if (mqtt_listener_) mqtt_listener_->Close();
  if (mqtts_listener_) mqtts_listener_->Close();
  if (mqtt_ws_listener_) mqtt_ws_listener_->Close();
  if (mqtt_wss_listener_) mqtt_wss_listener_->Close();
  AbortHandshakes();
  ShutdownAmqp();
  std::vector<MqttPeer*> peers;
  for (auto& entry : peers_) peers.push_back(entry.first);
  for (MqttPeer* peer : peers) {
    if (peers_.count(peer) != 0) peer->mqtt->Disconnect(mqtt::ReasonCode::kServerShuttingDown);
  }
  loop_.AddTimer(grace_ms, [this] {
    // Clients that did not close in time are reset; each Abort ends in
    // on_close, which removes the peer and stops the loop after the last.
    std::vector<MqttPeer*> left;
    for (auto& entry : peers_) left.push_back(entry.first);
    for (MqttPeer* peer : left) peer->stream->Abort();
    AbortAmqp();
  });
  CheckStopped();
}

void ShardRuntime::CheckStopped() {
  if (!shutting_down_ || !peers_.empty() || !amqp_peers_.empty() || !handshakes_.empty()) return;
  if (on_stopped_) {
    auto done = std::move(on_stopped_);
    on_stopped_ = nullptr;
    done();
  }
  loop_.Stop();
}

}  // namespace estuary::server
