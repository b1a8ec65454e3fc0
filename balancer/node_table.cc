#include "balancer/node_table.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace estuary::balancer {
namespace {

std::string HostOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

bool Contains(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

}  // namespace

const char* ServiceName(Service service) {
  switch (service) {
    case Service::kMqtt: return "mqtt";
    case Service::kAmqp: return "amqp";
    case Service::kMqttWs: return "mqtt-ws";
    case Service::kAmqpWs: return "amqp-ws";
  }
  return "?";
}

std::string ServiceAddress(const NodeState& node, Service service) {
  if (!node.report) return {};
  const LoadReport& report = *node.report;
  const std::string& reported = service == Service::kMqtt     ? report.mqtt
                                : service == Service::kAmqp   ? report.amqp
                                : service == Service::kMqttWs ? report.mqtt_ws
                                                              : report.amqp_ws;
  if (reported.empty()) return {};
  const std::string host = HostOf(reported);
  if (host == "0.0.0.0" || host == "[::]" || host == "::") {
    return HostOf(node.admin) + reported.substr(reported.rfind(':'));
  }
  return reported;
}

NodeTable::NodeTable(SelectionOptions options) : options_(std::move(options)) {}

NodeState* NodeTable::Find(const std::string& admin) {
  for (NodeState& node : nodes_) {
    if (node.admin == admin) return &node;
  }
  return nullptr;
}

void NodeTable::AddNode(const std::string& admin) {
  if (Find(admin) == nullptr) nodes_.push_back(NodeState{.admin = admin});
}

bool NodeTable::RemoveNode(const std::string& admin) {
  auto it = std::find_if(nodes_.begin(), nodes_.end(), [&](const NodeState& node) { return node.admin == admin; });
  if (it == nodes_.end()) return false;
  nodes_.erase(it);
  RebuildRing();
  return true;
}

bool NodeTable::Has(const std::string& admin) const {
  return std::any_of(nodes_.begin(), nodes_.end(), [&](const NodeState& node) { return node.admin == admin; });
}

void NodeTable::OnReport(const std::string& admin, LoadReport report, int64_t now_ms) {
  AddNode(admin);
  NodeState& node = *Find(admin);
  const bool id_changed = !node.report || node.report->node_id != report.node_id;
  node.report = std::move(report);
  node.probe_ok = true;
  node.last_ok_ms = now_ms;
  node.last_error.clear();
  // Connections sent before this report are in its count (or about to be).
  node.counters->sent_since_report.store(0, std::memory_order_relaxed);
  if (id_changed) RebuildRing();
}

void NodeTable::OnFailure(const std::string& admin, std::string why) {
  AddNode(admin);
  NodeState& node = *Find(admin);
  node.probe_ok = false;
  node.last_error = std::move(why);
}

void NodeTable::SetDrained(const std::string& admin, bool drained) {
  AddNode(admin);
  Find(admin)->drained_here = drained;
}

bool NodeTable::Eligible(const NodeState& node, Service service, int64_t now_ms) const {
  if (!node.probe_ok || !node.report || node.drained_here || node.report->draining) return false;
  if (now_ms - node.last_ok_ms > options_.stale_after_ms) return false;
  return !ServiceAddress(node, service).empty();
}

double NodeTable::ScoreOf(const NodeState& node) const {
  if (!node.report) return std::numeric_limits<double>::infinity();
  return Score(*node.report, node.sent_since_report(), options_.weights);
}

// The ring is placed over the ids of every node that ever reported, not only
// the healthy ones: a node that fails keeps its place, and its sessions go
// to the next replica, as the cluster's own failover would.
void NodeTable::RebuildRing() {
  std::vector<std::string> ids;
  for (const NodeState& node : nodes_) {
    if (node.report) ids.push_back(std::to_string(node.report->node_id));
  }
  std::sort(ids.begin(), ids.end());
  if (ids == ring_ids_) return;
  ring_ids_ = ids;
  ring_.reset();
  if (ids.empty() || std::adjacent_find(ids.begin(), ids.end()) != ids.end()) return;
  auto built = ring::Ring::Build(ids, options_.ring);
  if (built) ring_ = std::move(*built);
}

std::string NodeTable::AffinityNode(std::string_view client_id) const {
  if (!ring_ || client_id.empty()) return {};
  const std::uint32_t partition = ring_->PartitionOf("session/" + std::string(client_id));
  const std::string& leader = ring_->Leader(partition);
  for (const NodeState& node : nodes_) {
    if (node.report && std::to_string(node.report->node_id) == leader) return node.admin;
  }
  return {};
}

Choice NodeTable::Take(const NodeState& node, Service service, bool by_affinity) {
  node.counters->sent_since_report.fetch_add(1, std::memory_order_relaxed);
  node.counters->sent_total.fetch_add(1, std::memory_order_relaxed);
  return Choice{node.admin, ServiceAddress(node, service), by_affinity};
}

std::optional<Choice> NodeTable::ByAffinity(Service service, std::string_view client_id, int64_t now_ms,
                                            const std::vector<std::string>& exclude) const {
  if (!options_.mqtt_affinity || service != Service::kMqtt || client_id.empty() || !ring_) return std::nullopt;
  const std::uint32_t partition = ring_->PartitionOf("session/" + std::string(client_id));
  for (const std::string& id : ring_->Replicas(partition)) {
    for (const NodeState& node : nodes_) {
      if (!node.report || std::to_string(node.report->node_id) != id) continue;
      if (Eligible(node, service, now_ms) && !Contains(exclude, node.admin)) return Take(node, service, true);
    }
  }
  return std::nullopt;
}

std::optional<Choice> NodeTable::Pick(Service service, std::string_view client_id, int64_t now_ms,
                                      const std::vector<std::string>& exclude) {
  const size_t rotation = cursor_;
  if (!nodes_.empty()) cursor_ = (cursor_ + 1) % nodes_.size();
  return std::as_const(*this).Pick(service, client_id, now_ms, exclude, rotation);
}

std::optional<Choice> NodeTable::Pick(Service service, std::string_view client_id, int64_t now_ms,
                                      const std::vector<std::string>& exclude, size_t rotation) const {
  if (auto chosen = ByAffinity(service, client_id, now_ms, exclude)) return chosen;
  const NodeState* best = nullptr;
  double best_score = 0;
  // Start the scan at a rotating cursor so that ties do not always go to
  // the first node listed.
  const size_t count = nodes_.size();
  for (size_t i = 0; i < count; ++i) {
    const NodeState& node = nodes_[(rotation + i) % count];
    if (!Eligible(node, service, now_ms) || Contains(exclude, node.admin)) continue;
    const double score = ScoreOf(node);
    if (best == nullptr || score < best_score) {
      best = &node;
      best_score = score;
    }
  }
  if (best == nullptr) return std::nullopt;
  return Take(*best, service, false);
}

}  // namespace estuary::balancer
