#pragma once
// Balancer: one estuary-lb process. The control plane runs on the UvLoop
// given to it (the main loop): the node table and its probes, the pair
// state and its UDP heartbeat socket, the admin pages, and the service
// listeners (open only while active), which accept and hand each client
// socket to the data-plane worker with the fewest connections. The data
// plane is `threads` ProxyWorkers, each a thread with its own loop owning
// the connections handed to it (proxy_worker.h); the control plane sends
// them immutable snapshots of the node table after every change. Every
// method here runs on the main loop's thread.
#include <uv.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "balancer/heartbeat_auth.h"
#include "balancer/lb_config.h"
#include "balancer/node_table.h"
#include "io/uv/admin_token.h"
#include "balancer/pair_state.h"
#include "balancer/proxy_connection.h"
#include "balancer/proxy_worker.h"
#include "io/uv/http_server.h"
#include "io/uv/tcp.h"
#include "io/uv/uv_loop.h"

namespace estuary::balancer {

class Balancer {
 public:
  // `announce` receives the lines for stdout: the ready line once the role
  // is decided, then one `estuary-lb role=ROLE epoch=N silent_ms=M` per change (M: how
  // long nothing had been heard from an active peer).
  Balancer(io::UvLoop& loop, BalancerConfig config, std::function<void(const std::string&)> announce);
  ~Balancer();

  // Binds the heartbeat socket, reserves the service ports and starts the
  // data-plane threads.
  Expected<void, std::string> Start();
  // Closes listeners and connections on every worker; `done` runs on the
  // main loop once all are closed. The destructor joins the workers.
  void Stop(std::function<void()> done);

  // SIGHUP (docs/balancer.md "Reload"): `fresh` is the command line parsed
  // again (its --config read again). Applies --nodes (ReloadNodes),
  // --admin-ca, --poll-interval, --probe-timeout, --log-level and the admin
  // token (--admin-token-file read again: the
  // probes send the new one and the admin listener wants it); every other
  // key is logged as needing a restart when it changed. Returns false, logging why, when the token
  // could not be read (the old one is kept). Main loop.
  bool Reload(const BalancerConfig& fresh);

  std::string ReadyLine() const;
  const NodeTable& nodes() const { return table_; }
  Role role() const { return pair_->role(); }
  uint64_t epoch() const { return pair_->epoch(); }
  // Client connections handed to the workers and not finished.
  size_t connection_count() const;
  size_t thread_count() const { return workers_.size(); }
  const ProxyWorker& worker(size_t i) const { return *workers_[i]; }
  bool listening() const { return mqtt_listener_ || amqp_listener_ || mqtt_ws_listener_ || amqp_ws_listener_; }

 private:
  void ReloadNodes(const std::vector<io::Endpoint>& fresh);
  Expected<void, std::string> BindHeartbeat();
  Expected<void, std::string> Reserve(io::Endpoint& at, int& fd);
  void PollNodes();
  void Probe(const std::string& admin);
  void SendHeartbeat();
  void OnDatagram(std::string_view bytes, const sockaddr* from);
  void RejectHeartbeat(const Rejected& rejected, const sockaddr* from);
  void TickPair();
  void OnRoleChange();
  bool OpenListeners();
  void CloseListeners();
  void Accept(int fd, Service service);
  ProxyWorker& LeastBusyWorker();
  void StartWorkers();
  void PublishNodes();
  void OnDialFailed(const std::string& admin, int status);
  void OnWorkerIdle();
  uint64_t RefusedTotal() const;
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
  std::optional<HeartbeatAuth> auth_;  // with --pair-secret-file
  uint64_t heartbeats_accepted_ = 0;
  uint64_t heartbeats_rejected_[kHeartbeatRejectReasons] = {};
  int64_t reject_warned_ms_ = -1;  // rate limit of the warnings: one per second
  uint64_t rejects_unwarned_ = 0;
  std::unordered_set<std::string> probing_;
  // Worker threads' calls come back through the main loop's mailbox; they
  // check this (on the main thread) so none runs after the destructor.
  struct Alive {
    Balancer* balancer;
  };
  std::shared_ptr<Alive> alive_;
  std::vector<std::unique_ptr<ProxyWorker>> workers_;
  size_t next_worker_ = 0;      // rotates ties between equally busy workers
  size_t workers_pending_ = 0;  // Stop(): workers still closing connections
  std::unique_ptr<io::HttpServer> admin_;
  std::unique_ptr<io::AdminToken> admin_token_;  // --admin-token-file
  uint16_t admin_port_ = 0;
  uint64_t accepted_total_ = 0;
  uint64_t refused_total_ = 0;  // not active or stopping (the workers count the rest)
  std::unique_ptr<io::TcpListener> mqtt_listener_;
  std::unique_ptr<io::TcpListener> amqp_listener_;
  int mqtt_reserved_ = -1;
  int amqp_reserved_ = -1;
  // --mqtt-ws, --amqp-ws (when set): the same life as the two above.
  std::unique_ptr<io::TcpListener> mqtt_ws_listener_;
  std::unique_ptr<io::TcpListener> amqp_ws_listener_;
  int mqtt_ws_reserved_ = -1;
  int amqp_ws_reserved_ = -1;
  bool AllListening() const;
  void ReserveServicePorts();
  void CloseReservedPorts();
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
