// GET /api/overview (docs/admin-api.md): the cluster on one page for the
// dashboard and `estuaryctl status`: every member with its state, its load
// report (this node's own; the others' fetched from their admin listeners'
// /api/load, within kPeerLoadTimeoutMs), the balancers' score of it with the
// default weights, the partitions each leads as this node sees them, and
// alarms. Shard 0's loop.
#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>

#include "balancer/http_probe.h"
#include "balancer/load_report.h"
#include "cluster-core/membership/membership_admin.h"
#include "io/uv/admin_token.h"
#include "server/config_addresses.h"
#include "server/node.h"

namespace estuary::server {
namespace {

using Json = nlohmann::json;
constexpr int64_t kPeerLoadTimeoutMs = 700;  // the dashboard polls each second
constexpr uint64_t kLagAlarmEntries = 1000;

// The load report's parts and the score estuary-lb would give them
// (balancer/node_table.h, default weights, nothing sent since the report).
void AddLoad(Json& node, const std::string& load_json) {
  auto report = balancer::ParseLoadReport(load_json);
  if (!report) {
    node["reachable"] = false;
    node["error"] = "malformed /api/load: " + report.error();
    return;
  }
  node["reachable"] = true;
  node["load"] = Json::parse(load_json, nullptr, false);
  node["score"] = balancer::Score(*report, 0, balancer::ScoreWeights{});
}

// Leaders counted over the open partitions this node knows, and alarms for
// partitions without one and followers far behind.
void AddPartitions(Json& overview, const std::string& status_json, std::vector<std::string>& alarms) {
  Json status = Json::parse(status_json, nullptr, false);
  if (status.is_discarded()) return;
  std::map<uint64_t, uint64_t> led;
  uint64_t leaderless = 0, lagging = 0;
  const Json open = status.value("open", Json::array());
  for (const Json& entry : open) {
    const uint64_t leader = entry.value("leader", uint64_t{0});
    if (entry.contains("leader") && leader == 0) ++leaderless;
    if (leader != 0) ++led[leader];
    const Json lags = entry.value("lag", Json::object());
    for (const auto& follower : lags.items()) {
      if (follower.value().is_number() && follower.value().get<uint64_t>() > kLagAlarmEntries) ++lagging;
    }
  }
  overview["partitions"] = {{"total", status.value("partitions", 0)}, {"open", open.size()},
                            {"leaderless", leaderless}, {"placement_epoch", status.value("placement_epoch", 0)}};
  for (Json& node : overview["nodes"]) node["partitions_led"] = led[node["node"].get<uint64_t>()];
  if (leaderless > 0) alarms.push_back(fmt::format("{} open partitions have no leader (seen from here)", leaderless));
  if (lagging > 0) {
    alarms.push_back(fmt::format("{} followers are more than {} entries behind their leader", lagging, kLagAlarmEntries));
  }
}

void AddAlarms(Json& overview, std::vector<std::string> alarms) {
  for (const Json& node : overview["nodes"]) {
    const std::string state = node.value("state", "");
    const uint64_t id = node.value("node", uint64_t{0});
    if (state != "up") {
      alarms.push_back(fmt::format("node {} is {}", id, state));
    } else if (!node.value("reachable", false)) {
      alarms.push_back(fmt::format("node {}: {}", id, node.value("error", std::string("no load report"))));
    }
    if (node.contains("load") && node["load"].value("draining", false)) {
      alarms.push_back(fmt::format("node {} is draining", id));
    }
  }
  overview["alarms"] = std::move(alarms);
}

}  // namespace

void Node::ServeOverview(io::HttpServer::Responder respond) {
  struct Pending {
    Json overview;
    size_t waiting = 1;  // released by this function itself once every fetch is started
    std::vector<std::string> alarms;
    io::HttpServer::Responder respond;
    void Done() {
      if (--waiting != 0) return;
      AddAlarms(overview, std::move(alarms));
      respond({200, "application/json", overview.dump()});
    }
  };
  auto pending = std::make_shared<Pending>();
  pending->respond = std::move(respond);
  Json& overview = pending->overview;
  overview["self"] = config_.node_id;
  overview["nodes"] = Json::array();
  if (agent_ != nullptr) {
    Json members = Json::parse(cluster::MembersJson(*agent_->membership()), nullptr, false);
    for (const Json& member : members.value("members", Json::array())) {
      overview["nodes"].push_back({{"node", member["node"]},
                                   {"state", member["state"]},
                                   {"admin_address", member["admin_address"]},
                                   {"cluster_address", member["cluster_address"]},
                                   {"for_ms", member["for_ms"]},
                                   {"reachable", false}});
    }
  } else {
    overview["nodes"].push_back({{"node", config_.node_id}, {"state", "up"},
                                 {"admin_address", io::Endpoint{AnnouncedHost(config_, config_.admin.host), admin_port_}.ToString()}});
  }
  // Roles: the metadata group's leader holds membership and placement.
  if (agent_ != nullptr && agent_->metadata() != nullptr) {
    Json meta = Json::parse(agent_->metadata()->StatusJson(), nullptr, false);
    const uint64_t leader = meta.is_discarded() ? 0 : meta.value("leader", uint64_t{0});
    overview["meta_leader"] = leader;
    for (Json& node : overview["nodes"]) node["role"] = node["node"] == leader ? "meta-leader" : "member";
  }
  if (agent_ != nullptr && agent_->partitions() != nullptr) {
    AddPartitions(overview, agent_->partitions()->StatusJson(), pending->alarms);
  }
  std::string bearer;
  if (!config_.admin_token_file.empty()) {
    if (auto token = io::ReadAdminTokenFile(config_.admin_token_file)) bearer = *token;
  }
  for (size_t index = 0; index < overview["nodes"].size(); ++index) {
    Json& node = overview["nodes"][index];
    if (node["node"] == config_.node_id) {
      AddLoad(node, LoadJson());
      continue;
    }
    const std::string state = node.value("state", "");
    auto endpoint = io::ParseEndpoint(node.value("admin_address", ""));
    if (state == "down" || state == "left") {
      node["error"] = "not asked: the member table has it " + state;
    } else if (config_.admin_tls) {
      node["error"] = "load not fetched: peers are not asked over --admin-tls";
    } else if (!endpoint) {
      node["error"] = "no admin address in the member table";
    } else {
      ++pending->waiting;
      balancer::HttpGet(shards_[0]->loop(), *endpoint, "GET", "/api/load", kPeerLoadTimeoutMs,
                        [pending, index, address = endpoint->ToString()](const balancer::HttpAnswer& answer) {
                          Json& entry = pending->overview["nodes"][index];
                          if (answer.status == 200) {
                            AddLoad(entry, answer.body);
                          } else {
                            entry["error"] = answer.status == 0
                                                 ? fmt::format("admin API at {} unreachable: {}", address, answer.error)
                                                 : fmt::format("admin API at {} answered HTTP {}", address, answer.status);
                          }
                          pending->Done();
                        },
                        bearer);
    }
  }
  pending->Done();
}

}  // namespace estuary::server
