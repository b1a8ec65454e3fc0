// ShardRuntime's WebSocket side (--mqtt-ws, --amqp-ws, --mqtt-wss,
// --amqp-wss; docs/mqtt.md and docs/amqp.md "WebSocket"): the listeners and
// the opening handshake under its deadline. Then the connection is an MQTT
// or AMQP one like any other: the same sessions, limits and hand-off to the
// shard owning its client id or container-id, its WebSocket framing state
// moving with the socket as a TLS session does.
//
// The clear-text WebSocket listeners sit behind the shard's ProxyGate, as
// the MQTT and AMQP ones do (a balancer forwards them with a PROXY v2
// header); the abuse limits are applied once the header is read, before
// the upgrade costs anything. The TLS ones take clients directly.
#include <spdlog/spdlog.h>

#include "server/shard_runtime.h"
#include "server/ws_stream.h"

namespace estuary::server {

Expected<uint16_t, std::string> ShardRuntime::ListenMqttWs(const io::Endpoint& at) {
  auto listener = io::TcpListener::Listen(loop_, at, [this](int fd) {
    proxy_gate_.Accept(fd, [this](int accepted, std::string client) {
      auto admission = Admit(accepted, client);
      if (admission) AcceptWebSocket(accepted, std::move(client), std::move(*admission), false);
    });
  });
  if (!listener) return MakeError(listener.error());
  mqtt_ws_listener_ = std::move(*listener);
  return mqtt_ws_listener_->port();
}

Expected<uint16_t, std::string> ShardRuntime::ListenAmqpWs(const io::Endpoint& at) {
  auto listener = io::TcpListener::Listen(loop_, at, [this](int fd) {
    proxy_gate_.Accept(fd, [this](int accepted, std::string client) {
      auto admission = Admit(accepted, client);
      if (admission) AcceptWebSocket(accepted, std::move(client), std::move(*admission), true);
    });
  });
  if (!listener) return MakeError(listener.error());
  amqp_ws_listener_ = std::move(*listener);
  return amqp_ws_listener_->port();
}

Expected<uint16_t, std::string> ShardRuntime::ListenMqttWss(const io::Endpoint& at) {
  auto listener = io::TcpListener::Listen(loop_, at, [this](int fd) { AcceptTls(fd, {}, false, true); });
  if (!listener) return MakeError(listener.error());
  mqtt_wss_listener_ = std::move(*listener);
  return mqtt_wss_listener_->port();
}

Expected<uint16_t, std::string> ShardRuntime::ListenAmqpWss(const io::Endpoint& at) {
  auto listener = io::TcpListener::Listen(loop_, at, [this](int fd) { AcceptTls(fd, {}, true, true); });
  if (!listener) return MakeError(listener.error());
  amqp_wss_listener_ = std::move(*listener);
  return amqp_wss_listener_->port();
}

void ShardRuntime::AcceptWebSocket(int fd, std::string client_address, ConnectionGuard::TicketPtr admission,
                                   bool amqp) {
  // Counted from the first byte: an upgrade holds a socket too.
  auto tcp = AdoptCounted(fd);
  if (!tcp) return;
  auto inner = std::make_unique<TcpStream>(std::move(tcp));
  inner->set_client_address(std::move(client_address));
  inner->set_admission(std::move(admission));
  StartUpgrade(std::move(inner), {}, amqp);
}

void ShardRuntime::StartUpgrade(std::unique_ptr<ClientStream> inner, std::string received, bool amqp) {
  // The client's address and the limits' ticket belong to the outer stream,
  // the one the session sees and a hand-off moves.
  std::string client_address = inner->client_address();
  ConnectionGuard::TicketPtr admission = inner->admission();
  auto owned = std::make_unique<WebSocketStream>(loop_, std::move(inner),
                                                 std::make_shared<io::WebSocketSession>(shared_.ws_max_frame_bytes));
  owned->set_client_address(std::move(client_address));
  owned->set_admission(std::move(admission));
  WebSocketStream* stream = owned.get();
  handshakes_.emplace(stream, std::move(owned));
  stream->Upgrade(
      shared_.ws_handshake_timeout_ms, amqp ? io::AmqpWebSocketPolicy() : io::MqttWebSocketPolicy(),
      std::move(received),
      [this, stream, amqp] {
        std::string payload = stream->TakeReceived();
        spdlog::debug("websocket {}: upgraded ({})", stream->peer_address(), stream->subprotocol());
        std::unique_ptr<ClientStream> established = TakeHandshake(stream);
        if (amqp) {
          StartAmqpPeer(std::move(established), nullptr, std::move(payload));
        } else {
          StartMqttPeer(std::move(established), std::move(payload), /*counted=*/true);
        }
      },
      [this, stream](const std::string& why) {
        spdlog::info("websocket {}: opening handshake failed: {}", stream->peer_address(), why);
        std::shared_ptr<ClientStream> doomed = TakeHandshake(stream);
        shared_.connections.fetch_sub(1);
        loop_.Post([doomed] {});  // we are inside its callback
        CheckStopped();
      });
}

}  // namespace estuary::server
