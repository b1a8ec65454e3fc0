#include "balancer/lb_config.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "io/tls/tls_context.h"
#include "io/uv/admin_token.h"
#include "io/uv/cli_options.h"

namespace estuary::balancer {

Expected<std::string, std::string> ReadPairSecret(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return MakeError(path + ": " + std::strerror(errno));
  if (!S_ISREG(info.st_mode)) return MakeError(path + ": not a regular file");
  if ((info.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return MakeError(path + ": readable or writable by group or others (chmod 600 it)");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return MakeError(path + ": cannot be read");
  std::ostringstream contents;
  contents << in.rdbuf();
  std::string secret = contents.str();
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r' || secret.back() == ' ' ||
                             secret.back() == '\t')) {
    secret.pop_back();
  }
  if (secret.empty()) return MakeError(path + ": empty");
  return secret;
}

namespace {

using io::AddEndpointOption;

void AddSelection(CLI::App& app, BalancerConfig& config) {
  ScoreWeights& w = config.selection.weights;
  app.add_option("--weight-connections", w.connections, "Score weight per connection")->capture_default_str();
  app.add_option("--weight-messages", w.messages, "Score weight per 1000 messages/s in+out")->capture_default_str();
  app.add_option("--weight-queued", w.queued, "Score weight per 1000 queued messages")->capture_default_str();
  app.add_option("--weight-cpu", w.cpu, "Score weight per 100 % CPU")->capture_default_str();
  app.add_option("--weight-memory", w.memory, "Score weight per GiB resident")->capture_default_str();
  app.add_option("--mqtt-affinity", config.selection.mqtt_affinity,
                 "Send MQTT clients to the node placing their session partition")
      ->capture_default_str();
  app.add_option("--partitions", config.selection.ring.partitions, "Partitions of the placement ring")
      ->capture_default_str()
      ->check(CLI::Range(1u, 65536u));
  app.add_option("--replicas", config.selection.ring.replicas, "Replicas per partition on the ring")
      ->capture_default_str()
      ->check(CLI::Range(1u, 16u));
  app.add_option("--stale-after", config.selection.stale_after_ms,
                 "Milliseconds without a good probe before a node gets no connections")
      ->capture_default_str();
  app.add_option("--drain", config.drain, "Admin addresses of nodes that get no new connections")
      ->delimiter(',');
}

void AddProxy(CLI::App& app, BalancerConfig& config) {
  ProxyOptions& p = config.proxy;
  app.add_option("--threads", config.threads, "Data-plane threads copying bytes (0 = one per CPU)")
      ->capture_default_str()
      ->check(CLI::Range(0u, 1024u));
  app.add_option("--buffer-bytes", p.high_watermark, "Bytes queued per direction before reading pauses")
      ->capture_default_str()
      ->check(CLI::Range(size_t(4096), size_t(1) << 30));
  app.add_option("--connect-max-bytes", p.connect_max_bytes, "Largest MQTT CONNECT read before choosing")
      ->capture_default_str();
  app.add_option("--connect-timeout", p.connect_timeout_ms, "Milliseconds allowed for the MQTT CONNECT")
      ->capture_default_str();
  app.add_option("--dial-timeout", p.dial_timeout_ms, "Milliseconds allowed to connect to a node")
      ->capture_default_str();
  app.add_option("--dial-attempts", p.dial_attempts, "Nodes tried per client before giving up")
      ->capture_default_str()
      ->check(CLI::Range(1u, 64u));
  app.add_option("--proxy-protocol", config.proxy_header,
                 "Services whose node connections start with a PROXY v2 header (mqtt,amqp,mqtt-ws,amqp-ws or none)")
      ->delimiter(',')
      ->check(CLI::IsMember({"mqtt", "amqp", "mqtt-ws", "amqp-ws", "none"}))
      ->default_str("mqtt,amqp,mqtt-ws,amqp-ws");
}

void BuildApp(CLI::App& app, BalancerConfig& config) {
  app.set_config("--config", "", "TOML configuration file (keys named like the flags)");
  app.allow_config_extras(CLI::config_extras_mode::error);
  AddEndpointOption(app, "--mqtt", config.mqtt, "MQTT service address HOST:PORT (port 0 picks a free port)");
  AddEndpointOption(app, "--amqp", config.amqp, "AMQP service address HOST:PORT");
  // WebSocket (issue 25 point 3; docs/balancer.md "WebSocket").
  app.add_option_function<std::string>(
         "--mqtt-ws", [&config](const std::string& text) { config.mqtt_ws = *io::ParseEndpoint(text); },
         "MQTT over WebSocket service address HOST:PORT, forwarded to the nodes' --mqtt-ws ports by load")
      ->check([](const std::string& text) { return io::ParseEndpoint(text) ? std::string() : io::ParseEndpoint(text).error(); });
  app.add_option_function<std::string>(
         "--amqp-ws", [&config](const std::string& text) { config.amqp_ws = *io::ParseEndpoint(text); },
         "AMQP over WebSocket service address HOST:PORT, forwarded to the nodes' --amqp-ws ports by load")
      ->check([](const std::string& text) { return io::ParseEndpoint(text) ? std::string() : io::ParseEndpoint(text).error(); });
  io::AddEndpointListOption(app, "--nodes", config.nodes, "The nodes' admin addresses HOST:PORT,...");
  AddEndpointOption(app, "--heartbeat", config.heartbeat, "This balancer's pair address (UDP) HOST:PORT");
  io::AddOptionalEndpointOption(app, "--peer", config.peer,
                                "The partner's heartbeat HOST:PORT (default: learnt from its heartbeats)");
  app.add_option_function<std::string>(
         "--role", [&config](const std::string& role) { config.role = role == "standby" ? Role::kStandby : Role::kActive; },
         "Role to start in")
      ->check(CLI::IsMember({"active", "standby"}))
      ->default_str("active");
  io::AddLogLevelOption(app, config.log_level);
  io::AddLogOptions(app, config.log);
  app.add_option("--poll-interval", config.poll_interval_ms, "Milliseconds between probes of each node")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(10), int64_t(60000)));
  app.add_option("--probe-timeout", config.probe_timeout_ms, "Milliseconds a probe may take")
      ->capture_default_str();
  app.add_option("--heartbeat-interval", config.heartbeat_interval_ms, "Milliseconds between heartbeats")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(10), int64_t(10000)));
  app.add_option("--takeover-timeout", config.pair.takeover_timeout_ms,
                 "Milliseconds of partner silence before a standby takes over")
      ->capture_default_str();
  app.add_option("--startup-wait", config.pair.startup_wait_ms,
                 "Milliseconds a balancer started as active listens for an active partner first")
      ->capture_default_str();
  app.add_option("--pair-secret-file", config.pair_secret_file,
                 "File holding the pair's shared secret: heartbeats carry an HMAC-SHA256 (default: unauthenticated)");
  app.add_option("--heartbeat-max-age", config.heartbeat_max_age_ms,
                 "With a pair secret: milliseconds a heartbeat stays valid (the pair's clocks must agree within it)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(100), int64_t(600000)));
  io::AddOptionalEndpointOption(app, "--admin", config.admin,
                                "Admin HTTP HOST:PORT: /healthz, /api/nodes, /metrics (default: off)");
  app.add_option("--admin-token-file", config.admin_token_file,
                 "File whose first line is the admin token of the nodes (their --admin-token-file): sent on every "
                 "probe, and required (Authorization: Bearer) on this balancer's --admin but /healthz");
  app.add_option("--admin-ca", config.admin_ca,
                 "CA bundle (PEM) of the nodes' HTTPS admin APIs (their --admin-tls): the probes speak HTTPS and "
                 "verify each node's certificate and address (default: plain HTTP)");
  app.add_option("--vip", config.vip, "Virtual-IP mode: ADDRESS/PREFIX held by the active (needs root)");
  app.add_option("--vip-interface", config.vip_interface, "Interface for --vip");
  AddSelection(app, config);
  AddProxy(app, config);
}

}  // namespace

