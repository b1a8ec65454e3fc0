#pragma once
// What the node process tests share: a 2-node loopback cluster of real
// estuaryd processes (conformance/cluster's ClusterProcess), raw MQTT 5
// clients, admin JSON reads, and waits on conditions with deadlines (no
// sleeps). Test support only; one thread.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "conformance/cluster/cluster_process.h"
#include "conformance/cluster/cluster_start.h"
#include "conformance/support/raw_client.h"
#include "conformance/support/wait_for.h"

namespace estuary::server::testing {

using estuary::testing::ClusterProcess;
using estuary::testing::NodeProcess;
using estuary::testing::RawClient;
using SteadyClock = std::chrono::steady_clock;

using estuary::conformance::kConverge;

// Polls `done` every 50 ms until it holds or `timeout` passes.
inline bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  return estuary::testing::WaitFor(done, timeout, std::chrono::milliseconds(50));
}

// `nodes` nodes (bitcask data folders if `durable`), every member up.
inline std::unique_ptr<ClusterProcess> StartCluster(int nodes, bool durable,
                                                    std::vector<std::string> extra_flags = {}) {
  ClusterProcess::Options options;
  options.nodes = nodes;
  options.durable = durable;
  options.extra_flags.insert(options.extra_flags.end(), extra_flags.begin(), extra_flags.end());
  return estuary::conformance::StartCluster(options);
}

// GET `path` on a node's admin port, parsed; nullopt if no reply or not JSON.
inline std::optional<nlohmann::json> AdminJson(uint16_t admin_port, const std::string& path, int* status = nullptr) {
  auto reply = estuary::testing::AdminGet(admin_port, path);
  if (!reply) return std::nullopt;
  if (status != nullptr) *status = reply->status;
  auto json = nlohmann::json::parse(reply->body, nullptr, false);
  if (json.is_discarded()) return std::nullopt;
  return json;
}

inline std::unique_ptr<RawClient> ConnectTo(const NodeProcess& node, const std::string& client_id) {
  auto client = std::make_unique<RawClient>();
  if (!client->Open("127.0.0.1", node.mqtt_port())) return nullptr;
  auto connack = client->Connect(client_id, true);
  if (!connack || connack->reason != mqtt::ReasonCode::kSuccess) return nullptr;
  return client;
}

// A QoS 1 retained PUBLISH, acknowledged.
inline bool PublishRetained(RawClient& client, const std::string& topic, const std::string& payload,
                            uint16_t packet_id) {
  mqtt::PublishPacket publish;
  publish.topic = topic;
  publish.payload = payload;
  publish.qos = 1;
  publish.packet_id = packet_id;
  publish.retain = true;
  client.Send(publish);
  auto ack = client.ReceiveAs<mqtt::AckPacket>();
  return ack && ack->packet_id == packet_id;
}

// Subscribes (QoS 0) to each filter in turn, one SUBSCRIBE each, and
// returns the retained payloads that came, per topic, until `last_topic`'s
// retained message arrived (nullopt if it never did within `timeout`). The
// broker queues a subscription's retained messages when it answers it, so
// anything retained for an earlier filter arrives before the last one's.
inline std::optional<std::map<std::string, std::string>> RetainedUpTo(RawClient& client,
                                                                     const std::vector<std::string>& filters,
                                                                     const std::string& last_topic,
                                                                     std::chrono::milliseconds timeout) {
  uint16_t packet_id = 1;
  for (const std::string& filter : filters) {
    mqtt::SubscribePacket subscribe;
    subscribe.packet_id = packet_id++;
    subscribe.subscriptions.push_back({filter, mqtt::SubscribeOptions{0}});
    client.Send(subscribe);
  }
  std::map<std::string, std::string> got;
  const auto deadline = SteadyClock::now() + timeout;
  while (SteadyClock::now() < deadline) {
    auto packet = client.Receive(std::chrono::milliseconds(200));
    if (!packet) continue;
    if (auto* publish = std::get_if<mqtt::PublishPacket>(&*packet)) {
      got[publish->topic] = publish->payload;
      if (publish->topic == last_topic) return got;
    }
  }
  return std::nullopt;
}

}  // namespace estuary::server::testing
