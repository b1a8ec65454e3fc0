#include "server/config.h"

#include <arpa/inet.h>

#include <fstream>
#include <thread>

#include "io/uv/cli_options.h"
#include "security/acl.h"
#include "server/config_addresses.h"
#include "io/uv/admin_token.h"
#include "security/password_file.h"

namespace estuary::server {
namespace {

using io::AddEndpointOption;

void AddLimits(CLI::App& app, core::BrokerLimits& limits) {
  app.add_option("--max-connections", limits.max_connections, "Connections per node")
      ->capture_default_str();
  app.add_option("--max-packet-size", limits.max_packet_size, "Largest MQTT packet accepted, bytes")
      ->capture_default_str()
      ->check(CLI::Range(16u, 268435455u));
  app.add_option("--max-queued-messages", limits.session.max_queued_messages,
                 "Messages queued per session; then --queue-overflow decides")
      ->capture_default_str();
  app.add_option("--max-queued-bytes", limits.session.max_queued_bytes,
                 "Bytes queued per session; then --queue-overflow decides")
      ->capture_default_str();
  app.add_option("--queue-qos0-offline", limits.session.queue_qos0_offline,
                 "Queue QoS 0 messages for offline persistent sessions")
      ->capture_default_str();
  app.add_option_function<std::string>(
         "--queue-overflow",
         [&limits](const std::string& name) { limits.session.queue_overflow = *core::ParseQueueOverflow(name); },
         "A full session queue (--max-queued-messages/-bytes) drops the new message (drop-new), drops its "
         "oldest queued one (drop-oldest), or drops the new one and answers a QoS 1/2 publisher with "
         "PUBACK/PUBREC 0x97 (MQTT 5) or rejected (AMQP) (reject; MQTT 3.1.1 publishers are acknowledged, "
         "counted in estuary_publishes_acknowledged_queue_full_total). Either way, counted in "
         "estuary_queue_full_dropped*_total")
      ->check(CLI::IsMember({"drop-new", "drop-oldest", "reject"}))
      ->default_str(std::string(core::QueueOverflowName(limits.session.queue_overflow)));
  app.add_option("--receive-maximum", limits.receive_maximum,
                 "Inbound QoS 1/2 publishes in flight per client")
      ->capture_default_str()
      ->check(CLI::Range(1, 65535));
  app.add_option("--topic-alias-maximum", limits.topic_alias_maximum, "Inbound topic aliases per client")
      ->capture_default_str();
  app.add_option("--max-session-expiry", limits.max_session_expiry, "Cap on session expiry, seconds")
      ->capture_default_str();
  app.add_option("--max-keep-alive", limits.max_keep_alive, "Cap on MQTT 5 keep alive, seconds")
      ->capture_default_str();
  app.add_option("--retain-available", limits.retain_available, "Accept retained messages")
      ->capture_default_str();
  app.add_option("--maximum-qos", limits.maximum_qos, "Highest QoS accepted")
      ->default_str(std::to_string(limits.maximum_qos))
      ->check(CLI::Range(0, 2));
}

void AddSharedSubscriptionOptions(CLI::App& app, core::SharedGroupConfig& shared) {
  app.add_option_function<std::string>(
         "--shared-strategy",
         [&shared](const std::string& name) { shared.strategy = *core::ParseSharedStrategy(name); },
         "How a $share group's member is picked: round_robin, least_outstanding (fewest unacknowledged) "
         "or sticky_topic (one member per topic while the members stay the same)")
      ->check(CLI::IsMember({"round_robin", "least_outstanding", "sticky_topic"}))
      ->default_str(std::string(core::SharedStrategyName(shared.strategy)));
  app.add_option("--shared-redelivery-delay", shared.redelivery_delay_ms,
                 "Milliseconds a disconnected persistent member of a $share group keeps its unacknowledged "
                 "messages before they go to another member (0 = at once, -1 = never)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{-1}, int64_t{86'400'000}));
  app.add_option_function<std::vector<std::string>>(
         "--partitioned-group",
         [&shared](const std::vector<std::string>& specs) {
           for (const std::string& spec : specs) {
             if (auto parsed = core::ParsePartitionedGroup(spec)) shared.partitioned[parsed->first] = parsed->second;
           }
         },
         "G=K: keep the messages of $share/G/... groups in K replicated queues on the cluster's partitions, "
         "spread in turn (G=K:topic: by the topic's hash, one topic's messages in order in one queue); "
         "repeatable; the same on every node (docs/cluster.md \"Partitioned shared groups\")")
      ->check([](const std::string& spec) -> std::string {
        return core::ParsePartitionedGroup(spec) ? std::string() : "expected G=K or G=K:topic with K from 1 to 1024";
      });
}

void AddTlsOptions(CLI::App& app, NodeConfig& config) {
  io::AddOptionalEndpointOption(app, "--mqtts", config.mqtts,
                                "MQTT over TLS listener HOST:PORT (conventionally 8883); needs --tls-cert and --tls-key");
  io::AddOptionalEndpointOption(app, "--amqps", config.amqps,
                                "AMQP 1.0 over TLS listener HOST:PORT (conventionally 5671), SASL on top");
  io::TlsSettings& tls = config.tls;
  app.add_option("--tls-cert", tls.cert_file, "PEM certificate chain of the TLS listeners (leaf first); reloaded on SIGHUP")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-key", tls.key_file, "PEM private key of --tls-cert; reloaded on SIGHUP")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-ca", tls.ca_file,
                 "PEM bundle of the CAs that sign client certificates; when set, clients are asked for one "
                 "(a certificate presented must verify); reloaded on SIGHUP")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-crl", tls.crl_file, "PEM CRL(s) of --tls-ca: revoked client certificates are refused; "
                 "reloaded on SIGHUP")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-min-version", tls.min_version, "Oldest TLS version accepted: 1.2 or 1.3")
      ->capture_default_str()
      ->check(CLI::IsMember({"1.2", "1.3"}));
  app.add_flag("--tls-require-client-cert", tls.require_client_cert,
               "Refuse TLS clients without a certificate that verifies against --tls-ca");
  app.add_flag("--tls-identity-as-username", config.tls_identity_as_username,
               "Over TLS, the client certificate's subject CN is the MQTT user name and no password is checked "
               "(Mosquitto's use_identity_as_username; needs --tls-require-client-cert)");
  app.add_option("--tls-handshake-timeout", config.tls_handshake_timeout_ms,
                 "Milliseconds a TLS handshake may take before the socket is reset")
      ->capture_default_str()
      ->check(CLI::Range(1u, 600'000u));
}

// WebSocket listeners (issue 25 point 3; docs/mqtt.md and docs/amqp.md
// "WebSocket"), one block for their flags and TOML keys.
void AddWebSocketOptions(CLI::App& app, NodeConfig& config) {
  io::AddOptionalEndpointOption(app, "--mqtt-ws", config.mqtt_ws,
                                "MQTT over WebSocket listener HOST:PORT (path /mqtt, subprotocol mqtt; "
                                "conventionally 8083 or 9001)");
  io::AddOptionalEndpointOption(app, "--amqp-ws", config.amqp_ws,
                                "AMQP 1.0 over WebSocket listener HOST:PORT (subprotocol amqp)");
  io::AddOptionalEndpointOption(app, "--mqtt-wss", config.mqtt_wss,
                                "MQTT over secure WebSocket listener HOST:PORT (conventionally 8084); "
                                "needs --tls-cert and --tls-key");
  io::AddOptionalEndpointOption(app, "--amqp-wss", config.amqp_wss,
                                "AMQP 1.0 over secure WebSocket listener HOST:PORT; needs --tls-cert and --tls-key");
  app.add_option("--ws-handshake-timeout", config.ws_handshake_timeout_ms,
                 "Milliseconds a WebSocket opening handshake (the HTTP Upgrade) may take before the socket is reset")
      ->capture_default_str()
      ->check(CLI::Range(1u, 600'000u));
}

void CheckWebSocket(const NodeConfig& config) {
  if ((!config.mqtt_wss.empty() || !config.amqp_wss.empty()) &&
      (config.tls.cert_file.empty() || config.tls.key_file.empty())) {
    throw CLI::ValidationError(config.mqtt_wss.empty() ? "--amqp-wss" : "--mqtt-wss", "needs --tls-cert and --tls-key");
  }
}

// Abuse limits (docs/security.md "Abuse limits"), one block for the flags
// and TOML keys of issue 21 point 6.
void AddAbuseLimits(CLI::App& app, NodeConfig& config) {
  NodeConfig::AbuseLimits& abuse = config.abuse;
  app.add_option("--max-connections-per-ip", abuse.max_connections_per_ip,
                 "Concurrent client connections per source address (behind estuary-lb: the address of its PROXY "
                 "header), checked at accept before any TLS handshake; 0 = no cap")
      ->capture_default_str();
  app.add_option("--connect-rate-per-ip", abuse.connect_rate_per_ip,
                 "New client connections per second per source address (a token bucket holding one second's "
                 "worth); beyond it a socket is closed at accept; 0 = no cap")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--max-pending-connections", abuse.max_pending_connections,
                 "Client connections, node-wide, that have not finished their MQTT CONNECT or AMQP open (TLS "
                 "handshakes included); new sockets beyond it are closed at accept; 0 = no cap")
      ->capture_default_str();
  app.add_option("--connect-timeout", config.connect_timeout_ms,
                 "Milliseconds a client connection has, after its TLS or WebSocket handshake, to finish its MQTT "
                 "CONNECT (AUTH exchange included) or its AMQP SASL exchange and open; then it is closed")
      ->capture_default_str()
      ->check(CLI::Range(1u, 600'000u));
  app.add_option("--max-publish-rate", config.limits.max_publish_rate,
                 "PUBLISH packets (AMQP transfers) per second per client connection; beyond it the client's socket is "
                 "not read until the budget refills (backpressure, not a disconnect); 0 = no cap")
      ->capture_default_str();
  app.add_option("--max-publish-bytes-rate", config.limits.max_publish_bytes_rate,
                 "PUBLISH (AMQP transfer) payload bytes per second per client connection, enforced as backpressure "
                 "like --max-publish-rate; 0 = no cap")
      ->capture_default_str();
  app.add_option("--auth-failures-before-backoff", abuse.auth_failures_before_backoff,
                 "Authentication failures (MQTT CONNECT, AMQP SASL) a source address may make before each "
                 "further one refuses its new connections for --auth-backoff")
      ->capture_default_str();
  app.add_option("--auth-backoff", abuse.auth_backoff_ms,
                 "Milliseconds a source address's new connections are refused after one authentication failure "
                 "too many; doubles with each further failure up to --auth-backoff-max; forgiven by a success; "
                 "with --password-file only; 0 = off")
      ->capture_default_str();
  app.add_option("--auth-backoff-max", abuse.auth_backoff_max_ms, "Longest --auth-backoff, milliseconds")
      ->capture_default_str()
      ->check(CLI::Range(1u, 86'400'000u));
}

void AddClusterTlsOptions(CLI::App& app, io::TlsSettings& tls) {
  tls.flag_prefix = "--cluster-tls";
  tls.min_version = "1.3";
  tls.require_client_cert = true;
  app.add_option("--cluster-tls-cert", tls.cert_file,
                 "PEM certificate chain this node presents on inter-node links (mutual TLS under the cluster "
                 "secret's handshake; with --cluster-tls-key and --cluster-tls-ca; reloaded on SIGHUP)")
      ->check(CLI::ExistingFile);
  app.add_option("--cluster-tls-key", tls.key_file, "PEM private key of --cluster-tls-cert; reloaded on SIGHUP")
      ->check(CLI::ExistingFile);
  app.add_option("--cluster-tls-ca", tls.ca_file,
                 "PEM bundle of the cluster's CA: a peer whose certificate does not verify against it is refused "
                 "(both directions); reloaded on SIGHUP")
      ->check(CLI::ExistingFile);
}

void BuildApp(CLI::App& app, NodeConfig& config) {
  app.set_config("--config", "", "TOML configuration file (keys named like the flags)");
  app.allow_config_extras(CLI::config_extras_mode::error);
  app.add_option("--node-id", config.node_id, "This node's id in the cluster")
      ->capture_default_str()
      ->check(CLI::Range(1, 65535));
  app.add_option("--data-dir", config.data_dir,
                 "Directory for durable state; empty (the default) keeps everything in memory");
  AddEndpointOption(app, "--mqtt", config.mqtt, "MQTT listener HOST:PORT (port 0 picks a free port)");
  AddEndpointOption(app, "--amqp", config.amqp, "AMQP 1.0 listener HOST:PORT");
  AddEndpointOption(app, "--admin", config.admin, "Admin HTTP listener HOST:PORT (/healthz, /metrics, /api)");
  app.add_option("--admin-token-file", config.admin_token_file,
                 "File whose first line is the admin API's bearer token: every admin request but GET /healthz "
                 "needs 'Authorization: Bearer TOKEN' (at least 16 characters; the file must not be readable by "
                 "others; required when --admin is not loopback; reloaded on SIGHUP)");
  app.add_flag("--admin-tls", config.admin_tls,
               "The admin listener speaks HTTPS with the --tls-cert/--tls-key pair (and --tls-ca, "
               "--tls-require-client-cert as the TLS listeners; reloaded on SIGHUP)");
  AddEndpointOption(app, "--cluster", config.cluster, "Inter-node listener HOST:PORT");
  io::AddEndpointListOption(app, "--seeds", config.seeds,
                            "Other nodes' inter-node addresses HOST:PORT,... (this node's own may be listed too)");
  AddAddressOptions(app, config);
  app.add_option("--cluster-secret-file", config.cluster_secret_file,
                 "File whose first line is the cluster secret every node shares (required with --seeds)")
      ->check(CLI::ExistingFile);
  app.add_option("--cluster-peer-grace", config.cluster_peer_grace_ms,
                 "Milliseconds a peer's link may stay down before its routes are forgotten")
      ->capture_default_str();
  app.add_option("--cluster-down-on-refused", config.cluster_down_on_refused,
                 "Declare a peer gone without waiting for --cluster-peer-grace once its link is down, a redial "
                 "to its address was refused (nothing listens: its process died) and no other node reaches it "
                 "(docs/membership.md; turn off where a live peer's address may refuse connections)")
      ->default_str("true");
  app.add_option("--cluster-replicas", config.cluster_replicas,
                 "Replicas of each partition (sessions, retained messages, client ids), capped at the node "
                 "count; must be the same on every node. 1 keeps one copy: a node's loss loses its partitions")
      ->capture_default_str()
      ->check(CLI::Range(1u, 9u));
  app.add_option("--replication-ack", config.replication_ack,
                 "When a QoS 1/2 publish into a persistent session, or a retained one, is acknowledged in a "
                 "cluster: majority (once a majority of the partition has it) or leader (once this node's store "
                 "has it: faster, and a node lost before its partition caught up loses those messages)")
      ->capture_default_str()
      ->check(CLI::IsMember({"majority", "leader"}));
  app.add_option("--cluster-forward-timeout", config.cluster_forward_timeout_ms,
                 "Milliseconds a QoS 1/2 publish waits for another node's confirmation")
      ->capture_default_str()
      ->check(CLI::Range(1u, 3'600'000u));
  app.add_option("--shards", config.shards, "Event loops (threads); 0 = one per core")
      ->capture_default_str()
      ->check(CLI::Range(0, 256));
  app.add_option("--storage", config.storage, "Storage engine")
      ->capture_default_str()
      ->check(CLI::IsMember({"bitcask", "rocksdb", "memory"}));
  app.add_option("--sync", config.sync, "Storage sync policy")
      ->capture_default_str()
      ->check(CLI::IsMember({"always", "interval", "none"}));
  io::AddLogLevelOption(app, config.log_level);
  io::AddLogOptions(app, config.log);
  app.add_option("--sys-interval", config.sys_interval_s, "Seconds between $SYS publications, 0 = off")
      ->capture_default_str();
  app.add_option("--shutdown-grace", config.shutdown_grace_ms,
                 "Milliseconds to let clients flush at SIGTERM")
      ->capture_default_str();
  app.add_option("--amqp-idle-timeout", config.amqp_idle_timeout_ms,
                 "AMQP idle-timeout advertised to clients, milliseconds (0 = none)")
      ->capture_default_str();
  app.add_option("--amqp-max-frame-size", config.amqp_max_frame_size, "AMQP max-frame-size, bytes")
      ->capture_default_str()
      ->check(CLI::Range(512u, 16u * 1024 * 1024));
  app.add_option("--amqp-max-links", config.amqp_max_links, "AMQP links per connection")
      ->capture_default_str()
      ->check(CLI::Range(1u, 65536u));
  app.add_option("--amqp-credit", config.amqp_credit,
                 "AMQP link credit granted to each client sender (capped by --receive-maximum)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 65535u));
  app.add_option("--password-file", config.password_file,
                 "Password file as mosquitto_passwd writes it (user:$7$... PBKDF2-SHA512 or user:$6$... SHA-512 "
                 "lines; `estuaryctl passwd FILE USER` writes them too). When set, MQTT and AMQP SASL PLAIN clients "
                 "must log in; a clear-text line is refused. Reloaded on SIGHUP")
      ->check(CLI::ExistingFile);
  app.add_option("--acl-file", config.acl_file,
                 "Topic rights in Mosquitto's acl_file format (topic/pattern [read|write|readwrite|deny] FILTER, "
                 "user NAME, %c and %u). When set, only what it grants is allowed; unset, everything is. "
                 "Reloaded on SIGHUP")
      ->check(CLI::ExistingFile);
  app.add_option("--proxy-from", config.proxy_from,
                 "Balancer IP addresses that must send a PROXY v2 header (estuary-lb), comma-separated")
      ->delimiter(',')
      ->check([](const std::string& ip) {
        in6_addr address{};
        const bool numeric = inet_pton(AF_INET, ip.c_str(), &address) == 1 || inet_pton(AF_INET6, ip.c_str(), &address) == 1;
        return numeric ? std::string() : "\"" + ip + "\" is not a numeric IPv4 or IPv6 address";
      });
  app.add_flag("--fault-injection", config.fault_injection,
               "Enable test fault switches on the admin API (POST/DELETE /api/fault/isolate)");
  AddTlsOptions(app, config);
  AddWebSocketOptions(app, config);
  AddClusterTlsOptions(app, config.cluster_tls);
  app.add_flag("--cluster-tls-node-names", config.cluster_tls_node_names,
               "With --cluster-tls-*: a peer's certificate must name its node id as subject CN=estuary-node-<id> "
               "(what estuary-cluster issues), or the link is refused");
  AddLimits(app, config.limits);
  AddAbuseLimits(app, config);
  AddSharedSubscriptionOptions(app, config.shared_subscriptions);
}

// The secret is the file's first line, without surrounding blanks.
void LoadClusterSecret(NodeConfig& config) {
  if (config.cluster_secret_file.empty()) {
    if (!config.seeds.empty()) {
      throw CLI::ValidationError("--seeds", "needs --cluster-secret-file: nodes form no links without a cluster secret");
    }
    return;
  }
  std::ifstream in(config.cluster_secret_file);
  std::string line;
  std::getline(in, line);
  const auto first = line.find_first_not_of(" \t\r");
  const auto last = line.find_last_not_of(" \t\r");
  if (!in || first == std::string::npos) {
    throw CLI::ValidationError("--cluster-secret-file", config.cluster_secret_file + " holds no secret on its first line");
  }
  config.cluster_secret = line.substr(first, last - first + 1);
}

// The files are read once here so that a bad line stops start-up with a
// usage error (status 2) naming it; Node::Start reads them again to serve.
void CheckSecurityFiles(const NodeConfig& config) {
  if (!config.password_file.empty()) {
    if (auto table = security::LoadPasswordFile(config.password_file); !table) {
      throw CLI::ValidationError("--password-file", table.error());
    }
  }
  if (!config.acl_file.empty()) {
    if (auto acl = security::Acl::Load(config.acl_file); !acl) throw CLI::ValidationError("--acl-file", acl.error());
  }
}

// An admin API reachable from other hosts needs a token; the file is read
// once here so that a bad one stops start-up with a usage error naming it.
void CheckAdminToken(const NodeConfig& config) {
  if (config.admin_token_file.empty()) {
    if (!io::IsLoopbackHost(config.admin.host)) {
      throw CLI::ValidationError("--admin", config.admin.ToString() +
                                                " is not a loopback address: it needs --admin-token-file "
                                                "(docs/security.md \"Admin API\")");
    }
    return;
  }
  if (auto token = io::ReadAdminTokenFile(config.admin_token_file); !token) {
    throw CLI::ValidationError("--admin-token-file", token.error());
  }
}

// The cluster TLS flags go together, need the secret, and their files are
// read once here so that a bad one stops start-up with a usage error.
void CheckClusterTls(const NodeConfig& config) {
  const io::TlsSettings& tls = config.cluster_tls;
  const int given = int(!tls.cert_file.empty()) + int(!tls.key_file.empty()) + int(!tls.ca_file.empty());
  if (given == 0) {
    if (config.cluster_tls_node_names) {
      throw CLI::ValidationError("--cluster-tls-node-names",
                                 "needs --cluster-tls-cert, --cluster-tls-key and --cluster-tls-ca");
    }
    return;
  }
  if (given != 3) {
    throw CLI::ValidationError("--cluster-tls-cert",
                               "--cluster-tls-cert, --cluster-tls-key and --cluster-tls-ca go together");
  }
  if (config.cluster_secret_file.empty()) {
    throw CLI::ValidationError("--cluster-tls-cert", "needs --cluster-secret-file (its handshake runs inside TLS)");
  }
  if (auto built = io::TlsContext::CreatePeer(tls); !built) throw CLI::ValidationError("cluster TLS", built.error());
}

// The TLS flags' rules, and the files read once so that a bad one stops
// start-up with a usage error naming it.
void CheckTls(const NodeConfig& config) {
  const io::TlsSettings& tls = config.tls;
  const bool listening = !config.mqtts.empty() || !config.amqps.empty();
  if (listening && (tls.cert_file.empty() || tls.key_file.empty())) {
    throw CLI::ValidationError(config.mqtts.empty() ? "--amqps" : "--mqtts", "needs --tls-cert and --tls-key");
  }
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    throw CLI::ValidationError("--tls-cert", "--tls-cert and --tls-key go together");
  }
  if (tls.require_client_cert && tls.ca_file.empty()) {
    throw CLI::ValidationError("--tls-require-client-cert", "needs --tls-ca (the CAs client certificates verify against)");
  }
  if (!tls.crl_file.empty() && tls.ca_file.empty()) throw CLI::ValidationError("--tls-crl", "needs --tls-ca");
  if (config.tls_identity_as_username && !tls.require_client_cert) {
    throw CLI::ValidationError("--tls-identity-as-username", "needs --tls-require-client-cert");
  }
  if (config.admin_tls && tls.cert_file.empty()) throw CLI::ValidationError("--admin-tls", "needs --tls-cert and --tls-key");
  if (tls.cert_file.empty()) return;
  if (auto built = io::BuildServerContext(tls); !built) throw CLI::ValidationError("TLS", built.error());
}

}  // namespace

ParseOutcome ParseCommandLine(int argc, const char* const* argv) {
  NodeConfig config;
  CLI::App app{"estuaryd: an Estuary broker node (MQTT 3.1/3.1.1/5.0, AMQP 1.0)", "estuaryd"};
  BuildApp(app, config);
  auto outcome = io::ParseOrExit(app, config, argc, argv, [&config] {
    LoadClusterSecret(config);
    CheckSecurityFiles(config);
    CheckAdminToken(config);
    CheckClusterTls(config);
    CheckTls(config);
    CheckWebSocket(config);
    CheckAddresses(config);
  });
  if (std::holds_alternative<ExitRequest>(outcome)) return std::get<ExitRequest>(outcome);
  if (config.shards == 0) {
    config.shards = static_cast<uint16_t>(std::max(1u, std::thread::hardware_concurrency()));
  }
  return config;
}

// Configuration reload (issue 25 point 4; server/reload.h).
Expected<NodeConfig, std::string> ParseConfigForReload(const std::vector<std::string>& args) {
  NodeConfig config;
  CLI::App app{"estuaryd", "estuaryd"};
  BuildApp(app, config);
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  try {
    app.parse(int(argv.size()), argv.data());
    LoadClusterSecret(config);
  } catch (const CLI::ParseError& error) {
    return MakeError(std::string(error.what()));
  }
  if (config.shards == 0) {
    config.shards = static_cast<uint16_t>(std::max(1u, std::thread::hardware_concurrency()));
  }
  return config;
}

}  // namespace estuary::server
