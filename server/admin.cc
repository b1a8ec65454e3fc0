// The admin listener's pages: /healthz, /metrics (Prometheus text format),
// /api/load (JSON for the balancers) and /api/shards.
#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cluster-core/membership/membership_admin.h"
#include "cluster-core/partition/partition_admin.h"
#include "server/node.h"
#include "server/config_addresses.h"

namespace estuary::server {
namespace {

using Counter = std::atomic<uint64_t> core::ShardMetrics::*;

struct MetricInfo {
  const char* name;
  const char* type;
  const char* help;
  Counter field;
};

constexpr MetricInfo kMetrics[] = {
    {"estuary_connections", "gauge", "Open client connections.", &core::ShardMetrics::connections},
    {"estuary_connections_accepted_total", "counter", "Client connections accepted.",
     &core::ShardMetrics::connections_total},
    {"estuary_sessions", "gauge", "Sessions held, online and offline.", &core::ShardMetrics::sessions},
    {"estuary_sessions_expired_total", "counter", "Offline sessions ended by their session expiry interval.",
     &core::ShardMetrics::sessions_expired},
    {"estuary_client_id_claims_total", "counter", "MQTT CONNECTs that claimed their client id (cluster).",
     &core::ShardMetrics::client_id_claims},
    {"estuary_client_id_claims_refused_total", "counter",
     "MQTT CONNECTs refused because the client-id claim was not committed in time.",
     &core::ShardMetrics::client_id_claims_refused},
    {"estuary_sessions_adopted_total", "counter",
     "Persistent sessions read from their partition on a CONNECT (served elsewhere before).",
     &core::ShardMetrics::sessions_adopted},
    {"estuary_sessions_taken_over_total", "counter",
     "Persistent sessions of a gone node taken over here (task transfer) until their client returns.",
     &core::ShardMetrics::sessions_taken_over},
    {"estuary_sessions_stale_dropped_total", "counter",
     "Recovered persistent sessions dropped at start: another node served them by then.",
     &core::ShardMetrics::sessions_stale_dropped},
    {"estuary_shared_redelivered_total", "counter",
     "Messages of a departed shared-subscription member (unacknowledged or not yet sent) sent to another member.",
     &core::ShardMetrics::shared_redelivered},
    {"estuary_shared_dropped_no_member_total", "counter",
     "Shared-subscription messages dropped because no member of the group was left to take them.",
     &core::ShardMetrics::shared_dropped_no_member},
    {"estuary_replayed_delivered_total", "counter",
     "Forwards a gone node never confirmed, sent again by their publishers' nodes and offered to a session taken from it.",
     &core::ShardMetrics::replayed_delivered},
    {"estuary_replayed_duplicates_skipped_total", "counter",
     "Messages not offered twice to a session taken from a gone node (it had them already, or they came both ways).",
     &core::ShardMetrics::replayed_duplicates_skipped},
    {"estuary_handed_off_in_total", "counter",
     "Deliveries a moved session's previous node held (not on the partition yet) handed to the session here.",
     &core::ShardMetrics::handed_off_in},
    {"estuary_moved_stubs", "gauge",
     "Dropped copies of moved sessions whose subscriptions still match here until the new node's routes are seen.",
     &core::ShardMetrics::moved_stubs},
    {"estuary_moved_stub_deliveries_total", "counter",
     "Deliveries a moved session's stub matched here and handed on to the session's new node.",
     &core::ShardMetrics::moved_stub_deliveries},
    {"estuary_messages_received_total", "counter", "PUBLISH packets received from clients.",
     &core::ShardMetrics::messages_in},
    {"estuary_messages_sent_total", "counter", "PUBLISH packets sent to clients.",
     &core::ShardMetrics::messages_out},
    {"estuary_bytes_received_total", "counter", "Bytes received from clients.", &core::ShardMetrics::bytes_in},
    {"estuary_bytes_sent_total", "counter", "PUBLISH bytes sent to clients.", &core::ShardMetrics::bytes_out},
    {"estuary_messages_dropped_total", "counter", "Messages dropped by queue limits, expiry or size.",
     &core::ShardMetrics::messages_dropped},
    {"estuary_queue_full_dropped_total", "counter",
     "New messages not queued because the session's queue was full (--queue-overflow drop-new or reject).",
     &core::ShardMetrics::queue_full_dropped},
    {"estuary_queue_full_dropped_oldest_total", "counter",
     "Queued messages dropped to make room for newer ones (--queue-overflow drop-oldest).",
     &core::ShardMetrics::queue_full_dropped_oldest},
    {"estuary_publishes_rejected_queue_full_total", "counter",
     "QoS 1/2 publishes answered PUBACK/PUBREC 0x97 (MQTT 5) or rejected (AMQP): a matching session's queue was "
     "full (--queue-overflow reject).",
     &core::ShardMetrics::publishes_rejected_queue_full},
    {"estuary_publishes_acknowledged_queue_full_total", "counter",
     "MQTT 3.1.1 QoS 1/2 publishes acknowledged although a matching session's queue was full (--queue-overflow "
     "reject; 3.1.1 has no negative acknowledgement).",
     &core::ShardMetrics::publishes_acknowledged_queue_full},
    {"estuary_queued_messages", "gauge", "Messages waiting in session queues.",
     &core::ShardMetrics::queued_messages},
    {"estuary_inflight_messages", "gauge", "Messages sent and not yet acknowledged.",
     &core::ShardMetrics::inflight_messages},
    {"estuary_subscriptions", "gauge", "Subscriptions held.", &core::ShardMetrics::subscriptions},
    {"estuary_retained_messages", "gauge", "Retained messages (each shard holds a replica).",
     &core::ShardMetrics::retained_messages},
    {"estuary_retained_read_fallbacks_total", "counter",
     "SUBSCRIBEs whose retained messages came from this node's copy: the partitions could not be read in time.",
     &core::ShardMetrics::retained_read_fallbacks},
    {"estuary_forwards_total", "counter", "Publishes forwarded to other shards or nodes.",
     &core::ShardMetrics::forwards_out},
    {"estuary_protocol_errors_total", "counter", "Connections closed for protocol errors.",
     &core::ShardMetrics::protocol_errors},
    {"estuary_publish_throttled_total", "counter",
     "Times a client's reading was paused for --max-publish-rate or --max-publish-bytes-rate.",
     &core::ShardMetrics::publish_throttled},
};

uint64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

double CpuSeconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& tv) { return double(tv.tv_sec) + double(tv.tv_usec) / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

}  // namespace

std::string Node::MetricsText() const {
  std::string out;
  for (const MetricInfo& metric : kMetrics) {
    fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", metric.name, metric.help,
                   metric.name, metric.type);
    for (size_t shard = 0; shard < metrics_.size(); ++shard) {
      const uint64_t value = ((*metrics_[shard]).*(metric.field)).load(std::memory_order_relaxed);
      fmt::format_to(std::back_inserter(out), "{}{{node=\"{}\",shard=\"{}\"}} {}\n", metric.name,
                     config_.node_id, shard, value);
    }
  }
  // PROXY v2 from the balancers (--proxy-from, docs/balancer.md).
  out += "# HELP estuary_proxy_headers_total Connections whose client address came from a balancer's PROXY header.\n"
         "# TYPE estuary_proxy_headers_total counter\n";
  for (size_t shard = 0; shard < shards_.size(); ++shard) {
    fmt::format_to(std::back_inserter(out), "estuary_proxy_headers_total{{node=\"{}\",shard=\"{}\"}} {}\n",
                   config_.node_id, shard, shards_[shard]->proxy_gate().proxied());
  }
  out += "# HELP estuary_proxy_refused_total Connections from balancer addresses closed without a valid PROXY header.\n"
         "# TYPE estuary_proxy_refused_total counter\n";
  for (size_t shard = 0; shard < shards_.size(); ++shard) {
    fmt::format_to(std::back_inserter(out), "estuary_proxy_refused_total{{node=\"{}\",shard=\"{}\"}} {}\n",
                   config_.node_id, shard, shards_[shard]->proxy_gate().refused());
  }
  // Exactly-once AMQP senders (rcv-settle-mode second, docs/amqp.md
  // "Exactly-once links"): the shards' InboundLedgers.
  struct LedgerSeries {
    const char* name;
    const char* type;
    const char* help;
    const std::atomic<uint64_t> amqp::InboundLedger::Stats::*field;
  };
  static constexpr LedgerSeries kLedgerSeries[] = {
      {"estuary_amqp_exactly_once_kept_tags", "gauge",
       "Delivery tags of rcv-settle-mode second senders kept until the client settles.",
       &amqp::InboundLedger::Stats::kept_tags},
      {"estuary_amqp_exactly_once_links", "gauge", "Exactly-once sender links with kept state (attached or not).",
       &amqp::InboundLedger::Stats::links},
      {"estuary_amqp_exactly_once_suspended_links", "gauge",
       "Exactly-once sender links detached with unsettled deliveries, kept for a recovery.",
       &amqp::InboundLedger::Stats::suspended},
      {"estuary_amqp_exactly_once_resends_total", "counter",
       "Transfers sent again under a kept tag, answered with the kept outcome and not published again.",
       &amqp::InboundLedger::Stats::resends_answered},
      {"estuary_amqp_exactly_once_forgotten_links_total", "counter",
       "Suspended exactly-once links forgotten past the bound of 1024 per shard (a resend on one is published "
       "again).",
       &amqp::InboundLedger::Stats::forgotten_links},
  };
  for (const LedgerSeries& series : kLedgerSeries) {
    fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", series.name, series.help, series.name,
                   series.type);
    for (size_t shard = 0; shard < shards_.size(); ++shard) {
      fmt::format_to(std::back_inserter(out), "{}{{node=\"{}\",shard=\"{}\"}} {}\n", series.name, config_.node_id,
                     shard, (shards_[shard]->amqp_ledger().stats().*series.field).load(std::memory_order_relaxed));
    }
  }
  if (shared_.guard) out += shared_.guard->MetricsText(config_.node_id);  // docs/security.md "Abuse limits"
  fmt::format_to(std::back_inserter(out),
                 "# HELP estuary_connect_timeouts_total Client connections closed by --connect-timeout: no MQTT "
                 "CONNECT (or AUTH exchange), or no AMQP SASL outcome and open, in time.\n"
                 "# TYPE estuary_connect_timeouts_total counter\n"
                 "estuary_connect_timeouts_total{{node=\"{}\",protocol=\"mqtt\"}} {}\n"
                 "estuary_connect_timeouts_total{{node=\"{}\",protocol=\"amqp\"}} {}\n",
                 config_.node_id, shared_.mqtt_connect_timeouts.load(std::memory_order_relaxed), config_.node_id,
                 shared_.amqp_connect_timeouts.load(std::memory_order_relaxed));
  fmt::format_to(std::back_inserter(out),
                 "# HELP estuary_admin_refused_total Admin API requests refused with 401 (no or wrong bearer token, "
                 "--admin-token-file).\n# TYPE estuary_admin_refused_total counter\n"
                 "estuary_admin_refused_total{{node=\"{}\"}} {}\n",
                 config_.node_id, admin_token_ ? admin_token_->refused() : 0);
  const double uptime = double(io::SystemClock::Instance().NowMs() - started_ms_) / 1000.0;
  fmt::format_to(std::back_inserter(out),
                 "# HELP estuary_uptime_seconds Seconds since the node started.\n"
                 "# TYPE estuary_uptime_seconds gauge\nestuary_uptime_seconds{{node=\"{}\"}} {:.3f}\n"
                 "# HELP estuary_resident_memory_bytes Resident set size.\n"
                 "# TYPE estuary_resident_memory_bytes gauge\n"
                 "estuary_resident_memory_bytes{{node=\"{}\"}} {}\n",
                 config_.node_id, uptime, config_.node_id, ResidentBytes());
  out += ClusterMetricsText();
  return out;
}

