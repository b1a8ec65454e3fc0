#include "balancer/load_report.h"

#include <nlohmann/json.hpp>

#include <type_traits>

namespace estuary::balancer {
namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
}  // namespace

Expected<LoadReport, std::string> ParseLoadReport(std::string_view json) {
  auto parsed = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) return MakeError(std::string("load report is not a JSON object"));
  LoadReport report;
  auto number = [&](const char* key, auto& field) {
    using Field = std::decay_t<decltype(field)>;
    auto it = parsed.find(key);
    if (it == parsed.end() || !it->is_number()) return;
    if constexpr (std::is_floating_point_v<Field>) {
      field = it->template get<Field>();
    } else if (it->is_number_unsigned()) {
      field = static_cast<Field>(it->template get<uint64_t>());
    }
  };
  auto text = [&](const char* key, std::string& field) {
    auto it = parsed.find(key);
    if (it != parsed.end() && it->is_string()) field = it->get<std::string>();
  };
  if (!parsed.contains("node") || !parsed["node"].is_number_unsigned()) {
    return MakeError(std::string("load report has no node id"));
  }
  number("node", report.node_id);
  number("connections", report.connections);
  number("messages_in_per_second", report.messages_in_per_second);
  number("messages_out_per_second", report.messages_out_per_second);
  number("queued_messages", report.queued_messages);
  number("cpu_percent", report.cpu_percent);
  number("memory_bytes", report.memory_bytes);
  text("mqtt", report.mqtt);
  text("amqp", report.amqp);
  text("mqtt_ws", report.mqtt_ws);
  text("amqp_ws", report.amqp_ws);
  if (auto it = parsed.find("draining"); it != parsed.end() && it->is_boolean()) report.draining = it->get<bool>();
  return report;
}

double Score(const LoadReport& report, uint64_t sent_since_report, const ScoreWeights& w) {
  return double(report.connections + sent_since_report) * w.connections +
         (report.messages_in_per_second + report.messages_out_per_second) / 1000.0 * w.messages +
         double(report.queued_messages) / 1000.0 * w.queued + report.cpu_percent / 100.0 * w.cpu +
         double(report.memory_bytes) / kGiB * w.memory;
}

}  // namespace estuary::balancer
