#pragma once
// Node: one estuaryd process. Builds the shards from the config, binds the
// listeners (MQTT on every shard; admin, $SYS and signals on shard 0), runs
// shard 0 on the calling thread and the others on their own threads, and
// shuts everything down on SIGTERM/SIGINT. SIGHUP calls Reload.
//
// With a cluster secret, shard 0 also runs the inter-node links (a
// UvTransport on --cluster, dialling --seeds) and the ClusterAgent, which
// every shard reaches through its ClusterPort (a post to shard 0's loop).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "cluster-core/broker/metrics.h"
#include "cluster-core/cluster/cluster_agent.h"
#include "cluster-core/links/uv_transport.h"
#include "io/uv/admin_token.h"
#include "io/uv/http_server.h"
#include "server/acl_authorizer.h"
#include "server/admin_query.h"
#include "server/bootstrap_gate.h"
#include "server/config.h"
#include "server/password_authenticator.h"
#include "server/reload.h"
#include "server/shard_runtime.h"

namespace estuary::server {

class Node final : public core::ShardLink {
 public:
  explicit Node(NodeConfig config);
  ~Node() override;

  // Binds every listener. Returns an error naming what failed.
  Expected<void, std::string> Start();
  // The `estuaryd ready ...` line, valid after Start().
  std::string ReadyLine() const;
  // Runs until shutdown completes. Call on the thread that called Start().
  void Run();
  // Thread-safe: asks the node to shut down (as SIGTERM does).
  void RequestShutdown();
  // SIGHUP and POST /api/reload (docs/configuration.md "Reload"): reads the
  // configuration again through the config source (when set) and applies
  // what may change live (server/reload.h: log level, limits), logging each
  // changed key and, for one that needs a restart, that it does; a config
  // that fails to parse changes nothing. Then reads the files that may
  // change under a running node again (--password-file, --acl-file,
  // --tls-cert/--tls-key/--tls-ca/--tls-crl, --admin-token-file,
  // --cluster-tls-cert/--cluster-tls-key/--cluster-tls-ca): new connections
  // and operations use the new content; a file that fails to parse keeps
  // the old content. No connection is closed. Shard 0's thread.
  ReloadReport Reload();
  // How Reload reads the configuration again (estuaryd's main: its command
  // line parsed again, so --config is read again). Before Start().
  using ConfigSource = std::function<Expected<NodeConfig, std::string>()>;
  void set_config_source(ConfigSource source) { config_source_ = std::move(source); }

  // core::ShardLink
  void Post(uint16_t shard, std::function<void(core::ShardBroker&)> work) override;

  // Admin pages (server/admin.cc).
  std::string MetricsText() const;
  std::string LoadJson() const;

 private:
  io::HttpResponse ServeAdmin(const std::string& method, const std::string& path);
  // The admin API's gathered pages and the dashboard (server/admin_api.cc,
  // server/admin_overview.cc; docs/admin-api.md). ServeAdminApi runs before
  // ServeAdmin and returns false for the paths it leaves to it.
  bool ServeAdminApi(const std::string& method, const std::string& target, io::HttpServer::Responder respond);
  void ServeOverview(io::HttpServer::Responder respond);
  void ServeListing(const std::string& path, const std::string& target, const Page& page,
                    io::HttpServer::Responder respond);
  void ServeKick(const std::string& client_id, io::HttpServer::Responder respond);
  static nlohmann::json MergeShared(std::vector<nlohmann::json> parts, const std::string& group, const Page& page);
  nlohmann::json RetainedJson(const std::string& topic, const Page& page) const;
  // Runs `part` on every shard's loop and `done` with the results (index =
  // shard) on shard 0's, once all answered.
  void GatherShards(std::function<nlohmann::json(ShardRuntime&)> part,
                    std::function<void(std::vector<nlohmann::json>)> done);
  Expected<void, std::string> StartAuxiliaryListeners();
  Expected<void, std::string> StartTlsListeners();
  Expected<void, std::string> StartWebSocketListeners();  // --mqtt-ws, --amqp-ws, --mqtt-wss, --amqp-wss
  // Creates the transport and agent and hands every shard its port
  // (before storage recovery, so recovered routes reach the agent).
  void SetUpCluster();
  Expected<void, std::string> StartClusterLinks();
  Expected<void, std::string> StartMetadata();
  // --bootstrap-expect: the gate that may make this node the founder.
  void StartBootstrapGate(const std::vector<std::string>& seeds);
  std::string ClusterMetricsText() const;
  // Opens each shard's engine and recovers its state (server/storage.cc).
  Expected<void, std::string> OpenStorage();
  void InstallSignalHandlers();
  // Reload's parts (server/node_reload.cc).
  void ReloadConfig(ReloadReport& report);
  void ReloadFiles(ReloadReport& report);
  void ApplyLimits(const NodeConfig& before);
  io::HttpResponse ServeReload(const std::string& method);
  void StartSysTimer();
  void PublishSys();
  void Shutdown();