// The agent's series and the links' per-peer counters (shard 0's loop, as
// the admin listener and the agent are).
std::string Node::ClusterMetricsText() const {
  if (!agent_) return {};
  std::string out = agent_->MetricsText();
  const auto stats = transport_->stats();
  auto per_peer = [&](const char* name, const char* type, const char* help, auto field) {
    fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
    for (const auto& peer : stats) {
      fmt::format_to(std::back_inserter(out), "{}{{node=\"{}\",peer=\"{}\"}} {}\n", name, config_.node_id, peer.node,
                     field(peer));
    }
  };
  using Stats = cluster::UvTransport::PeerStats;
  per_peer("estuary_cluster_link_frames_out_total", "counter", "Frames sent to a peer.",
           [](const Stats& p) { return p.frames_out; });
  per_peer("estuary_cluster_link_frames_in_total", "counter", "Frames received from a peer.",
           [](const Stats& p) { return p.frames_in; });
  per_peer("estuary_cluster_link_bytes_out_total", "counter", "Bytes sent to a peer.",
           [](const Stats& p) { return p.bytes_out; });
  per_peer("estuary_cluster_link_writes_total", "counter", "Socket writes to a peer (frames are batched).",
           [](const Stats& p) { return p.writes; });
  per_peer("estuary_cluster_link_reconnects_total", "counter", "Times the link to a peer was re-established.",
           [](const Stats& p) { return p.reconnects; });
  per_peer("estuary_cluster_link_queued_bytes", "gauge", "Bytes waiting in a peer's send queue.",
           [](const Stats& p) { return p.queued_bytes; });
  fmt::format_to(std::back_inserter(out),
                 "# HELP estuary_cluster_links_refused_total Inter-node links refused or dropped for a protocol reason "
                 "(wrong secret, bad version, oversize, timeout).\n# TYPE estuary_cluster_links_refused_total counter\n"
                 "estuary_cluster_links_refused_total{{node=\"{}\"}} {}\n",
                 config_.node_id, transport_->refused());
  return out;
}

