#pragma once
// ShardRuntime: one shard of a node: its libuv loop (run by one thread),
// its ShardBroker, its MQTT listener (SO_REUSEPORT on the node's port) and
// the connections it owns. Everything here runs on the shard's thread,
// except Mailbox sends from other shards.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "cluster-core/broker/authenticator.h"
#include "cluster-core/broker/shard_broker.h"
#include "frontends/mqtt/session/connection.h"
#include "io/uv/tcp.h"
#include "io/uv/uv_loop.h"
#include "server/tcp_stream.h"

namespace estuary::server {

// State every shard of a node shares (read-mostly, atomics only).
struct NodeShared {
  std::atomic<uint64_t> connections{0};  // node-wide, for max-connections
  uint32_t max_connections = 0;
  core::Authenticator* authenticator = nullptr;
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
  // Stops accepting, disconnects every client (MQTT 5: 0x8B Server shutting
  // down), then stops the loop once all are closed or `grace_ms` passed.
  void BeginShutdown(uint32_t grace_ms, std::function<void()> on_stopped = {});

  // How a socket reaches the shard owning its client id (set by the node).
  using HandOffFn = std::function<void(uint16_t shard, int fd, std::string received)>;
  void set_handoff(HandOffFn handoff) { handoff_ = std::move(handoff); }

  io::UvLoop& loop() { return loop_; }
  core::ShardBroker& broker() { return broker_; }
  size_t connection_count() const { return peers_.size(); }

 private:
  struct MqttPeer;
  void Accept(int fd, std::string received);
  void OnData(MqttPeer* peer, std::string_view bytes);
  void HandOff(MqttPeer* peer);
  void Remove(MqttPeer* peer);
  void CheckStopped();

  io::UvLoop loop_;  // first member: destroyed last
  core::ShardBroker broker_;
  NodeShared& shared_;
  std::unique_ptr<io::TcpListener> mqtt_listener_;
  std::unordered_map<MqttPeer*, std::unique_ptr<MqttPeer>> peers_;
  HandOffFn handoff_;
  bool shutting_down_ = false;
  std::function<void()> on_stopped_;
};

}  // namespace estuary::server
