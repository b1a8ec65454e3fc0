// estuary-lb's admin pages: /healthz, /api/nodes (the node table as the
// balancer sees it, JSON), /metrics (Prometheus text) and the dashboard at
// "/" (balancer/dashboard/index.html, compiled in; docs/admin-api.md).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include <set>

#include "balancer/balancer.h"
#include "balancer/dashboard_assets.h"

namespace estuary::balancer {

Expected<void, std::string> Balancer::StartAdmin() {
  if (config_.admin.empty()) return {};
  auto endpoint = io::ParseEndpoint(config_.admin);
  if (!endpoint) return MakeError(endpoint.error());
  auto server = io::HttpServer::Start(loop_, *endpoint, [this](const std::string& method, const std::string& path) {
    return ServeAdmin(method, path);
  });
  if (!server) return MakeError("admin " + config_.admin + ": " + server.error());
  admin_ = std::move(*server);
  admin_port_ = admin_->port();
  if (!config_.admin_token_file.empty()) {
    auto token = io::AdminToken::Load(config_.admin_token_file);
    if (!token) return MakeError("--admin-token-file " + token.error());
    admin_token_ = std::move(*token);
    admin_->set_gate([token = admin_token_.get()](std::string_view method, std::string_view path,
                                                  std::string_view authorization) -> std::optional<io::HttpResponse> {
      if (dashboard::IsStaticRequest(method, path)) return std::nullopt;  // the page asks for the token itself
      return token->Check(method, path, authorization);
    });
  }
  return {};
}

io::HttpResponse Balancer::ServeAdmin(const std::string& method, const std::string& path) {
  if (method != "GET" && method != "HEAD") return {405, "text/plain; charset=utf-8", "method not allowed\n"};
  if (path == "/healthz") {
    return {200, "text/plain; charset=utf-8", fmt::format("ok {} epoch={}\n", ToString(role()), epoch())};
  }
  if (path == "/api/nodes") return {200, "application/json", NodesJson()};
  if (const EmbeddedAsset* asset = dashboard::FindAsset(path.substr(0, path.find('?')))) {
    return {200, std::string(asset->content_type), std::string(asset->body), {{"Cache-Control", "no-cache"}}};
  }
  if (path == "/metrics") return {200, "text/plain; version=0.0.4; charset=utf-8", MetricsText()};
  return {404, "text/plain; charset=utf-8", "not found\n"};
}

std::string Balancer::NodesJson() const {
  const int64_t now = loop_.NowMs();
  nlohmann::json nodes = nlohmann::json::array();
  for (const NodeState& node : table_.nodes()) {
    nlohmann::json entry = {
        {"admin", node.admin},
        {"eligible", table_.Eligible(node, Service::kMqtt, now)},
        {"probe_ok", node.probe_ok},
        {"drained_here", node.drained_here},
        {"draining", node.report ? node.report->draining : false},
        {"score", node.report ? table_.ScoreOf(node) : -1.0},
        {"sent_since_report", node.sent_since_report()},
        {"sent_total", node.sent_total()},
        {"last_ok_ms_ago", node.last_ok_ms < 0 ? -1 : now - node.last_ok_ms},
        {"last_error", node.last_error},
    };
    if (node.report) {
      entry["node"] = node.report->node_id;
      entry["connections"] = node.report->connections;
      entry["mqtt"] = ServiceAddress(node, Service::kMqtt);
      entry["amqp"] = ServiceAddress(node, Service::kAmqp);
    }
    nodes.push_back(std::move(entry));
  }
  nlohmann::json workers = nlohmann::json::array();
  for (const auto& worker : workers_) {
    workers.push_back({{"connections", worker->connections()}, {"accepted_total", worker->adopted_total()}});
  }
  // The pair as this balancer sees it (the dashboard's "pair" line).
  const int64_t heard = pair_ ? pair_->last_active_heard_ms() : -1;
  nlohmann::json pair = {{"id", pair_ ? pair_->id() : std::string()},
                         {"peer", peer_},
                         {"deciding", pair_ ? pair_->deciding() : false},
                         {"last_active_heard_ms_ago", heard < 0 ? -1 : now - heard}};
  nlohmann::json out = {{"role", ToString(role())},
                        {"epoch", epoch()},
                        {"pair", std::move(pair)},
                        {"connections", connection_count()},
                        {"workers", std::move(workers)},
                        {"nodes", std::move(nodes)}};
  return out.dump();
}

std::string Balancer::MetricsText() const {
  std::string out = fmt::format(
      "# HELP estuary_lb_active 1 while this balancer is the active one.\n# TYPE estuary_lb_active gauge\n"
      "estuary_lb_active {}\n"
      "# HELP estuary_lb_epoch The pair's epoch as this balancer knows it.\n# TYPE estuary_lb_epoch gauge\n"
      "estuary_lb_epoch {}\n"
      "# HELP estuary_lb_connections Client connections being proxied.\n# TYPE estuary_lb_connections gauge\n"
      "estuary_lb_connections {}\n"
      "# HELP estuary_lb_accepted_total Client connections accepted.\n# TYPE estuary_lb_accepted_total counter\n"
      "estuary_lb_accepted_total {}\n"
      "# HELP estuary_lb_admin_refused_total Admin requests refused with 401 (--admin-token-file).\n"
      "# TYPE estuary_lb_admin_refused_total counter\nestuary_lb_admin_refused_total {}\n"
      "# HELP estuary_lb_refused_total Clients closed without reaching a node.\n"
      "# TYPE estuary_lb_refused_total counter\nestuary_lb_refused_total {}\n"
      "# HELP estuary_lb_node_sent_total Connections sent to each node.\n# TYPE estuary_lb_node_sent_total counter\n",
      role() == Role::kActive ? 1 : 0, epoch(), connection_count(), accepted_total_,
      admin_token_ ? admin_token_->refused() : 0, RefusedTotal());
  for (const NodeState& node : table_.nodes()) {
    fmt::format_to(std::back_inserter(out), "estuary_lb_node_sent_total{{node=\"{}\"}} {}\n", node.admin,
                   node.sent_total());
  }
  out += "# HELP estuary_lb_node_eligible 1 while a node may receive new connections.\n"
         "# TYPE estuary_lb_node_eligible gauge\n";
  for (const NodeState& node : table_.nodes()) {
    fmt::format_to(std::back_inserter(out), "estuary_lb_node_eligible{{node=\"{}\"}} {}\n", node.admin,
                   table_.Eligible(node, Service::kMqtt, loop_.NowMs()) ? 1 : 0);
  }
  fmt::format_to(std::back_inserter(out),
                 "# HELP estuary_lb_heartbeats_accepted_total Partner heartbeats accepted.\n"
                 "# TYPE estuary_lb_heartbeats_accepted_total counter\nestuary_lb_heartbeats_accepted_total {}\n"
                 "# HELP estuary_lb_heartbeats_rejected_total Datagrams on the heartbeat port dropped, by reason.\n"
                 "# TYPE estuary_lb_heartbeats_rejected_total counter\n",
                 heartbeats_accepted_);
  for (int i = 0; i < kHeartbeatRejectReasons; ++i) {
    fmt::format_to(std::back_inserter(out), "estuary_lb_heartbeats_rejected_total{{reason=\"{}\"}} {}\n",
                   ToString(static_cast<HeartbeatReject>(i)), heartbeats_rejected_[i]);
  }
  out += "# HELP estuary_lb_worker_connections Client connections proxied by each data-plane thread.\n"
         "# TYPE estuary_lb_worker_connections gauge\n";
  for (const auto& worker : workers_) {
    fmt::format_to(std::back_inserter(out), "estuary_lb_worker_connections{{worker=\"{}\"}} {}\n", worker->index(),
                   worker->connections());
  }
  out += "# HELP estuary_lb_worker_accepted_total Client connections handed to each data-plane thread.\n"
         "# TYPE estuary_lb_worker_accepted_total counter\n";
  for (const auto& worker : workers_) {
    fmt::format_to(std::back_inserter(out), "estuary_lb_worker_accepted_total{{worker=\"{}\"}} {}\n",
                   worker->index(), worker->adopted_total());
  }
  return out;
}

}  // namespace estuary::balancer

