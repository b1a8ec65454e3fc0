#pragma once
// The retained-message workload of the fault suite: QoS 1 retained
// PUBLISHes cycling over `topics` topics (fault/t0, fault/t1, ...), each
// carrying its sequence number ("s42"), from one raw MQTT 5 client. Verify
// subscribes to fault/# on each node with a fresh client and compares, per
// topic, the value read with the last acknowledged one: the same or a
// newer sent value is delivered; an older value or none is lost. Retained
// messages keep one value per topic, so duplicates do not apply.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "server/tests/fault_stream_workload.h"

namespace estuary::server::testing {

class RetainedWorkload final : public StreamWorkload {
 public:
  explicit RetainedWorkload(int topics);

  std::string name() const override { return "retained QoS 1"; }
  bool Verify(FaultCluster& cluster, const std::vector<int>& nodes, StreamCounters& counters,
              std::string* error) override;

 protected:
  mqtt::PublishPacket MessageFor(const std::string& key) const override;
  void OnSent(const std::string& key, int64_t sequence) override;
  void OnAcknowledged(const std::string& key, int64_t sequence) override;

 private:
  // What `node` holds under fault/ (read after the end marker), or nullopt.
  std::optional<std::map<std::string, std::string>> ReadBack(FaultCluster& cluster, int node);

  std::map<std::string, int64_t> acknowledged_;  // topic -> last acknowledged sequence
  std::map<std::string, int64_t> sent_;          // topic -> last sent sequence
};

}  // namespace estuary::server::testing
