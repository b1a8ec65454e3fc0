// ShardRuntime's AMQP 1.0 side: the listener, one AmqpConnection per
// socket, and the move of a connection to the shard its container-id hashes
// to (so that durable subscriptions, keyed by container-id, always live on
// one shard).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "server/shard_runtime.h"

namespace estuary::server {

Expected<uint16_t, std::string> ShardRuntime::ListenAmqp(const io::Endpoint& at, amqp::AmqpSettings settings) {
  amqp_settings_ = std::move(settings);
  auto listener = io::TcpListener::Listen(loop_, at, [this](int fd) {
    proxy_gate_.Accept(fd, [this](int accepted, std::string client) {
      auto admission = Admit(accepted, client);  // after the PROXY header, as for MQTT
      if (admission) AcceptAmqp(accepted, std::move(client), std::move(*admission));
    });
  });
  if (!listener) return MakeError(listener.error());
  amqp_listener_ = std::move(*listener);
  return amqp_listener_->port();
}

void ShardRuntime::AcceptAmqp(int fd, std::string client_address, ConnectionGuard::TicketPtr admission) {
  auto tcp = AdoptCounted(fd);
  if (!tcp) return;
  auto stream = std::make_unique<TcpStream>(std::move(tcp));
  stream->set_client_address(std::move(client_address));
  stream->set_admission(std::move(admission));
  StartAmqpPeer(std::move(stream), nullptr);
}

void ShardRuntime::AdoptAmqp(ClientStream::Detached detached, std::shared_ptr<amqp::AmqpConnection> connection,
                             ConnectionGuard::TicketPtr admission) {
  // Counted node-wide by the shard that accepted it.
  std::unique_ptr<ClientStream> stream;
  if (shutting_down_) {
    ::close(detached.fd);
  } else {
    stream = AdoptStream(std::move(detached));
  }
  if (!stream) {
    shared_.connections.fetch_sub(1);
    return;
  }
  stream->set_admission(std::move(admission));
  StartAmqpPeer(std::move(stream), std::move(connection));
}

void ShardRuntime::StartAmqpPeer(std::unique_ptr<ClientStream> stream,
                                 std::shared_ptr<amqp::AmqpConnection> connection, std::string received) {
  auto owned = std::make_unique<AmqpPeer>();
  AmqpPeer* peer = owned.get();
  peer->stream = std::move(stream);
  const bool adopted = connection != nullptr;
  if (!adopted) {
    amqp::AmqpSettings settings = amqp_settings_;
    settings.authenticator = shared_.authenticator;
    settings.authorizer = shared_.authorizer;
    // SASL EXTERNAL: the verified client certificate's CN.
    settings.certificate_identity = peer->stream->certificate_identity();
    const core::ShardConfig& config = broker_.config();
    settings.route_open = [config, peer](const std::string& container_id) {
      peer->handoff_target = core::ShardForClientId(container_id, config.shard_count);
      return peer->handoff_target != config.shard_id;
    };
    settings.admit_connection = [this] { return shared_.connections.load() <= shared_.max_connections; };
    settings.connect_timeout_ms = shared_.connect_timeout_ms.load(std::memory_order_relaxed);
    // Node-wide, not this shard's: the connection may have moved when it fires.
    settings.connect_timed_out = [&shared = shared_] {
      shared.amqp_connect_timeouts.fetch_add(1, std::memory_order_relaxed);
    };
    connection = std::make_shared<amqp::AmqpConnection>(broker_, *peer->stream, std::move(settings));
  }
  peer->amqp = std::move(connection);
  // Bound here, on the shard that owns the connection (also after a move).
  if (shared_.claim_client_id) peer->amqp->BindSessionClaims(AmqpSessionClaims());
  peer->amqp->BindInboundLedger(amqp_ledger_);
  amqp_peers_.emplace(peer, std::move(owned));
  core::ShardMetrics::Add(broker_.metrics().connections);

  io::TcpConnection::Handlers handlers;
  handlers.on_data = [this, peer](std::string_view bytes) { OnAmqpData(peer, bytes); };
  handlers.on_close = [this, peer](int) {
    if (amqp_peers_.count(peer) == 0) return;
    peer->amqp->OnStreamClosed();
    RemoveAmqp(peer);
  };
  handlers.on_drain = [this, peer] {
    if (amqp_peers_.count(peer) != 0) peer->amqp->OnWritable();
  };
  peer->stream->SetHandlers(std::move(handlers));
  if (adopted) {
    peer->amqp->Resume(broker_, *peer->stream);
  } else {
    peer->amqp->Start();
  }
  if (!received.empty() && amqp_peers_.count(peer) != 0) OnAmqpData(peer, received);
  if (amqp_peers_.count(peer) != 0 && !peer->amqp->closed() && !peer->amqp->handed_off()) {
    peer->stream->ResumeReading();
  }
}

void ShardRuntime::OnAmqpData(AmqpPeer* peer, std::string_view bytes) {
  peer->amqp->OnBytes(bytes);
  if (const auto& admission = peer->stream->admission(); admission && !peer->amqp->opening()) {
    admission->Established();  // SASL done and the open in: no longer pending
  }
  if (peer->amqp->handed_off()) {
    peer->stream->PauseReading();
    loop_.Post([this, peer] { HandOffAmqp(peer); });
  }
}

amqp::SessionClaims ShardRuntime::AmqpSessionClaims() {
  // A durable link's session id goes through the client-id registry as an
  // MQTT client id does (never clean: the subscription continues); a
  // session served elsewhere becomes this shard's before the link attaches.
  amqp::SessionClaims claims;
  claims.claim = [this](const std::string& session_id, std::function<void(bool)> done) {
    shared_.claim_client_id(session_id, /*clean_start=*/false,
                            [this, session_id, done](NodeShared::ClaimReply reply) {
                              loop_.mailbox().Send([this, session_id, done, reply = std::move(reply)] {
                                if (reply.granted && reply.session) {
                                  broker_.AdoptSession(session_id, *reply.session, /*taken_over=*/false,
                                                       reply.taken_from);
                                }
                                if (reply.granted && reply.copy_fence) {
                                  broker_.SessionCopyReplaced(session_id, *reply.copy_fence);
                                }
                                done(reply.granted);
                              });
                            });
  };
  claims.release = [this](const std::string& session_id) { shared_.release_client_id(session_id); };
  return claims;
}

void ShardRuntime::HandOffAmqp(AmqpPeer* peer) {
  if (amqp_peers_.count(peer) == 0) return;
  ClientStream::Detached detached = peer->stream->Detach();
  if (detached.fd < 0 && RetryHandOffLater(*peer->stream, peer->handoff_attempts)) {
    loop_.AddTimer(kHandOffRetryMs, [this, peer, weak = std::weak_ptr<amqp::AmqpConnection>(peer->amqp)] {
      if (amqp_peers_.count(peer) != 0 && peer->amqp == weak.lock()) HandOffAmqp(peer);
    });
    return;
  }
  core::ShardMetrics::Sub(broker_.metrics().connections);
  auto owned = std::move(amqp_peers_[peer]);
  amqp_peers_.erase(peer);
  if (detached.fd < 0) {
    spdlog::warn("amqp: could not hand a connection to its shard; closing it");
    owned->stream->Abort();
    shared_.connections.fetch_sub(1);
    return;
  }
  amqp_handoff_(owned->handoff_target, std::move(detached), std::move(owned->amqp), owned->stream->admission());
  // The TcpConnection is closed by Detach; the stream dies with `owned`.
  std::shared_ptr<AmqpPeer> doomed(std::move(owned));
  loop_.Post([doomed] {});
}

void ShardRuntime::RemoveAmqp(AmqpPeer* peer) {
  auto it = amqp_peers_.find(peer);
  if (it == amqp_peers_.end()) return;
  core::ShardMetrics::Sub(broker_.metrics().connections);
  shared_.connections.fetch_sub(1);
  // Destroy after the current callback: the TcpConnection is still in it.
  std::shared_ptr<AmqpPeer> doomed(std::move(it->second));
  amqp_peers_.erase(it);
  loop_.Post([doomed] {});
  CheckStopped();
}

void ShardRuntime::ShutdownAmqp() {
  if (amqp_listener_) amqp_listener_->Close();
  if (amqps_listener_) amqps_listener_->Close();
  if (amqp_ws_listener_) amqp_ws_listener_->Close();
  if (amqp_wss_listener_) amqp_wss_listener_->Close();
  std::vector<AmqpPeer*> peers;
  for (auto& entry : amqp_peers_) peers.push_back(entry.first);
  for (AmqpPeer* peer : peers) {
    if (amqp_peers_.count(peer) != 0) peer->amqp->Shutdown("server shutting down");
  }
}

void ShardRuntime::AbortAmqp() {
  std::vector<AmqpPeer*> left;
  for (auto& entry : amqp_peers_) left.push_back(entry.first);
  for (AmqpPeer* peer : left) peer->stream->Abort();
}

}  // namespace estuary::server
