#pragma once
// Shared helpers for the estuary-lb process tests: nodes and balancers on
// port 0, waiting on the balancer's /api/nodes with a deadline (WaitFor).
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "conformance/balancer/lb_process.h"
#include "conformance/support/broker_process.h"
#include "conformance/support/raw_client.h"
#include "conformance/support/wait_for.h"

namespace estuary::testing {

inline std::unique_ptr<BrokerProcess> StartNode(int id, std::vector<std::string> extra = {}) {
  std::vector<std::string> flags = {"--node-id", std::to_string(id), "--shards", "1", "--sys-interval", "0",
                                    "--log-level", "warn"};
  flags.insert(flags.end(), extra.begin(), extra.end());
  std::string error;
  auto node = BrokerProcess::Start(flags, &error);
  EXPECT_TRUE(node) << error;
  return node;
}

inline std::string AdminOf(const BrokerProcess& node) { return "127.0.0.1:" + std::to_string(node.admin_port()); }

inline std::string NodeList(const std::vector<const BrokerProcess*>& nodes) {
  std::string out;
  for (const auto* node : nodes) out += (out.empty() ? "" : ",") + AdminOf(*node);
  return out;
}

inline std::unique_ptr<LbProcess> StartLb(std::vector<std::string> extra) {
  std::vector<std::string> flags = {"--mqtt", "127.0.0.1:0", "--amqp", "127.0.0.1:0", "--heartbeat", "127.0.0.1:0",
                                    "--admin", "127.0.0.1:0", "--log-level", "warn"};
  flags.insert(flags.end(), extra.begin(), extra.end());
  std::string error;
  auto lb = LbProcess::Start(flags, &error);
  EXPECT_TRUE(lb) << error;
  return lb;
}

inline nlohmann::json LbNodes(const LbProcess& lb) {
  HttpReply reply = HttpRequest(lb.admin_port(), "GET", "/api/nodes");
  if (reply.status != 200) return nlohmann::json::object();
  return nlohmann::json::parse(reply.body, nullptr, false);
}

// The balancer's entry for the node with admin port `admin_port`.
inline nlohmann::json LbNode(const LbProcess& lb, const BrokerProcess& node) {
  nlohmann::json all = LbNodes(lb);
  if (!all.is_object() || !all.contains("nodes")) return nlohmann::json::object();
  for (const auto& entry : all["nodes"]) {
    if (entry.value("admin", "") == AdminOf(node)) return entry;
  }
  return nlohmann::json::object();
}

inline bool Eligible(const LbProcess& lb, const BrokerProcess& node) {
  return LbNode(lb, node).value("eligible", false);
}

// Connections the node itself reports.
inline uint64_t NodeConnections(const BrokerProcess& node) {
  HttpResult load = HttpGet("127.0.0.1", node.admin_port(), "/api/load");
  auto json = nlohmann::json::parse(load.body, nullptr, false);
  return json.is_object() ? json.value("connections", uint64_t(0)) : 0;
}

// An MQTT client connected through `port` (the balancer or a node).
inline std::unique_ptr<RawClient> Connected(uint16_t port, const std::string& client_id) {
  auto client = std::make_unique<RawClient>();
  if (!client->Open("127.0.0.1", port)) return nullptr;
  auto connack = client->Connect(client_id);
  if (!connack || connack->reason != mqtt::ReasonCode::kSuccess) return nullptr;
  return client;
}

}  // namespace estuary::testing