std::string Node::LoadJson() const {
  // Rates over the interval since the previous call (the balancer polls).
  struct Sample {
    int64_t at_ms = 0;
    uint64_t in = 0, out = 0;
    double cpu = 0;
  };
  static thread_local Sample previous;
  Sample now{io::SystemClock::Instance().NowMs(), 0, 0, CpuSeconds()};
  uint64_t connections = 0, queued = 0;
  for (const auto& m : metrics_) {
    now.in += m->messages_in.load(std::memory_order_relaxed);
    now.out += m->messages_out.load(std::memory_order_relaxed);
    connections += m->connections.load(std::memory_order_relaxed);
    queued += m->queued_messages.load(std::memory_order_relaxed);
  }
  // Several pollers (both balancers, dashboards, peers' /api/overview):
  // within kMinRateIntervalMs of the last sample the rates measured then are
  // answered again, so a poll right after another does not measure noise.
  constexpr int64_t kMinRateIntervalMs = 500;
  struct Rates {
    double in = 0, out = 0, cpu = 0;
  };
  static thread_local Rates rates;
  const bool resample = previous.at_ms == 0 || now.at_ms - previous.at_ms >= kMinRateIntervalMs;
  if (resample && previous.at_ms != 0) {
    const double seconds = double(now.at_ms - previous.at_ms) / 1000.0;
    rates = {double(now.in - previous.in) / seconds, double(now.out - previous.out) / seconds,
             100.0 * (now.cpu - previous.cpu) / seconds};
  }
  nlohmann::json load = {
      {"node", config_.node_id},
      {"connections", connections},
      {"messages_in_per_second", rates.in},
      {"messages_out_per_second", rates.out},
      {"queued_messages", queued},
      {"cpu_percent", rates.cpu},
      {"memory_bytes", ResidentBytes()},
      {"shards", metrics_.size()},
      // Where the balancers send clients, and whether they should.
      // --advertise-mqtt/--advertise-amqp when given (docs/cluster.md).
      {"mqtt", AdvertisedListener(config_.advertise_mqtt, config_.mqtt.host, mqtt_port_)},
      {"amqp", AdvertisedListener(config_.advertise_amqp, config_.amqp.host, amqp_port_)},
      // WebSocket ports, for estuary-lb --mqtt-ws/--amqp-ws ("" = not served).
      {"mqtt_ws", mqtt_ws_ ? mqtt_ws_->ToString() : std::string()},
      {"amqp_ws", amqp_ws_ ? amqp_ws_->ToString() : std::string()},
      {"draining", draining_ || (agent_ && agent_->partitions() && agent_->partitions()->draining())},
  };
  if (resample) previous = now;
  return load.dump();
}