  NodeConfig config_;
  NodeShared shared_;
  std::vector<std::unique_ptr<core::ShardMetrics>> metrics_;
  std::vector<std::unique_ptr<ShardRuntime>> shards_;
  std::vector<std::thread> threads_;
  std::unique_ptr<io::HttpServer> admin_;
  std::unique_ptr<io::AdminToken> admin_token_;  // --admin-token-file; checked before ServeAdmin
  std::unique_ptr<PasswordFileAuthenticator> authenticator_;  // --password-file
  std::unique_ptr<GuardedAuthenticator> guarded_authenticator_;  // authenticator_ seen by the abuse limits
  std::unique_ptr<AclAuthorizer> authorizer_;                 // --acl-file
  // Without a cluster secret: accepted inter-node connections are closed.
  std::unique_ptr<io::TcpListener> cluster_listener_;
  // With one: the links and the agent, both on shard 0's loop. Declared
  // after shards_, so destroyed before the loops they use.
  std::unique_ptr<cluster::UvTransport> transport_;
  std::shared_ptr<io::TlsContext> cluster_tls_;  // --cluster-tls-*; the transport shares it
  // The metadata group's raft state (<data-dir>/meta, or in memory without
  // --data-dir); declared before agent_, so it outlives the group.
  std::unique_ptr<persistence::StorageEngine> meta_engine_;
  std::unique_ptr<persistence::StorageEngine> partition_engine_;
  std::unique_ptr<cluster::ClusterAgent> agent_;
  // --bootstrap-expect; uses the agent's membership and metadata group, so
  // destroyed before the agent.
  std::unique_ptr<BootstrapGate> bootstrap_gate_;
  // The agent's way to the shards: shard 0 (its own loop) by a plain post,
  // the others by their mailboxes.
  class AgentShardLink final : public core::ShardLink {
   public:
    explicit AgentShardLink(Node& node) : node_(node) {}
    void Post(uint16_t shard, std::function<void(core::ShardBroker&)> work) override;

   private:
    Node& node_;
  };
  AgentShardLink agent_link_{*this};
  std::thread::id shard0_thread_;  // Start() and Run() run shard 0 here
  uint16_t mqtt_port_ = 0;
  uint16_t amqp_port_ = 0;
  uint16_t admin_port_ = 0;
  uint16_t cluster_port_ = 0;
  std::optional<io::Endpoint> mqtts_;  // bound --mqtts
  std::optional<io::Endpoint> amqps_;  // bound --amqps
  std::optional<io::Endpoint> mqtt_ws_;   // bound --mqtt-ws
  std::optional<io::Endpoint> amqp_ws_;   // bound --amqp-ws
  std::optional<io::Endpoint> mqtt_wss_;  // bound --mqtt-wss
  std::optional<io::Endpoint> amqp_wss_;  // bound --amqp-wss
  int64_t started_ms_ = 0;
  uv_signal_t* sigterm_ = nullptr;
  uv_signal_t* sigint_ = nullptr;
  uv_signal_t* sighup_ = nullptr;
  bool shutting_down_ = false;
  bool draining_ = false;  // POST /api/drain; admin loop (shard 0) only
  ConfigSource config_source_;  // Reload; unset: the files only
};

}  // namespace estuary::server
