#pragma once
// estuary-lb's configuration: flags and a TOML file (--config) whose keys
// are named like the flags, as for estuaryd (docs/balancer.md lists them).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "balancer/node_table.h"
#include "balancer/pair_state.h"
#include "balancer/proxy_connection.h"
#include "io/uv/cli_options.h"
#include "io/uv/log_setup.h"
#include "io/uv/tcp.h"

using ssl_ctx_st = struct ssl_ctx_st;

namespace estuary::balancer {

struct BalancerConfig {
  io::Endpoint mqtt{"127.0.0.1", 1883};
  io::Endpoint amqp{"127.0.0.1", 5672};
  // WebSocket service addresses (--mqtt-ws, --amqp-ws), forwarded to the
  // nodes' WebSocket ports; unset: none.
  std::optional<io::Endpoint> mqtt_ws;
  std::optional<io::Endpoint> amqp_ws;
  std::vector<io::Endpoint> nodes;  // admin addresses
  io::Endpoint heartbeat{"127.0.0.1", 7946};
  std::string peer;  // HOST:PORT, "" = learn it from the first heartbeat received
  Role role = Role::kActive;
  std::string log_level = "info";  // live on SIGHUP
  io::LogOptions log;  // --log-file, --log-max-size, --log-max-files, --log-format (as estuaryd's)
  int64_t poll_interval_ms = 250;
  int64_t probe_timeout_ms = 500;
  int64_t heartbeat_interval_ms = 100;
  PairOptions pair;
  SelectionOptions selection;
  ProxyOptions proxy;
  std::vector<std::string> drain;         // admin addresses drained by this balancer
  std::vector<std::string> proxy_header;  // services that get a PROXY v2 header
  std::string vip;                        // "ADDRESS/PREFIX": virtual-IP mode
  std::string vip_interface;
  std::string admin;  // HOST:PORT of the balancer's own admin HTTP, "" = none
  // --admin-token-file (io/uv/admin_token.h): the token the nodes' admin
  // APIs require, sent on every probe, and required by this balancer's own
  // admin listener (but /healthz). Read at parse time; "" = none.
  std::string admin_token_file;
  std::string admin_token;
  // --admin-ca: the nodes' admin APIs speak HTTPS (their --admin-tls); the
  // probes verify each node's certificate against this CA bundle and its
  // IP address or name against the --nodes address. Read at parse time
  // into `admin_tls`; "" = plain HTTP.
  std::string admin_ca;
  std::shared_ptr<ssl_ctx_st> admin_tls;
  unsigned threads = 0;  // data-plane worker threads, 0 = one per CPU
  // Heartbeat authentication (heartbeat_auth.h): the file's path and its
  // contents (read at parse time; "" = heartbeats are not authenticated).
  std::string pair_secret_file;
  std::string pair_secret;
  int64_t heartbeat_max_age_ms = 5000;
};

// Reads a pair secret file: the whole file minus trailing white space. An
// error (one line) when it is missing, empty, or has any group or other
// permission bit (it must be like an ssh key: chmod 600).
Expected<std::string, std::string> ReadPairSecret(const std::string& path);

using ExitRequest = io::ExitRequest;
using ParseOutcome = std::variant<BalancerConfig, ExitRequest>;
ParseOutcome ParseCommandLine(int argc, const char* const* argv);
// SIGHUP: the same command line parsed again with nothing printed; a bad
// flag, key or file is the error's one line.
Expected<BalancerConfig, std::string> ParseConfigForReload(const std::vector<std::string>& args);

}  // namespace estuary::balancer