io::HttpResponse Node::ServeAdmin(const std::string& method, const std::string& path) {
  // Configuration reload, as SIGHUP (issue 25 point 4; server/node_reload.cc).
  if (path == "/api/reload") return ServeReload(method);
  // Drain switch for the balancers (docs/balancer.md): POST turns it on,
  // DELETE off; /api/load reports it and estuary-lb sends no new clients.
  if (path == "/api/drain" && (method == "POST" || method == "DELETE")) {
    draining_ = method == "POST";
    // The metadata group keeps the drain (it outlives a restart): no
    // leadership comes here, and the partitions led here move away.
    if (agent_ != nullptr && agent_->partitions() != nullptr) agent_->partitions()->SetDraining(draining_);
    return {200, "text/plain; charset=utf-8", draining_ ? "draining\n" : "not draining\n"};
  }
  // Fault injection (--fault-injection, docs/reliability.md): POST cuts the
  // node off from every peer, DELETE heals. Same loop as the transport.
  if (path == "/api/fault/isolate" && (method == "POST" || method == "DELETE")) {
    if (!config_.fault_injection || !transport_) {
      return {404, "text/plain; charset=utf-8", "fault injection is off (start with --fault-injection and a cluster)\n"};
    }
    transport_->SetIsolated(method == "POST");
    return {200, "text/plain; charset=utf-8", transport_->isolated() ? "isolated\n" : "healed\n"};
  }
  if (agent_ != nullptr) {  // /api/cluster/members, join, leave, remove (estuaryctl)
    if (auto response = cluster::ServeMembershipAdmin(*agent_->membership(), method, path)) return *response;
  }
  if (agent_ != nullptr && agent_->partitions() != nullptr) {  // transfer-leader (estuaryctl)
    if (auto response = partition::ServePartitionAdmin(*agent_->partitions(), method, path)) return *response;
  }
  if (method != "GET") return {405, "text/plain; charset=utf-8", "method not allowed\n"};
  if (path == "/healthz") {
    if (shutting_down_) return {200, "text/plain; charset=utf-8", "stopping\n"};
    // Refused or removed by the cluster: 503 with the reason (docs/cluster.md).
    if (agent_ != nullptr) {
      if (auto unhealthy = cluster::MembershipHealth(*agent_->membership())) return *unhealthy;
    }
    return {200, "text/plain; charset=utf-8", "ok\n"};
  }
  if (path == "/metrics") return {200, "text/plain; version=0.0.4; charset=utf-8", MetricsText()};
  if (path == "/api/load") return {200, "application/json", LoadJson()};
  if (path == "/api/cluster/routes") {
    if (!agent_) return {404, "text/plain; charset=utf-8", "no cluster: start with --cluster-secret-file\n"};
    return {200, "application/json", agent_->RoutesJson()};
  }
  if (path == "/api/cluster/meta") {
    if (!agent_ || !agent_->metadata()) {
      return {404, "text/plain; charset=utf-8", "no cluster: start with --cluster-secret-file\n"};
    }
    if (!bootstrap_gate_) return {200, "application/json", agent_->metadata()->StatusJson()};
    // --bootstrap-expect: what the gate last decided (docs/cluster.md).
    nlohmann::json meta = nlohmann::json::parse(agent_->metadata()->StatusJson());
    const BootstrapDecision& last = bootstrap_gate_->last();
    meta["bootstrap"] = {{"expect", config_.bootstrap_expect},
                         {"step", BootstrapStepName(last.step)},
                         {"founder", last.founder},
                         {"founded_here", bootstrap_gate_->bootstrapped()},
                         {"why", last.why}};
    return {200, "application/json", meta.dump()};
  }
  if (path == "/api/cluster/partitions") {
    if (!agent_ || !agent_->partitions()) {
      return {404, "text/plain; charset=utf-8", "no cluster: start with --cluster-secret-file\n"};
    }
    return {200, "application/json", agent_->partitions()->StatusJson()};
  }
  return {404, "text/plain; charset=utf-8", "not found\n"};
}

}  // namespace estuary::server
