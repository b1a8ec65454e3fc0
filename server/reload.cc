#include "server/reload.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <type_traits>

namespace estuary::server {
namespace {

// How a key may change under a running node.
enum class Mode : uint8_t {
  kLive,          // applied at once
  kGuard,         // live when a ConnectionGuard runs
  kGuardAddress,  // live when it counts addresses
  kRestart,       // read once at start
  kNegotiated,    // told to connected clients (CONNACK, AMQP attach): a change could break them
  kSecret,        // restart, and its value is never printed
};

std::string Text(const std::string& value) { return value; }
std::string Text(bool value) { return value ? "true" : "false"; }
std::string Text(const io::Endpoint& value) { return value.ToString(); }
std::string Text(core::QueueOverflow value) { return std::string(core::QueueOverflowName(value)); }
std::string Text(core::SharedStrategy value) { return std::string(core::SharedStrategyName(value)); }
std::string Text(const std::vector<std::string>& value) { return fmt::format("{}", fmt::join(value, ",")); }
std::string Text(const std::vector<io::Endpoint>& value) {
  std::vector<std::string> texts;
  for (const io::Endpoint& endpoint : value) texts.push_back(endpoint.ToString());
  return Text(texts);
}
template <typename Map>
  requires requires(const Map& map) { map.begin()->second; }
std::string Text(const Map& value) {
  std::vector<std::string> texts;
  for (const auto& [key, group] : value) texts.push_back(fmt::format("{}={}{}", key, group.queues, group.by_topic ? ":topic" : ""));
  return Text(texts);
}
template <typename Number>
  requires std::is_arithmetic_v<Number>
std::string Text(Number value) {
  if constexpr (sizeof(Number) == 1) return std::to_string(int(value));
  return fmt::format("{}", value);
}

struct Key {
  const char* name;
  Mode mode;
  std::function<std::string(const NodeConfig&)> text;
  std::function<void(NodeConfig& to, const NodeConfig& from)> copy;
};

// `field` maps a config (const or not) to the key's member.
template <typename Field>
Key Make(const char* name, Mode mode, Field field) {
  return Key{name, mode, [field](const NodeConfig& config) { return Text(field(config)); },
             [field](NodeConfig& to, const NodeConfig& from) { field(to) = field(from); }};
}

#define ESTUARY_FIELD(path) [](auto& c) -> auto& { return c.path; }

// Every key, in the order docs/configuration.md lists them. A key missing
// here is never reported: add new keys (config.h) here too.
const std::vector<Key>& Keys() {
  static const std::vector<Key> keys = {
      Make("log-level", Mode::kLive, ESTUARY_FIELD(log_level)),
      Make("log-file", Mode::kRestart, ESTUARY_FIELD(log.file)),
      Make("log-max-size", Mode::kRestart, ESTUARY_FIELD(log.max_size_bytes)),
      Make("log-max-files", Mode::kRestart, ESTUARY_FIELD(log.max_files)),
      Make("log-format", Mode::kRestart, ESTUARY_FIELD(log.format)),
      Make("shutdown-grace", Mode::kLive, ESTUARY_FIELD(shutdown_grace_ms)),
      Make("max-connections", Mode::kLive, ESTUARY_FIELD(limits.max_connections)),
      Make("max-queued-messages", Mode::kLive, ESTUARY_FIELD(limits.session.max_queued_messages)),
      Make("max-queued-bytes", Mode::kLive, ESTUARY_FIELD(limits.session.max_queued_bytes)),
      Make("queue-qos0-offline", Mode::kLive, ESTUARY_FIELD(limits.session.queue_qos0_offline)),
      Make("queue-overflow", Mode::kLive, ESTUARY_FIELD(limits.session.queue_overflow)),
      Make("max-session-expiry", Mode::kLive, ESTUARY_FIELD(limits.max_session_expiry)),
      Make("max-keep-alive", Mode::kLive, ESTUARY_FIELD(limits.max_keep_alive)),
      Make("max-publish-rate", Mode::kLive, ESTUARY_FIELD(limits.max_publish_rate)),
      Make("max-publish-bytes-rate", Mode::kLive, ESTUARY_FIELD(limits.max_publish_bytes_rate)),
      Make("max-connections-per-ip", Mode::kGuardAddress, ESTUARY_FIELD(abuse.max_connections_per_ip)),
      Make("connect-rate-per-ip", Mode::kGuardAddress, ESTUARY_FIELD(abuse.connect_rate_per_ip)),
      Make("max-pending-connections", Mode::kGuard, ESTUARY_FIELD(abuse.max_pending_connections)),
      Make("connect-timeout", Mode::kLive, ESTUARY_FIELD(connect_timeout_ms)),
      Make("max-packet-size", Mode::kNegotiated, ESTUARY_FIELD(limits.max_packet_size)),
      Make("receive-maximum", Mode::kNegotiated, ESTUARY_FIELD(limits.receive_maximum)),
      Make("topic-alias-maximum", Mode::kNegotiated, ESTUARY_FIELD(limits.topic_alias_maximum)),
      Make("retain-available", Mode::kNegotiated, ESTUARY_FIELD(limits.retain_available)),
      Make("maximum-qos", Mode::kNegotiated, ESTUARY_FIELD(limits.maximum_qos)),
      Make("auth-failures-before-backoff", Mode::kRestart, ESTUARY_FIELD(abuse.auth_failures_before_backoff)),
      Make("auth-backoff", Mode::kRestart, ESTUARY_FIELD(abuse.auth_backoff_ms)),
      Make("auth-backoff-max", Mode::kRestart, ESTUARY_FIELD(abuse.auth_backoff_max_ms)),
      Make("node-id", Mode::kRestart, ESTUARY_FIELD(node_id)),
      Make("data-dir", Mode::kRestart, ESTUARY_FIELD(data_dir)),
      Make("storage", Mode::kRestart, ESTUARY_FIELD(storage)),
      Make("sync", Mode::kRestart, ESTUARY_FIELD(sync)),
      Make("shards", Mode::kRestart, ESTUARY_FIELD(shards)),
      Make("mqtt", Mode::kRestart, ESTUARY_FIELD(mqtt)),
      Make("amqp", Mode::kRestart, ESTUARY_FIELD(amqp)),
      Make("admin", Mode::kRestart, ESTUARY_FIELD(admin)),
      Make("admin-tls", Mode::kRestart, ESTUARY_FIELD(admin_tls)),
      Make("admin-token-file", Mode::kRestart, ESTUARY_FIELD(admin_token_file)),
      Make("mqtts", Mode::kRestart, ESTUARY_FIELD(mqtts)),
      Make("amqps", Mode::kRestart, ESTUARY_FIELD(amqps)),
      Make("tls-cert", Mode::kRestart, ESTUARY_FIELD(tls.cert_file)),
      Make("tls-key", Mode::kRestart, ESTUARY_FIELD(tls.key_file)),
      Make("tls-ca", Mode::kRestart, ESTUARY_FIELD(tls.ca_file)),
      Make("tls-crl", Mode::kRestart, ESTUARY_FIELD(tls.crl_file)),
      Make("tls-min-version", Mode::kRestart, ESTUARY_FIELD(tls.min_version)),
      Make("tls-require-client-cert", Mode::kRestart, ESTUARY_FIELD(tls.require_client_cert)),
      Make("tls-identity-as-username", Mode::kRestart, ESTUARY_FIELD(tls_identity_as_username)),
      Make("tls-handshake-timeout", Mode::kRestart, ESTUARY_FIELD(tls_handshake_timeout_ms)),
      Make("password-file", Mode::kRestart, ESTUARY_FIELD(password_file)),
      Make("acl-file", Mode::kRestart, ESTUARY_FIELD(acl_file)),
      Make("proxy-from", Mode::kRestart, ESTUARY_FIELD(proxy_from)),
      Make("cluster", Mode::kRestart, ESTUARY_FIELD(cluster)),
      Make("seeds", Mode::kRestart, ESTUARY_FIELD(seeds)),
      Make("advertise-cluster", Mode::kRestart, ESTUARY_FIELD(advertise_cluster)),
      Make("advertise-mqtt", Mode::kRestart, ESTUARY_FIELD(advertise_mqtt)),
      Make("advertise-amqp", Mode::kRestart, ESTUARY_FIELD(advertise_amqp)),
      Make("bootstrap-expect", Mode::kRestart, ESTUARY_FIELD(bootstrap_expect)),
      Make("cluster-secret-file", Mode::kRestart, ESTUARY_FIELD(cluster_secret_file)),
      Make("cluster-secret", Mode::kSecret, ESTUARY_FIELD(cluster_secret)),
      Make("cluster-tls-cert", Mode::kRestart, ESTUARY_FIELD(cluster_tls.cert_file)),
      Make("cluster-tls-key", Mode::kRestart, ESTUARY_FIELD(cluster_tls.key_file)),
      Make("cluster-tls-ca", Mode::kRestart, ESTUARY_FIELD(cluster_tls.ca_file)),
      Make("cluster-tls-node-names", Mode::kRestart, ESTUARY_FIELD(cluster_tls_node_names)),
      Make("cluster-peer-grace", Mode::kRestart, ESTUARY_FIELD(cluster_peer_grace_ms)),
      Make("cluster-down-on-refused", Mode::kRestart, ESTUARY_FIELD(cluster_down_on_refused)),
      Make("cluster-replicas", Mode::kRestart, ESTUARY_FIELD(cluster_replicas)),
      Make("replication-ack", Mode::kRestart, ESTUARY_FIELD(replication_ack)),
      Make("cluster-forward-timeout", Mode::kRestart, ESTUARY_FIELD(cluster_forward_timeout_ms)),
      Make("sys-interval", Mode::kRestart, ESTUARY_FIELD(sys_interval_s)),
      Make("amqp-idle-timeout", Mode::kRestart, ESTUARY_FIELD(amqp_idle_timeout_ms)),
      Make("amqp-max-frame-size", Mode::kRestart, ESTUARY_FIELD(amqp_max_frame_size)),
      Make("amqp-max-links", Mode::kRestart, ESTUARY_FIELD(amqp_max_links)),
      Make("amqp-credit", Mode::kRestart, ESTUARY_FIELD(amqp_credit)),
      Make("shared-strategy", Mode::kRestart, ESTUARY_FIELD(shared_subscriptions.strategy)),
      Make("shared-redelivery-delay", Mode::kRestart, ESTUARY_FIELD(shared_subscriptions.redelivery_delay_ms)),
      Make("partitioned-group", Mode::kRestart, ESTUARY_FIELD(shared_subscriptions.partitioned)),
      Make("fault-injection", Mode::kRestart, ESTUARY_FIELD(fault_injection)),
  };
  return keys;
}

#undef ESTUARY_FIELD

bool IsLive(Mode mode, const ReloadAbilities& abilities) {
  switch (mode) {
    case Mode::kLive: return true;
    case Mode::kGuard: return abilities.guard;
    case Mode::kGuardAddress: return abilities.guard_per_address;
    case Mode::kRestart:
    case Mode::kNegotiated:
    case Mode::kSecret: break;
  }
  return false;
}

std::string WhyRestart(Mode mode) {
  switch (mode) {
    case Mode::kGuard:
      return "no abuse limit was set at start; set one (any --max-*-per-ip or --max-pending-connections) to "
             "change it live";
    case Mode::kGuardAddress:
      return "no per-address limit was set at start; set --max-connections-per-ip or --connect-rate-per-ip "
             "at start to change them live";
    case Mode::kNegotiated: return "connected clients were told the running value";
    default: break;
  }
  return "read once at start";
}

}  // namespace

std::vector<ConfigChange> DiffConfig(const NodeConfig& running, const NodeConfig& fresh,
                                     const ReloadAbilities& abilities) {
  std::vector<ConfigChange> changes;
  for (const Key& key : Keys()) {
    std::string before = key.text(running);
    std::string after = key.text(fresh);
    if (before == after) continue;
    ConfigChange change{key.name, std::move(before), std::move(after), IsLive(key.mode, abilities), {}};
    if (key.mode == Mode::kSecret) change.before = change.after = "(hidden)";
    if (!change.live) change.why = WhyRestart(key.mode);
    changes.push_back(std::move(change));
  }
  return changes;
}

void ApplyLiveChanges(NodeConfig& running, const NodeConfig& fresh, const ReloadAbilities& abilities) {
  for (const Key& key : Keys()) {
    if (IsLive(key.mode, abilities) && key.text(running) != key.text(fresh)) key.copy(running, fresh);
  }
}

std::string ReloadReport::Json() const {
  nlohmann::json changed = nlohmann::json::array();
  for (const ConfigChange& change : changes) {
    changed.push_back({{"key", change.key},
                       {"before", change.before},
                       {"after", change.after},
                       {"live", change.live},
                       {"why", change.why}});
  }
  nlohmann::json body = {{"ok", ok()}, {"changes", changed}, {"errors", errors}};
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string DescribeChange(const ConfigChange& change) {
  if (change.live) return fmt::format("{}: {} -> {} (applied)", change.key, change.before, change.after);
  return fmt::format("{}: {} -> {} (needs a restart: {}; still {})", change.key, change.before, change.after,
                     change.why, change.before);
}

}  // namespace estuary::server
