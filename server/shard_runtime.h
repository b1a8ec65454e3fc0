#pragma once
// ShardRuntime: one shard of a node: its libuv loop (run by one thread),
// its ShardBroker, its MQTT and AMQP listeners (SO_REUSEPORT on the node's
// ports) and the connections it owns. Everything here runs on the shard's thread,
// except Mailbox sends from other shards.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include <nlohmann/json_fwd.hpp>

#include "cluster-core/broker/authenticator.h"
#include "cluster-core/broker/authorizer.h"
#include "cluster-core/broker/shard_broker.h"
#include "frontends/amqp/session/connection.h"
#include "frontends/mqtt/session/connection.h"
#include "io/uv/tcp.h"
#include "io/uv/uv_loop.h"
#include "persistence/storage_engine.h"
#include "server/proxy_gate.h"
#include "io/tls/tls_context.h"
#include "server/client_stream.h"
#include "server/connection_guard.h"

namespace estuary::server {

// State every shard of a node shares (read-mostly, atomics only).
struct NodeShared {
  std::atomic<uint64_t> connections{0};  // node-wide, for max-connections
  std::atomic<uint32_t> max_connections{0};  // --max-connections; a reload stores a new one
  core::Authenticator* authenticator = nullptr;
  core::Authorizer* authorizer = nullptr;  // --acl-file; null: everything allowed
  std::vector<std::string> proxy_from;  // --proxy-from
  // --mqtts/--amqps (docs/security.md "TLS"): null without a certificate.
  std::shared_ptr<io::TlsContext> tls;
  int64_t tls_handshake_timeout_ms = 10'000;
  // --connect-timeout (a reload stores a new one; connections take it as
  // they start), and the connections it closed, per protocol
  // (estuary_connect_timeouts_total).
  std::atomic<uint32_t> connect_timeout_ms{10'000};
  std::atomic<uint64_t> mqtt_connect_timeouts{0};
  std::atomic<uint64_t> amqp_connect_timeouts{0};
  // WebSocket listeners (server/ws_stream.h): the opening handshake's
  // deadline, and the largest frame a client may send (--max-packet-size).
  int64_t ws_handshake_timeout_ms = 10'000;
  uint64_t ws_max_frame_bytes = 1024 * 1024;
  bool tls_identity_as_username = false;
  // In a cluster (docs/cluster.md "One client id per cluster"): asks the
  // client-id registry for an id, from a shard's thread; `done` runs on the
  // cluster agent's thread, with the session read from its partition when
  // it was served elsewhere (docs/partitions.md "Sessions on partitions").
  // Unset on a single node.
  struct ClaimReply {
    bool granted = false;
    std::optional<std::vector<std::pair<std::string, std::string>>> session;  // keys and values
    uint16_t taken_from = 0;  // the node that held it before (ShardBroker::AdoptSession)
    // Set: the shard's copy is replaced under this copy fence (0: unfenced),
    // announced with ShardBroker::SessionCopyReplaced once it is.
    std::optional<uint64_t> copy_fence;
  };
  std::function<void(const std::string& client_id, bool clean_start, std::function<void(ClaimReply)> done)>
      claim_client_id;
  std::function<void(const std::string& client_id)> release_client_id;
  // Abuse limits at accept (server/connection_guard.h); null when none is set.
  std::unique_ptr<ConnectionGuard> guard;
};

class ShardRuntime {
 public:
  ShardRuntime(core::ShardConfig config, core::ShardLink& link, core::ShardMetrics& metrics,
               NodeShared& shared);
  ~ShardRuntime();

