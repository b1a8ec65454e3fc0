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

#include "cluster-core/broker/authenticator.h"
#include "cluster-core/broker/authorizer.h"
#include "cluster-core/broker/shard_broker.h"
#include "frontends/amqp/session/connection.h"
#include "frontends/mqtt/session/connection.h"
#include "io/uv/tcp.h"
#include "io/uv/uv_loop.h"
#include "persistence/storage_engine.h"
#include "server/proxy_gate.h"
#include "server/tcp_stream.h"

namespace estuary::server {

// State every shard of a node shares (read-mostly, atomics only).
struct NodeShared {
  std::atomic<uint64_t> connections{0};  // node-wide, for max-connections
  uint32_t max_connections = 0;
  core::Authenticator* authenticator = nullptr;
  core::Authorizer* authorizer = nullptr;  // --acl-file; null: everything allowed
  std::vector<std::string> proxy_from;  // --proxy-from
  // In a cluster (docs/cluster.md "One client id per cluster"): asks the
  // client-id registry for an id, from a shard's thread; `done` runs on the
  // cluster agent's thread, with the session read from its partition when
  // it was served elsewhere (docs/partitions.md "Sessions on partitions").
  // Unset on a single node.
  struct ClaimReply {
    bool granted = false;
    std::optional<std::vector<std::pair<std::string, std::string>>> session;  // keys and values
    uint16_t taken_from = 0;  // the node that held it before (ShardBroker::AdoptSession)
  };
  std::function<void(const std::string& client_id, bool clean_start, std::function<void(ClaimReply)> done)>
      claim_client_id;
  std::function<void(const std::string& client_id)> release_client_id;
};

class ShardRuntime {
 public:
  ShardRuntime(core::ShardConfig config, core::ShardLink& link, core::ShardMetrics& metrics,
               NodeShared& shared);
  ~ShardRuntime();

  // Binds the MQTT listener; returns the bound port.
  Expected<uint16_t, std::string> ListenMqtt(const io::Endpoint& at);
  // Takes a socket another shard accepted, with the bytes it already read.
  void AdoptMqtt(int fd, std::string received);
  // Binds the AMQP 1.0 listener; returns the bound port.
  Expected<uint16_t, std::string> ListenAmqp(const io::Endpoint& at, amqp::AmqpSettings settings);
  // Takes an AMQP connection (socket and Proton state) another shard
  // accepted, once its open named a container-id this shard owns.
  void AdoptAmqp(int fd, std::shared_ptr<amqp::AmqpConnection> connection);
  // Stops accepting, disconnects every client (MQTT 5: 0x8B Server shutting
  // down; AMQP: close with amqp:connection:forced), then stops the loop
  // once all are closed or `grace_ms` passed.
  void BeginShutdown(uint32_t grace_ms, std::function<void()> on_stopped = {});

  // How a socket reaches the shard owning its client id (set by the node).
  using HandOffFn = std::function<void(uint16_t shard, int fd, std::string received)>;
  void set_handoff(HandOffFn handoff) { handoff_ = std::move(handoff); }
  using AmqpHandOffFn =
      std::function<void(uint16_t shard, int fd, std::shared_ptr<amqp::AmqpConnection> connection)>;
  void set_amqp_handoff(AmqpHandOffFn handoff) { amqp_handoff_ = std::move(handoff); }

  // Hands the shard its storage engine; the broker writes to it from now on.
  void AttachStorage(std::unique_ptr<persistence::StorageEngine> engine);

  io::UvLoop& loop() { return loop_; }
  core::ShardBroker& broker() { return broker_; }
  size_t connection_count() const { return peers_.size() + amqp_peers_.size(); }
  const ProxyGate& proxy_gate() const { return proxy_gate_; }

 private:
  struct MqttPeer;
  // `client_address`: from a balancer's PROXY header ("" = the socket's peer).
  void Accept(int fd, std::string received, std::string client_address = {});
  void OnData(MqttPeer* peer, std::string_view bytes);
  void HandOff(MqttPeer* peer);
  void Remove(MqttPeer* peer);
  void CheckStopped();
  // AMQP (server/shard_runtime_amqp.cc)
  struct AmqpPeer {
    std::shared_ptr<io::TcpConnection> tcp;
    std::unique_ptr<TcpStream> stream;
    std::shared_ptr<amqp::AmqpConnection> amqp;
    uint16_t handoff_target = 0;  // the shard that owns the container-id
  };
  void AcceptAmqp(int fd, std::string client_address = {});  // address: from a PROXY header
  void StartAmqpPeer(std::shared_ptr<io::TcpConnection> tcp, std::shared_ptr<amqp::AmqpConnection> connection,
                     std::string client_address = {});
  void HandOffAmqp(AmqpPeer* peer);
  amqp::SessionClaims AmqpSessionClaims();  // durable links' claims, answered on this shard
  void RemoveAmqp(AmqpPeer* peer);
  void ShutdownAmqp();
  void AbortAmqp();

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
  std::unordered_map<AmqpPeer*, std::unique_ptr<AmqpPeer>> amqp_peers_;
  AmqpHandOffFn amqp_handoff_;
  bool shutting_down_ = false;
  std::function<void()> on_stopped_;
};

}  // namespace estuary::server
