#pragma once
// The persistent-session workloads of the fault suite: `sessions` MQTT 5
// clients (fault-s0, fault-s1, ...) each subscribe at the stream's QoS (1
// or 2) to their own topic (fault/s0, ...) with a session expiry of an hour
// and go away, so every message for them is queued in their session, which
// lives on their node and on the partition of their client id
// (docs/partitions.md, "Sessions on partitions"). One raw client publishes
// ("s42") cycling over the sessions. Verify resumes each session (clean
// start 0) on the first node given and counts, per acknowledged message,
// whether it came (delivered), did not (lost) or came twice (duplicated);
// each message is checked by one Verify (the suite calls it during the
// fault and after recovery), a message that comes again later counts as
// duplicated. A QoS 2 resend of a message whose PUBREL has not come yet is
// the same message (the client answers it as MQTT 4.3.3 says), not a
// duplicate.
//
// With `on_victims`, Prepare moves the sessions to the victims (resumed
// there, round robin) before the stream, and keeps every other one
// connected (online: it reads and acknowledges between publish steps) while
// the others go away again: the fault then takes the node that serves
// them, and a survivor must take them over (task transfer) before they
// resume there.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "server/tests/fault_stream_workload.h"

namespace estuary::server::testing {

struct SessionWorkloadOptions {
  int sessions = 16;
  uint8_t qos = 1;
  bool on_victims = false;
};

class SessionWorkload final : public StreamWorkload {
 public:
  explicit SessionWorkload(const SessionWorkloadOptions& options);

  std::string name() const override;
  bool Prepare(FaultCluster& cluster, int publisher, const std::vector<int>& victims, std::string* error) override;
  // On the victims: long enough for the takeover (membership's 3 s down
  // period, then the claims) to be under the stream too.
  std::chrono::milliseconds StreamDuringFault() const override {
    return std::chrono::milliseconds(options_.on_victims ? 8'000 : 3'000);
  }
  bool Verify(FaultCluster& cluster, const std::vector<int>& nodes, StreamCounters& counters,
              std::string* error) override;

 protected:
  mqtt::PublishPacket MessageFor(const std::string& client) const override;
  void OnAcknowledged(const std::string& client, int64_t sequence) override {
    sessions_[client].ledger.Acknowledged(sequence);
  }
  bool Setup(FaultCluster& cluster, int node, std::string* error) override;
  void BetweenSteps() override;

 private:
  struct Session {
    DeliveryLedger ledger;
    ReceiverState receiver;
    std::unique_ptr<estuary::testing::RawClient> online;  // connected during the stream
  };
  // Resumes `client`'s session on `node` and takes what comes until every
  // acknowledged message has, then `tail` more (or 3 s without anything).
  std::unique_ptr<estuary::testing::RawClient> Resume(FaultCluster& cluster, int node, const std::string& client,
                                                      std::chrono::milliseconds tail, bool* present,
                                                      std::string* error);
  void Drain(Session& session, std::chrono::milliseconds wait);

  SessionWorkloadOptions options_;
  std::map<std::string, Session> sessions_;
};

}  // namespace estuary::server::testing