  // Binds the MQTT listener; returns the bound port.
  Expected<uint16_t, std::string> ListenMqtt(const io::Endpoint& at);
  // Binds the MQTT over TLS listener (--mqtts); returns the bound port.
  Expected<uint16_t, std::string> ListenMqtts(const io::Endpoint& at);
  // MQTT over WebSocket (--mqtt-ws; --mqtt-wss: over TLS, needs the TLS settings).
  Expected<uint16_t, std::string> ListenMqttWs(const io::Endpoint& at);
  Expected<uint16_t, std::string> ListenMqttWss(const io::Endpoint& at);
  // Takes a socket another shard accepted, with the bytes it already read
  // (plaintext, the CONNECT among them) and the layers above the socket
  // (TLS, WebSocket: handshakes done). `admission`: the abuse limits'
  // ticket the accepting shard took.
  void AdoptMqtt(ClientStream::Detached detached, std::string received,
                 ConnectionGuard::TicketPtr admission = nullptr);
  // Binds the AMQP 1.0 listener; returns the bound port.
  Expected<uint16_t, std::string> ListenAmqp(const io::Endpoint& at, amqp::AmqpSettings settings);
  // Binds the AMQP over TLS listener (--amqps; ListenAmqp first, for the settings).
  Expected<uint16_t, std::string> ListenAmqps(const io::Endpoint& at);
  // AMQP over WebSocket (--amqp-ws, --amqp-wss; ListenAmqp first, for the settings).
  Expected<uint16_t, std::string> ListenAmqpWs(const io::Endpoint& at);
  Expected<uint16_t, std::string> ListenAmqpWss(const io::Endpoint& at);
  // Takes an AMQP connection (socket, Proton state and the layers above
  // the socket) another shard accepted, once its open named a container-id
  // this shard owns.
  void AdoptAmqp(ClientStream::Detached detached, std::shared_ptr<amqp::AmqpConnection> connection,
                 ConnectionGuard::TicketPtr admission = nullptr);
  // Stops accepting, disconnects every client (MQTT 5: 0x8B Server shutting
  // down; AMQP: close with amqp:connection:forced), then stops the loop
  // once all are closed or `grace_ms` passed.
  void BeginShutdown(uint32_t grace_ms, std::function<void()> on_stopped = {});

  // How a socket reaches the shard owning its client id (set by the node).
  using HandOffFn = std::function<void(uint16_t shard, ClientStream::Detached detached, std::string received,
                                       ConnectionGuard::TicketPtr admission)>;
  void set_handoff(HandOffFn handoff) { handoff_ = std::move(handoff); }
  using AmqpHandOffFn = std::function<void(uint16_t shard, ClientStream::Detached detached,
                                           std::shared_ptr<amqp::AmqpConnection> connection,
                                           ConnectionGuard::TicketPtr admission)>;
  void set_amqp_handoff(AmqpHandOffFn handoff) { amqp_handoff_ = std::move(handoff); }

  // Hands the shard its storage engine; the broker writes to it from now on.
  void AttachStorage(std::unique_ptr<persistence::StorageEngine> engine);

  io::UvLoop& loop() { return loop_; }
  core::ShardBroker& broker() { return broker_; }
  size_t connection_count() const { return peers_.size() + amqp_peers_.size() + handshakes_.size(); }
  const ProxyGate& proxy_gate() const { return proxy_gate_; }
  // The exactly-once AMQP senders' kept tags (its stats() from any thread).
  const amqp::InboundLedger& amqp_ledger() const { return *amqp_ledger_; }

  // Admin API (server/shard_runtime_admin.cc, docs/admin-api.md); the
  // shard's thread only. ClientsJson: {"matched": N, "clients": [...]}, the
  // connections matching `filter` (substrings; "" matches all), at most
  // `window` of them, the first by client id. Kick: disconnects every
  // connection with that client id (MQTT 5: DISCONNECT 0x98; AMQP: close
  // with amqp:connection:forced); returns how many.
  struct ClientFilter {
    std::string client_id, username, address;
  };
  nlohmann::json ClientsJson(const ClientFilter& filter, size_t window) const;
  size_t Kick(const std::string& client_id);

