#pragma once
// LoadReport: a node's /api/load answer as estuary-lb reads it, and the
// score it ranks nodes by (docs/balancer.md). Its own small library: estuaryd
// links it for its own score and its peers' reports (the admin overview)
// without linking the balancer.
//
// Score (docs/balancer.md), lower is better:
//   score = (connections + sent_since_report) * w_connections
//         + (messages_in + messages_out per second) / 1000 * w_messages
//         + queued_messages / 1000 * w_queued
//         + cpu_percent / 100 * w_cpu
//         + memory_bytes / GiB * w_memory
// `sent_since_report` counts the connections this balancer sent to the node
// since its last report, so a burst spreads instead of landing on the node
// that looked lightest a moment ago.
#include <cstdint>
#include <string>
#include <string_view>

#include "base/expected.h"

namespace estuary::balancer {

// A node's /api/load answer.
struct LoadReport {
  uint32_t node_id = 0;
  uint64_t connections = 0;
  double messages_in_per_second = 0;
  double messages_out_per_second = 0;
  uint64_t queued_messages = 0;
  double cpu_percent = 0;
  uint64_t memory_bytes = 0;
  std::string mqtt;  // "host:port" of the node's MQTT listener, "" if not reported
  std::string amqp;
  std::string mqtt_ws;  // --mqtt-ws and --amqp-ws of the node, "" if not set there
  std::string amqp_ws;
  bool draining = false;
};
Expected<LoadReport, std::string> ParseLoadReport(std::string_view json);

struct ScoreWeights {
  double connections = 1.0;
  double messages = 1.0;  // per 1000 messages/s
  double queued = 1.0;    // per 1000 queued messages
  double cpu = 20.0;      // per core's worth (100 %)
  double memory = 10.0;   // per GiB resident
};
double Score(const LoadReport& report, uint64_t sent_since_report, const ScoreWeights& weights);

}  // namespace estuary::balancer
