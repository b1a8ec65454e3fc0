#include "tools/bench/report.h"

#include <fmt/format.h>

namespace estuary::bench {
namespace {

double Ms(uint64_t ns) { return static_cast<double>(ns) / 1e6; }

std::string LatencyLine(const char* label, const LatencyHistogram& h) {
  if (h.count() == 0) return fmt::format("{:<12}none recorded\n", label);
  return fmt::format(
      "{:<12}p50 {:.3f}  p90 {:.3f}  p99 {:.3f}  p99.9 {:.3f}  max {:.3f}  mean {:.3f} ms  (n={})\n",
      label, Ms(h.ValueAtPercentile(50)), Ms(h.ValueAtPercentile(90)), Ms(h.ValueAtPercentile(99)),
      Ms(h.ValueAtPercentile(99.9)), Ms(h.max()), h.mean() / 1e6, h.count());
}

}  // namespace

std::string FormatText(const Options& options, const Summary& s) {
  std::string out = "estuary-bench: " + Describe(options) + "\n";
  out += fmt::format("sent        {:>12} msgs in {:.2f} s  {:>12.1f} msgs/s  {:>8.2f} MB/s\n", s.sent,
                     s.publish_seconds, s.send_rate, s.send_mb_s);
  if (options.qos > 0) {
    out += fmt::format("acked       {:>12} msgs", s.acked);
    out += s.rejected > 0 ? fmt::format("  ({} rejected)\n", s.rejected) : "\n";
  }
  out += fmt::format("received    {:>12} msgs in {:.2f} s  {:>12.1f} msgs/s  {:>8.2f} MB/s\n",
                     s.received, s.receive_seconds, s.receive_rate, s.receive_mb_s);
  out += fmt::format("expected    {:>12}  lost {}  duplicated {}  out-of-order {}", s.expected, s.lost,
                     s.duplicates, s.out_of_order);
  out += s.foreign > 0 ? fmt::format("  (ignored {} from other runs)\n", s.foreign) : "\n";
  out += LatencyLine("latency", s.latency);
  if (options.qos > 0) out += LatencyLine("ack latency", s.ack_latency);
  return out;
}

nlohmann::json LatencyJson(const LatencyHistogram& h) {
  return {{"count", h.count()},
          {"min", h.min()},
          {"mean", static_cast<uint64_t>(h.mean())},
          {"p50", h.ValueAtPercentile(50)},
          {"p90", h.ValueAtPercentile(90)},
          {"p99", h.ValueAtPercentile(99)},
          {"p99_9", h.ValueAtPercentile(99.9)},
          {"max", h.max()}};
}

namespace {

nlohmann::json ConfigJson(const Options& o) {
  nlohmann::json config = {{"broker", o.broker},
                           {"publish_protocol", ToString(o.publish_protocol)},
                           {"subscribe_protocol", ToString(o.subscribe_protocol)},
                           {"publish_broker", o.publish_broker},
                           {"subscribe_broker", o.subscribe_broker},
                           {"mqtt_version", VersionName(o.version)},
                           {"threads", o.threads},
                           {"run_id", o.run_id}};
  if (o.idle) {
    config["connections"] = o.connections;
    config["hold_seconds"] = o.duration_s;
    config["keepalive_s"] = o.keepalive_s;
    config["session_expiry_s"] = o.session_expiry_s;
    return config;
  }
  config.update({{"publishers", o.publishers},
                 {"subscribers", o.subscribers},
                 {"qos", o.qos},
                 {"payload_bytes", o.payload_size},
                 {"pattern", ToString(o.pattern)},
                 {"topic", o.topic_prefix},
                 {"rate", o.rate},
                 {"count", o.count},
                 {"duration_s", o.counted() ? 0.0 : o.duration_s},
                 {"inflight", o.inflight}});
  if (o.uses(Protocol::kAmqp)) {
    config.update({{"amqp_settlement", o.qos == 0 ? "pre-settled" : "unsettled"},
                   {"credit", o.credit},
                   {"amqp_target_prefix", o.amqp_target_prefix},
                   {"amqp_source_prefix", o.amqp_source_prefix}});
  }
  return config;
}

}  // namespace

nlohmann::json ToJson(const Options& options, const Summary& s) {
  return {{"mode", "traffic"},
          {"config", ConfigJson(options)},
          {"sent", s.sent},
          {"acked", s.acked},
          {"rejected", s.rejected},
          {"received", s.received},
          {"expected", s.expected},
          {"lost", s.lost},
          {"duplicated", s.duplicates},
          {"out_of_order", s.out_of_order},
          {"foreign", s.foreign},
          {"publish_seconds", s.publish_seconds},
          {"receive_seconds", s.receive_seconds},
          {"send_rate", s.send_rate},
          {"receive_rate", s.receive_rate},
          {"send_mb_s", s.send_mb_s},
          {"receive_mb_s", s.receive_mb_s},
          {"latency_ns", LatencyJson(s.latency)},
          {"ack_latency_ns", LatencyJson(s.ack_latency)}};
}

std::string FormatIdleText(const Options& options, const IdleSummary& s) {
  std::string out = "estuary-bench: " + Describe(options) + "\n";
  out += fmt::format("connected   {} of {} in {:.2f} s ({} failed, {} dropped while held)\n",
                     s.connected, s.requested, s.connect_seconds, s.failed, s.dropped);
  if (!s.first_error.empty()) out += "first error: " + s.first_error + "\n";
  return out;
}

nlohmann::json IdleToJson(const Options& options, const IdleSummary& s) {
  return {{"mode", "idle"},
          {"config", ConfigJson(options)},
          {"requested", s.requested},
          {"connected", s.connected},
          {"failed", s.failed},
          {"dropped", s.dropped},
          {"connect_seconds", s.connect_seconds},
          {"tls_resumed", s.tls_resumed},
          {"first_error", s.first_error}};
}

std::string FormatProgress(const Progress& now, const Progress& before) {
  const double span = now.elapsed_s - before.elapsed_s;
  const double send_rate = span > 0 ? static_cast<double>(now.sent - before.sent) / span : 0;
  const double receive_rate = span > 0 ? static_cast<double>(now.received - before.received) / span : 0;
  return fmt::format("[{:6.1f} s] sent {} ({:.0f}/s)  received {} ({:.0f}/s)", now.elapsed_s, now.sent,
                     send_rate, now.received, receive_rate);
}

}  // namespace estuary::bench
