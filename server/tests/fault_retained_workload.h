#pragma once
// The retained-message workload of the fault suite: QoS 1 retained
// PUBLISHes cycling over `topics` topics (fault/t0, fault/t1, ...), each
// carrying its sequence number ("s42"), from one raw MQTT 5 client. Verify
// subscribes to fault/# on each node with a fresh client and compares, per
// topic, the value read with the last acknowledged one: the same or a
// newer sent value is delivered; an older value or none is lost. Retained
// messages keep one value per topic, so duplicates do not apply.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "conformance/support/raw_client.h"
#include "server/tests/fault_workload.h"

namespace estuary::server::testing {

class RetainedWorkload final : public Workload {
 public:
  explicit RetainedWorkload(int topics);

  std::string name() const override { return "retained QoS 1"; }
  std::vector<std::string> Keys() const override;
  void UseKeys(const std::vector<std::string>& keys) override;
  bool Connect(FaultCluster& cluster, int node, std::string* error) override;
  bool WarmUp(std::chrono::milliseconds timeout, std::string* error) override;
  Step Publish(std::chrono::milliseconds wait) override;
  bool Verify(FaultCluster& cluster, const std::vector<int>& nodes, StreamCounters& counters,
              std::string* error) override;

 private:
  struct Outstanding {
    std::string topic;
    int64_t sequence = 0;
    uint16_t packet_id = 0;
  };
  void Send(const std::string& topic);
  // What `node` holds under fault/ (read after the end marker), or nullopt.
  std::optional<std::map<std::string, std::string>> ReadBack(FaultCluster& cluster, int node);

  std::vector<std::string> all_topics_;
  std::vector<std::string> topics_;  // the stream's, after UseKeys
  std::unique_ptr<estuary::testing::RawClient> publisher_;
  std::optional<Outstanding> outstanding_;
  std::map<std::string, int64_t> acknowledged_;  // topic -> last acknowledged sequence
  std::map<std::string, int64_t> sent_;          // topic -> last sent sequence
  int64_t sequence_ = 0;
  uint16_t packet_id_ = 0;
  size_t next_topic_ = 0;
  int connections_ = 0;  // for fresh client ids
};

}  // namespace estuary::server::testing
