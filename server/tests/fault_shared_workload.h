#pragma once
// The shared-group workload of the fault suite (issue 7 points 5 and 7):
// `members` MQTT 5 clients (fault-g0, ...) with persistent sessions (an
// hour's expiry) subscribe at QoS 1 or 2 to $share/fault/fault/g, one per
// node at first; one raw client publishes messages ("s42") to fault/g at
// the same QoS.
// Prepare puts a member on each victim (then on the publisher's node, then
// the others), so the fault takes a member with it. Members stay connected
// and read and acknowledge between publish steps. Verify resumes every
// member whose connection is gone (or whose node is not among `nodes`) on
// the first node given, takes what comes, and counts each acknowledged
// message once: delivered if some member had it, lost if none did,
// duplicated for every delivery beyond the first, to any member, in this
// Verify or a later one. Keys() are the members' client ids (the
// partitions of their sessions).
#include <memory>
#include <string>
#include <vector>

#include "server/tests/fault_stream_workload.h"

namespace estuary::server::testing {

class SharedGroupWorkload final : public StreamWorkload {
 public:
  // `qos` 1 or 2: the publishes' and the members' subscription's.
  explicit SharedGroupWorkload(int members, uint8_t qos = 1);

  std::string name() const override { return "shared group QoS " + std::to_string(qos()); }
  // The stream has one topic: the keys only name the members' partitions.
  void UseKeys(const std::vector<std::string>& /*keys*/) override {}
  bool Prepare(FaultCluster& cluster, int publisher, const std::vector<int>& victims, std::string* error) override;
  // Long enough for the takeover of the victim member's session to be
  // under the stream too.
  std::chrono::milliseconds StreamDuringFault() const override { return std::chrono::milliseconds(8'000); }
  bool Verify(FaultCluster& cluster, const std::vector<int>& nodes, StreamCounters& counters,
              std::string* error) override;

 protected:
  mqtt::PublishPacket MessageFor(const std::string& key) const override;
  void OnAcknowledged(const std::string& /*key*/, int64_t sequence) override { ledger_.Acknowledged(sequence); }
  bool Setup(FaultCluster& cluster, int node, std::string* error) override;
  void BetweenSteps() override;

 private:
  struct Member {
    std::string client;
    int node = 0;
    ReceiverState receiver;
    std::unique_ptr<estuary::testing::RawClient> online;
  };
  // Connects `member` to `node` (its session resumed, subscribed once).
  bool Join(FaultCluster& cluster, Member& member, int node, bool subscribe, std::string* error);
  // Takes what the connected members have; true if anything came.
  bool DrainAll(std::chrono::milliseconds wait);

  std::vector<Member> members_;
  DeliveryLedger ledger_;
};

}  // namespace estuary::server::testing
