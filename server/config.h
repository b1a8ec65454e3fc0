#pragma once
// estuaryd's configuration: flags and a TOML file (--config) whose keys are
// named like the flags (`mqtt = "127.0.0.1:1883"`, `max-connections = 1000`).
// A flag given on the command line wins over the file.
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "cluster-core/broker/limits.h"
#include "cluster-core/broker/shared_strategy.h"
#include "io/tls/tls_context.h"
#include "io/uv/cli_options.h"
#include "io/uv/log_setup.h"
#include "io/uv/tcp.h"

namespace estuary::server {

struct NodeConfig {
  uint16_t node_id = 1;
  std::string data_dir;  // empty: nothing is stored (docs/storage.md)
  io::Endpoint mqtt{"127.0.0.1", 1883};
  io::Endpoint amqp{"127.0.0.1", 5672};
  io::Endpoint admin{"127.0.0.1", 8080};
  // --admin-token-file (docs/security.md "Admin API"): every admin request
  // but GET /healthz needs `Authorization: Bearer TOKEN`; required when
  // --admin is not a loopback address. Reloaded on SIGHUP.
  std::string admin_token_file;
  // --admin-tls: the admin listener speaks HTTPS with the --tls-cert pair
  // (and its --tls-ca/--tls-require-client-cert rules).
  bool admin_tls = false;
  io::Endpoint cluster{"127.0.0.1", 0};
  std::vector<io::Endpoint> seeds;
  // Several hosts (docs/cluster.md "Addresses for more than one host";
  // server/config_addresses.h). Empty: the listener's own address.
  std::string advertise_cluster;  // what peers dial (membership, the hello)
  std::string advertise_mqtt;     // what /api/load names to the balancers
  std::string advertise_amqp;
  // --bootstrap-expect N: every node lists the same seeds; once all N are
  // reachable the lowest node id founds the cluster (docs/cluster.md
  // "Forming a cluster from one configuration"). 0: off.
  uint32_t bootstrap_expect = 0;
  // Cluster secret (docs/cluster.md): the file's first line; required with
  // --seeds. Without one a node forms no links (and refuses any on --cluster).
  std::string cluster_secret_file;
  std::string cluster_secret;  // read from the file while parsing
  // Mutual TLS on the inter-node links (docs/internode.md "TLS"): all three
  // or none; needs the cluster secret (its handshake runs inside TLS).
  // flag_prefix "--cluster-tls", TLS 1.3. Reloaded on SIGHUP.
  io::TlsSettings cluster_tls;
  // --cluster-tls-node-names: a peer's certificate CN must be
  // "estuary-node-<its id>" (UvTransportConfig::tls_node_names).
  bool cluster_tls_node_names = false;
  uint32_t cluster_peer_grace_ms = 3000;       // a peer down this long is gone (routes forgotten)
  // A peer whose link is down and whose address refuses a redial (its
  // process is gone) is gone at once, when no other node reaches it
  // (docs/membership.md "Failure detection"); false: only after the grace.
  // Off by default: docs/membership.md (a loss seen with it on).
  bool cluster_down_on_refused = true;
  uint32_t cluster_forward_timeout_ms = 5000;  // a QoS 1/2 forward stops holding its PUBACK after this
  std::string replication_ack = "majority";  // "leader": acknowledged before the partition has it
  uint32_t cluster_replicas = 3;  // replicas per partition (docs/partitions.md); the same on every node
  uint16_t shards = 0;  // 0 = one per core
  std::string storage = "bitcask";  // bitcask | rocksdb | memory
  std::string sync = "interval";
  std::string log_level = "info";  // live on reload (server/reload.h)
  io::LogOptions log;  // --log-file, --log-max-size, --log-max-files, --log-format (docs/configuration.md "Logs")
  uint32_t sys_interval_s = 10;  // $SYS/broker/... publication period, 0 = off
  uint32_t shutdown_grace_ms = 2000;
  // AMQP 1.0 (docs/amqp.md).
  uint32_t amqp_idle_timeout_ms = 60'000;  // advertised idle-timeout; 0 = none
  uint32_t amqp_max_frame_size = 64 * 1024;
  uint32_t amqp_max_links = 256;  // per connection
  uint32_t amqp_credit = 256;     // link credit window per client sender (capped by receive-maximum)
  // mosquitto_passwd's format (docs/security.md); when set, MQTT and AMQP
  // clients must log in. Reloaded on SIGHUP.
  std::string password_file;
  // Mosquitto's acl_file format (docs/security.md); empty: every client may
  // publish and subscribe anywhere. Reloaded on SIGHUP.
  std::string acl_file;
  // TLS listeners (docs/security.md "TLS"): off unless a HOST:PORT is set;
  // both use the one certificate, CA and settings below.
  std::string mqtts;  // --mqtts, conventionally port 8883
  std::string amqps;  // --amqps, conventionally port 5671
  io::TlsSettings tls;  // --tls-cert, --tls-key, --tls-ca, --tls-crl, --tls-min-version, --tls-require-client-cert
  bool tls_identity_as_username = false;  // the client certificate's CN is the MQTT user name
  uint32_t tls_handshake_timeout_ms = 10'000;
  // --connect-timeout (docs/security.md "Abuse limits"): after the TLS or
  // WebSocket handshake, a client's MQTT CONNECT (AUTH exchange included)
  // or AMQP SASL and open must be through within this, or it is closed.
  uint32_t connect_timeout_ms = 10'000;
  // WebSocket listeners (docs/mqtt.md and docs/amqp.md "WebSocket"): off
  // unless a HOST:PORT is set; the -wss ones use the TLS settings above.
  std::string mqtt_ws;   // --mqtt-ws, path /mqtt, subprotocol mqtt
  std::string amqp_ws;   // --amqp-ws, subprotocol amqp
  std::string mqtt_wss;  // --mqtt-wss
  std::string amqp_wss;  // --amqp-wss
  uint32_t ws_handshake_timeout_ms = 10'000;
  // Balancer addresses whose connections start with a PROXY v2 header
  // (--proxy-from, docs/balancer.md); empty: no header is accepted.
  std::vector<std::string> proxy_from;
  core::BrokerLimits limits;
  // Abuse limits (docs/security.md "Abuse limits", server/connection_guard.h);
  // 0 turns each off. The per-client publish rates are in `limits`
  // (--max-publish-rate, --max-publish-bytes-rate).
  struct AbuseLimits {
    uint32_t max_connections_per_ip = 0;   // concurrent, per source address
    double connect_rate_per_ip = 0;        // new connections per second, per source address
    uint32_t max_pending_connections = 0;  // node-wide, before CONNECT or AMQP open
    uint32_t auth_failures_before_backoff = 5;
    uint32_t auth_backoff_ms = 1000;        // with --password-file; doubles per further failure
    uint32_t auth_backoff_max_ms = 60'000;
  } abuse;
  // Shared subscriptions: --shared-strategy, --shared-redelivery-delay
  // (docs/cluster.md "Shared subscriptions across nodes").
  core::SharedGroupConfig shared_subscriptions;
  // Test switches on the admin API (POST/DELETE /api/fault/isolate:
  // docs/reliability.md); off in production.
  bool fault_injection = false;
};

// What the command line asks for: run with a config, or exit with a status
// after printing help or a one-line error.
using ExitRequest = io::ExitRequest;
using ParseOutcome = std::variant<NodeConfig, ExitRequest>;

ParseOutcome ParseCommandLine(int argc, const char* const* argv);

// Configuration reload (SIGHUP, POST /api/reload; server/reload.h): the
// same command line parsed again, so the --config file is read again and
// flags still win over it. Only the rules a reload needs run (the
// password, ACL, token and certificate files are read by Node::Reload,
// each keeping its old content if its new one is bad). Nothing is printed:
// a bad file or value is the error's one line.
Expected<NodeConfig, std::string> ParseConfigForReload(const std::vector<std::string>& args);

}  // namespace estuary::server