// ---- reload (SIGHUP; issue 25 point 4) ---------------------------------------

namespace estuary::balancer {
namespace {

// The keys a running balancer reads once; a change is logged as needing a restart.
std::vector<std::string> RestartKeysChanged(const BalancerConfig& running, const BalancerConfig& fresh) {
  std::vector<std::string> keys;
  auto check = [&keys](const char* key, bool changed) {
    if (changed) keys.emplace_back(key);
  };
  check("mqtt", running.mqtt.ToString() != fresh.mqtt.ToString());
  check("amqp", running.amqp.ToString() != fresh.amqp.ToString());
  check("heartbeat", running.heartbeat.ToString() != fresh.heartbeat.ToString());
  check("peer", running.peer != fresh.peer);
  check("admin", running.admin != fresh.admin);
  check("admin-token-file", running.admin_token_file != fresh.admin_token_file);
  check("pair-secret-file", running.pair_secret_file != fresh.pair_secret_file);
  check("heartbeat-interval", running.heartbeat_interval_ms != fresh.heartbeat_interval_ms);
  check("threads", running.threads != fresh.threads);
  check("vip", running.vip != fresh.vip);
  check("log-file", running.log.file != fresh.log.file);
  check("log-format", running.log.format != fresh.log.format);
  return keys;
}

}  // namespace

// --nodes is live: nodes added are probed from the next poll, nodes removed
// are forgotten (their connections stay; a probe on its way is ignored).
// A node the partner still lists comes back through its heartbeats.
void Balancer::ReloadNodes(const std::vector<io::Endpoint>& fresh) {
  std::set<std::string> wanted;
  for (const io::Endpoint& endpoint : fresh) wanted.insert(endpoint.ToString());
  std::set<std::string> had;
  for (const io::Endpoint& endpoint : config_.nodes) had.insert(endpoint.ToString());
  std::vector<std::string> added;
  std::vector<std::string> removed;
  for (const std::string& admin : wanted) {
    if (had.count(admin) == 0) added.push_back(admin);
  }
  for (const std::string& admin : had) {
    if (wanted.count(admin) == 0) removed.push_back(admin);
  }
  if (added.empty() && removed.empty()) return;
  for (const std::string& admin : added) table_.AddNode(admin);
  for (const std::string& admin : removed) table_.RemoveNode(admin);
  config_.nodes = fresh;
  spdlog::info("reload: nodes: {} added ({}), {} removed ({}) (applied)", added.size(), fmt::join(added, ","),
               removed.size(), fmt::join(removed, ","));
  PublishNodes();
}

bool Balancer::Reload(const BalancerConfig& fresh) {
  for (const std::string& key : RestartKeysChanged(config_, fresh)) {
    spdlog::warn("reload: {} changed: needs a restart (read once at start); the running value is kept", key);
  }
  ReloadNodes(fresh.nodes);
  // The next poll is armed with the new interval, the next probes take the
  // new timeout.
  if (fresh.poll_interval_ms != config_.poll_interval_ms) {
    spdlog::info("reload: poll-interval: {} -> {} ms (applied)", config_.poll_interval_ms, fresh.poll_interval_ms);
    config_.poll_interval_ms = fresh.poll_interval_ms;
  }
  if (fresh.probe_timeout_ms != config_.probe_timeout_ms) {
    spdlog::info("reload: probe-timeout: {} -> {} ms (applied)", config_.probe_timeout_ms, fresh.probe_timeout_ms);
    config_.probe_timeout_ms = fresh.probe_timeout_ms;
  }
  if (!fresh.admin_ca.empty() || !config_.admin_ca.empty()) {
    // Read again by the parse (a CA that cannot be read failed it): the
    // next probes verify against it.
    spdlog::info("reload: admin-ca: {} (applied)", fresh.admin_ca.empty() ? "off: plain HTTP" : fresh.admin_ca);
    config_.admin_ca = fresh.admin_ca;
    config_.admin_tls = fresh.admin_tls;
  }
  if (fresh.log_level != config_.log_level) {
    spdlog::info("reload: log-level: {} -> {} (applied)", config_.log_level, fresh.log_level);
    config_.log_level = fresh.log_level;
    spdlog::set_level(spdlog::level::from_str(config_.log_level));
  }
  if (config_.admin_token_file.empty() || fresh.admin_token_file != config_.admin_token_file) return true;
  if (admin_token_) {
    if (auto done = admin_token_->Reload(); !done) {
      spdlog::error("reload: admin token kept as it was: {}", done.error());
      return false;
    }
  }
  config_.admin_token = fresh.admin_token;  // what the probes send
  spdlog::info("reload: admin token file {} read again", config_.admin_token_file);
  return true;
}

}  // namespace estuary::balancer
