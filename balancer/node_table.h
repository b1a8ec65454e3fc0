#pragma once
// NodeTable: what estuary-lb knows about each broker node (its last load
// report and health) and the choice of a node for a new connection. Pure:
// no IO, no clock (callers pass `now_ms`); owned by the balancer's loop.
//
// Score: balancer/load_report.h.
//
// Threads (docs/balancer.md, "Threads"): the control plane owns the master
// table and mutates it; the data-plane workers pick from immutable copies
// (`Snapshot()`, const `Pick`). The per-node connection counters are the one
// thing those copies share with the master and with each other: atomics, so a
// burst accepted by several workers at once still spreads over the nodes.
//
// Eligible: the last probe succeeded, within `stale_after_ms`, and the node
// is not draining (by its own report or by the balancer's configuration).
// MQTT affinity: with a client id and known node ids, the session key
// `session/<client-id>` is placed with cluster-core/ring (the nodes' ids,
// the configured partitions and replicas); the first eligible replica of its
// partition (the preferred leader first) wins; otherwise the least score.
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "balancer/load_report.h"
#include "base/expected.h"
#include "cluster-core/ring/ring.h"

namespace estuary::balancer {

struct SelectionOptions {
  ScoreWeights weights;
  int64_t stale_after_ms = 1000;  // no successful probe for this long: unhealthy
  bool mqtt_affinity = true;
  ring::RingOptions ring;
};

// kMqttWs, kAmqpWs: MQTT and AMQP over WebSocket, forwarded as bytes to
// the nodes' --mqtt-ws/--amqp-ws ports (no CONNECT peek: least score).
enum class Service { kMqtt, kAmqp, kMqttWs, kAmqpWs };
// "mqtt", "amqp", "mqtt-ws", "amqp-ws" (the names --proxy-protocol takes).
const char* ServiceName(Service service);

// Connections sent to one node, shared by the master table and every snapshot
// of it (relaxed atomics: counts, not synchronisation).
struct NodeCounters {
  std::atomic<uint64_t> sent_since_report{0};
  std::atomic<uint64_t> sent_total{0};
};

struct NodeState {
  std::string admin;  // the node's admin HOST:PORT, its key here
  std::optional<LoadReport> report = std::nullopt;
  bool probe_ok = false;
  int64_t last_ok_ms = -1;
  std::string last_error = {};
  bool drained_here = false;  // drained by the balancer's configuration
  std::shared_ptr<NodeCounters> counters = std::make_shared<NodeCounters>();

  uint64_t sent_since_report() const { return counters->sent_since_report.load(std::memory_order_relaxed); }
  uint64_t sent_total() const { return counters->sent_total.load(std::memory_order_relaxed); }
};

struct Choice {
  std::string admin;
  std::string address;  // the service HOST:PORT to connect to
  bool by_affinity = false;
};

class NodeTable {
 public:
  explicit NodeTable(SelectionOptions options = {});

  void AddNode(const std::string& admin);  // idempotent
  // Forgets the node (its report and counters); false if it was not known.
  bool RemoveNode(const std::string& admin);
  bool Has(const std::string& admin) const;
  void OnReport(const std::string& admin, LoadReport report, int64_t now_ms);
  void OnFailure(const std::string& admin, std::string why);
  void SetDrained(const std::string& admin, bool drained);

  bool Eligible(const NodeState& node, Service service, int64_t now_ms) const;
  double ScoreOf(const NodeState& node) const;
  // Picks a node for a new connection and counts it as sent there. `exclude`
  // lists admin addresses already tried for this connection.
  std::optional<Choice> Pick(Service service, std::string_view client_id, int64_t now_ms,
                             const std::vector<std::string>& exclude = {});
  // The same on an immutable table (a snapshot), from any thread: only the
  // shared counters change. `rotation` starts the tie-breaking scan (each
  // caller keeps its own cursor).
  std::optional<Choice> Pick(Service service, std::string_view client_id, int64_t now_ms,
                             const std::vector<std::string>& exclude, size_t rotation) const;
  // An immutable copy for the data plane; it shares the node counters.
  std::shared_ptr<const NodeTable> Snapshot() const { return std::make_shared<const NodeTable>(*this); }
  // The node the ring prefers for `client_id` ("" when unknown), for tests and logs.
  std::string AffinityNode(std::string_view client_id) const;

  const std::vector<NodeState>& nodes() const { return nodes_; }
  const SelectionOptions& options() const { return options_; }

 private:
  NodeState* Find(const std::string& admin);
  void RebuildRing();
  std::optional<Choice> ByAffinity(Service service, std::string_view client_id, int64_t now_ms,
                                   const std::vector<std::string>& exclude) const;
  static Choice Take(const NodeState& node, Service service, bool by_affinity);

  SelectionOptions options_;
  std::vector<NodeState> nodes_;
  std::optional<ring::Ring> ring_;
  std::vector<std::string> ring_ids_;  // node ids the ring was built from
  size_t cursor_ = 0;                  // rotates ties (the non-const Pick)
};

// The address to dial for `service`: the reported listener, with an
// unspecified host (0.0.0.0, ::) replaced by the admin address's host.
std::string ServiceAddress(const NodeState& node, Service service);

}  // namespace estuary::balancer
