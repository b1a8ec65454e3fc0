// ShardRuntime's TLS side (--mqtts, --amqps; docs/security.md "TLS"): the
// listeners, the handshake under its deadline, and the move of a TLS
// connection to the shard its client id or container-id hashes to.
//
// A TLS connection moves as a plain one does, with its TlsSession beside
// the socket (docs/architecture.md "TLS connections and shards"): the
// accepting shard finished the handshake and decrypted the CONNECT (or the
// AMQP open); the owning shard continues the same session on the same
// socket. Nothing stays behind on the accepting shard.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "server/shard_runtime.h"
#include "server/tls_stream.h"
#include "server/ws_stream.h"

namespace estuary::server {

// The TLS listeners take clients directly: estuary-lb forwards the
// clear-text ports only, so --proxy-from (a PROXY header from the
// balancer's address) does not apply to them. The abuse limits are applied
// before the handshake costs anything (AcceptTls).
Expected<uint16_t, std::string> ShardRuntime::ListenMqtts(const io::Endpoint& at) {
  auto listener = io::TcpListener::Listen(loop_, at, [this](int fd) { AcceptTls(fd, {}, false); });
  if (!listener) return MakeError(listener.error());
  mqtts_listener_ = std::move(*listener);
  return mqtts_listener_->port();
}

Expected<uint16_t, std::string> ShardRuntime::ListenAmqps(const io::Endpoint& at) {
  auto listener = io::TcpListener::Listen(loop_, at, [this](int fd) { AcceptTls(fd, {}, true); });
  if (!listener) return MakeError(listener.error());
  amqps_listener_ = std::move(*listener);
  return amqps_listener_->port();
}

void ShardRuntime::AcceptTls(int fd, std::string client_address, bool amqp, bool websocket) {
  auto admission = Admit(fd, client_address);
  if (!admission) return;
  // Counted from the first byte: a handshake holds a socket too.
  auto tcp = AdoptCounted(fd);
  if (!tcp) return;
  auto owned = std::make_unique<TlsStream>(loop_, std::move(tcp), shared_.tls->NewSession());
  owned->set_client_address(std::move(client_address));
  owned->set_admission(std::move(*admission));  // pending until the CONNECT or open
  TlsStream* stream = owned.get();
  handshakes_.emplace(stream, std::move(owned));
  stream->Handshake(
      shared_.tls_handshake_timeout_ms,
      [this, stream, amqp, websocket] {
        std::string received = stream->TakeReceived();
        std::unique_ptr<ClientStream> established = TakeHandshake(stream);
        spdlog::debug("tls: address={} {} established{}", stream->peer_address(), stream->session().protocol_version(),
                      stream->session().resumed() ? " (resumed)" : "");
        if (websocket) {
          StartUpgrade(std::move(established), std::move(received), amqp);
        } else if (amqp) {
          StartAmqpPeer(std::move(established), nullptr, std::move(received));
        } else {
          StartMqttPeer(std::move(established), std::move(received), /*counted=*/true);
        }
      },
      [this, stream](const std::string& why) {
        // Certificate refusals are what an operator looks for; the rest
        // (scanners, clear text on the TLS port, timeouts) is routine.
        const bool certificate = why.rfind("client certificate refused", 0) == 0;
        spdlog::log(certificate ? spdlog::level::warn : spdlog::level::info, "tls {}: handshake failed: {}",
                    stream->peer_address(), why);
        std::shared_ptr<ClientStream> doomed = TakeHandshake(stream);
        shared_.connections.fetch_sub(1);
        loop_.Post([doomed] {});  // we are inside its callback
        CheckStopped();
      });
}

std::unique_ptr<ClientStream> ShardRuntime::TakeHandshake(ClientStream* stream) {
  auto it = handshakes_.find(stream);
  if (it == handshakes_.end()) return nullptr;
  std::unique_ptr<ClientStream> owned = std::move(it->second);
  handshakes_.erase(it);
  return owned;
}

void ShardRuntime::AbortHandshakes() {
  std::vector<ClientStream*> running;
  for (auto& entry : handshakes_) running.push_back(entry.first);
  for (ClientStream* stream : running) {
    std::shared_ptr<ClientStream> doomed = TakeHandshake(stream);
    doomed->Abort();
    shared_.connections.fetch_sub(1);
    loop_.Post([doomed] {});
  }
}

std::unique_ptr<ClientStream> ShardRuntime::AdoptStream(ClientStream::Detached detached) {
  auto tcp = io::TcpConnection::Adopt(loop_, detached.fd);
  if (!tcp) return nullptr;
  std::unique_ptr<ClientStream> stream;
  if (detached.tls) {
    stream = std::make_unique<TlsStream>(loop_, std::move(tcp), std::move(detached.tls));
  } else {
    stream = std::make_unique<TcpStream>(std::move(tcp));
  }
  if (detached.ws) stream = std::make_unique<WebSocketStream>(loop_, std::move(stream), std::move(detached.ws));
  return stream;
}

void ShardRuntime::AdoptLayeredMqtt(ClientStream::Detached detached, std::string received,
                                    ConnectionGuard::TicketPtr admission) {
  // The client address rides in front of the bytes, as for a plain socket.
  std::string client_address = TakeHandOffAddress(received);
  if (shutting_down_) {
    ::close(detached.fd);
    shared_.connections.fetch_sub(1);
    return;
  }
  auto stream = AdoptStream(std::move(detached));
  if (!stream) {
    shared_.connections.fetch_sub(1);
    return;
  }
  stream->set_client_address(std::move(client_address));
  stream->set_admission(std::move(admission));
  StartMqttPeer(std::move(stream), std::move(received), /*counted=*/true);
}

}  // namespace estuary::server
