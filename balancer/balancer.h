#pragma once
// Balancer: one estuary-lb process on one UvLoop (single-threaded: a
// balancer copies bytes, it does not parse them after the CONNECT). Owns the
// node table and its probes, the pair state and its UDP heartbeat socket,
// the service listeners (open only while active) and every proxied
// connection. Everything runs on the loop's thread.
#include <uv.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>

#include "balancer/lb_config.h"
#include "balancer/node_table.h"
#include "balancer/pair_state.h"
#include "balancer/proxy_connection.h"
#include "io/uv/http_server.h"
#include "io/uv/tcp.h"
#include "io/uv/uv_loop.h"

namespace estuary::balancer {

class Balancer {
 public:
  // `announce` receives the lines for stdout: the ready line once the role
  // is decided, then one `estuary-lb role=ROLE epoch=N` per change.
  Balancer(io::UvLoop& loop, BalancerConfig config, std::function<void(const std::string&)> announce);
  ~Balancer();

  // Binds the heartbeat socket and reserves the service ports.
  Expected<void, std::string> Start();
  // Closes listeners and connections; `done` runs once all are closed.
  void Stop(std::function<void()> done);

  std::string ReadyLine() const;
  const NodeTable& nodes() const { return table_; }
  Role role() const { return pair_->role(); }
  uint64_t epoch() const { return pair_->epoch(); }
  size_t connection_count() const { return connections_.size(); }

 private:
  Expected<void, std::string> BindHeartbeat();
  Expected<void, std::string> Reserve(io::Endpoint& at, int& fd);
  void PollNodes();
  void Probe(const std::string& admin);
  void SendHeartbeat();
  void OnDatagram(std::string_view bytes, const sockaddr* from);
  void TickPair();
  void OnRoleChange();
  bool OpenListeners();
  void CloseListeners();
  void Accept(int fd, Service service);
  std::optional<Choice> Choose(Service service, std::string_view client_id, const std::vector<std::string>& exclude);
  void RunVipCommand(bool add);
  // Admin pages (balancer_admin.cc).
  Expected<void, std::string> StartAdmin();
  io::HttpResponse ServeAdmin(const std::string& method, const std::string& path);
  std::string NodesJson() const;
  std::string MetricsText() const;

  io::UvLoop& loop_;
  BalancerConfig config_;
  std::function<void(const std::string&)> announce_;
  NodeTable table_;
  std::optional<PairState> pair_;  // made in Start(), once the heartbeat port is known
  ProxyHost host_;
  std::unordered_set<std::string> probing_;
  std::unordered_set<ProxyConnection*> connections_;
  std::unique_ptr<io::HttpServer> admin_;
  uint16_t admin_port_ = 0;
  uint64_t accepted_total_ = 0;
  uint64_t refused_total_ = 0;  // no node, dropped before a node, or not active
  std::unique_ptr<io::TcpListener> mqtt_listener_;
  std::unique_ptr<io::TcpListener> amqp_listener_;
  int mqtt_reserved_ = -1;
  int amqp_reserved_ = -1;
  uv_udp_t* udp_ = nullptr;  // freed in its close callback
  std::string peer_;         // where heartbeats go
  io::TimerId poll_timer_ = 0;
  io::TimerId heartbeat_timer_ = 0;
  io::TimerId tick_timer_ = 0;
  bool ready_announced_ = false;
  bool stopping_ = false;
  std::function<void()> on_stopped_;
};

}  // namespace estuary::balancer