 private:
  struct MqttPeer;
  // The abuse limits' verdict on a socket a listener of this shard accepted
  // (`client_address`: from a PROXY header, "" = the socket's peer): its
  // ticket (null when no limit is set), or nullopt with the socket closed.
  std::optional<ConnectionGuard::TicketPtr> Admit(int fd, const std::string& client_address);
  // `client_address`: from a balancer's PROXY header ("" = the socket's peer).
  void Accept(int fd, std::string received, std::string client_address = {},
              ConnectionGuard::TicketPtr admission = nullptr);
  // A socket a listener of this shard accepted, counted in the node's
  // connections; null (fd closed) when shutting down or libuv refuses it.
  std::shared_ptr<io::TcpConnection> AdoptCounted(int fd);
  // Runs a session on `stream`; `counted`: already in the node's count.
  void StartMqttPeer(std::unique_ptr<ClientStream> stream, std::string received, bool counted);
  void OnData(MqttPeer* peer, std::string_view bytes);
  // Strips the PROXY v2 header HandOff puts in front of a moved socket's
  // bytes; returns its client address ("" if there is none).
  static std::string TakeHandOffAddress(std::string& received);
  // Detach refused: true (and counted) when queued output may still drain,
  // so the hand-off is tried again in kHandOffRetryMs, at most kHandOffRetries times.
  static bool RetryHandOffLater(const ClientStream& stream, int& attempts);
  static constexpr int64_t kHandOffRetryMs = 1;
  static constexpr int kHandOffRetries = 200;
  void HandOff(MqttPeer* peer);
  void Remove(MqttPeer* peer);
  void CheckStopped();
  // AMQP (server/shard_runtime_amqp.cc)
  struct AmqpPeer {
    std::unique_ptr<ClientStream> stream;
    std::shared_ptr<amqp::AmqpConnection> amqp;  // holds a reference to *stream: declared after it
    uint16_t handoff_target = 0;  // the shard that owns the container-id
    int handoff_attempts = 0;     // Detach refused while output was queued
  };
  void AcceptAmqp(int fd, std::string client_address, ConnectionGuard::TicketPtr admission);  // address: from a PROXY header
  // `received`: plaintext that came with the end of a TLS handshake.
  void StartAmqpPeer(std::unique_ptr<ClientStream> stream, std::shared_ptr<amqp::AmqpConnection> connection,
                     std::string received = {});
  void OnAmqpData(AmqpPeer* peer, std::string_view bytes);
  void HandOffAmqp(AmqpPeer* peer);
  amqp::SessionClaims AmqpSessionClaims();  // durable links' claims, answered on this shard
  void RemoveAmqp(AmqpPeer* peer);
  void ShutdownAmqp();
  void AbortAmqp();
  // TLS (server/shard_runtime_tls.cc): the handshake, then the protocol
  // (`websocket`: then the WebSocket opening handshake).
  void AcceptTls(int fd, std::string client_address, bool amqp, bool websocket = false);
  void AdoptLayeredMqtt(ClientStream::Detached detached, std::string received, ConnectionGuard::TicketPtr admission);
  // A moved connection's stream on this loop, its layers rebuilt on their
  // sessions; null (fd closed) if it cannot be.
  std::unique_ptr<ClientStream> AdoptStream(ClientStream::Detached detached);
  // WebSocket (server/shard_runtime_ws.cc): the opening handshake on
  // `inner` (clear text or TLS), then the protocol.
  void AcceptWebSocket(int fd, std::string client_address, ConnectionGuard::TicketPtr admission, bool amqp);
  void StartUpgrade(std::unique_ptr<ClientStream> inner, std::string received, bool amqp);
  std::unique_ptr<ClientStream> TakeHandshake(ClientStream* stream);
  void AbortHandshakes();

  io::UvLoop loop_;  // first member: destroyed last
  // Durable state (server/storage.h); outlives the broker's store.
  std::unique_ptr<persistence::StorageEngine> engine_;
  core::ShardBroker broker_;
  NodeShared& shared_;
  ProxyGate proxy_gate_{loop_, shared_.proxy_from};  // before the listeners it serves
  std::unique_ptr<io::TcpListener> mqtt_listener_;
  std::unordered_map<MqttPeer*, std::unique_ptr<MqttPeer>> peers_;
  HandOffFn handoff_;
  std::unique_ptr<io::TcpListener> amqp_listener_;
  amqp::AmqpSettings amqp_settings_;
  // Client senders in rcv-settle-mode second: their kept tags, by
  // container-id and link name, across this shard's connections.
  std::shared_ptr<amqp::InboundLedger> amqp_ledger_ = std::make_shared<amqp::InboundLedger>();
  std::unordered_map<AmqpPeer*, std::unique_ptr<AmqpPeer>> amqp_peers_;
  AmqpHandOffFn amqp_handoff_;
  std::unique_ptr<io::TcpListener> mqtts_listener_;
  std::unique_ptr<io::TcpListener> amqps_listener_;
  std::unique_ptr<io::TcpListener> mqtt_ws_listener_;
  std::unique_ptr<io::TcpListener> mqtt_wss_listener_;
  std::unique_ptr<io::TcpListener> amqp_ws_listener_;
  std::unique_ptr<io::TcpListener> amqp_wss_listener_;
  // TLS and WebSocket connections whose handshake is running (no protocol yet).
  std::unordered_map<ClientStream*, std::unique_ptr<ClientStream>> handshakes_;
  bool shutting_down_ = false;
  std::function<void()> on_stopped_;
};

}  // namespace estuary::server
