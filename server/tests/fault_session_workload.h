#pragma once
// The persistent-session workload of the fault suite: `sessions` MQTT 5
// clients (fault-s0, fault-s1, ...) each subscribe at QoS 1 to their own
// topic (fault/s0, ...) with a session expiry of an hour and go away, so
// every message for them is queued in their session, which lives on their
// node and on the partition of their client id (docs/partitions.md,
// "Sessions on partitions"). One raw client publishes QoS 1 messages
// ("s42") cycling over the sessions. Verify reconnects each session (clean
// start 0) on the first node given and counts, per acknowledged message,
// whether it came (delivered), did not (lost) or came twice (duplicated);
// each message is checked by one Verify (the suite calls it during the
// fault and after recovery), a message that comes again later counts as
// duplicated.
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "conformance/support/raw_client.h"
#include "server/tests/fault_workload.h"

namespace estuary::server::testing {

class SessionWorkload final : public Workload {
 public:
  explicit SessionWorkload(int sessions);

  std::string name() const override { return "persistent sessions QoS 1"; }
  // The client ids: a session lives in its client id's partition.
  std::vector<std::string> Keys() const override { return all_clients_; }
  void UseKeys(const std::vector<std::string>& keys) override;
  bool Connect(FaultCluster& cluster, int node, std::string* error) override;
  bool WarmUp(std::chrono::milliseconds timeout, std::string* error) override;
  Step Publish(std::chrono::milliseconds wait) override;
  bool Verify(FaultCluster& cluster, const std::vector<int>& nodes, StreamCounters& counters,
              std::string* error) override;

 private:
  struct Outstanding {
    std::string client;
    int64_t sequence = 0;
    uint16_t packet_id = 0;
  };
  void Send(const std::string& client);
  bool CreateSessions(FaultCluster& cluster, int node, std::string* error);

  std::vector<std::string> all_clients_;
  std::vector<std::string> clients_;  // the stream's, after UseKeys
  bool sessions_created_ = false;
  std::unique_ptr<estuary::testing::RawClient> publisher_;
  std::optional<Outstanding> outstanding_;
  std::map<std::string, std::set<int64_t>> acknowledged_;  // client -> acknowledged, not yet checked
  std::map<std::string, std::set<int64_t>> verified_;      // client -> delivered in an earlier Verify
  int64_t sequence_ = 0;
  uint16_t packet_id_ = 0;
  size_t next_client_ = 0;
  int connections_ = 0;
};

}  // namespace estuary::server::testing