namespace {

// The rules that need more than one flag, and the files read once here.
void Validate(BalancerConfig& config) {
  if (!config.vip.empty() && config.vip_interface.empty()) {
    throw CLI::ValidationError("--vip", "needs --vip-interface");
  }
  if (!config.vip.empty() && (config.mqtt.port == 0 || config.amqp.port == 0)) {
    throw CLI::ValidationError("--vip", "needs fixed --mqtt and --amqp ports");
  }
  if (!config.admin_token_file.empty()) {
    auto token = io::ReadAdminTokenFile(config.admin_token_file);
    if (!token) throw CLI::ValidationError("--admin-token-file", token.error());
    config.admin_token = std::move(*token);
  }
  if (!config.admin_ca.empty()) {
    auto context = io::BuildClientContext(config.admin_ca);
    if (!context) throw CLI::ValidationError("--admin-ca", context.error());
    config.admin_tls = std::move(*context);
  }
  if (!config.pair_secret_file.empty()) {
    auto secret = ReadPairSecret(config.pair_secret_file);
    if (!secret) throw CLI::ValidationError("--pair-secret-file", secret.error());
    config.pair_secret = std::move(*secret);
  }
}

void Finish(const CLI::App& app, BalancerConfig& config) {
  if (app.count("--proxy-protocol") == 0) config.proxy_header = {"mqtt", "amqp", "mqtt-ws", "amqp-ws"};
  config.proxy.low_watermark = std::min(config.proxy.low_watermark, config.proxy.high_watermark / 4);
}

const char* kDescription = "estuary-lb: the Estuary load balancer (active/standby pair in front of estuaryd nodes)";

}  // namespace

ParseOutcome ParseCommandLine(int argc, const char* const* argv) {
  BalancerConfig config;
  CLI::App app{kDescription, "estuary-lb"};
  BuildApp(app, config);
  auto outcome = io::ParseOrExit(app, config, argc, argv, [&config] { Validate(config); });
  if (std::holds_alternative<ExitRequest>(outcome)) return std::get<ExitRequest>(outcome);
  Finish(app, config);
  return config;
}

Expected<BalancerConfig, std::string> ParseConfigForReload(const std::vector<std::string>& args) {
  BalancerConfig config;
  CLI::App app{kDescription, "estuary-lb"};
  BuildApp(app, config);
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  try {
    app.parse(int(argv.size()), argv.data());
    Validate(config);
  } catch (const CLI::ParseError& error) {
    return MakeError(std::string(error.what()));
  }
  Finish(app, config);
  return config;
}

}  // namespace estuary::balancer
