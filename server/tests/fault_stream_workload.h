#pragma once
// The base of the fault suite's workloads (fault_workload.h): one raw MQTT 5
// publisher streaming numbered messages ("s42"), one in flight, cycling over
// the stream's keys, at QoS 1 (acknowledged by the PUBACK) or QoS 2
// (acknowledged by the PUBREC; the PUBREL follows at once and the PUBCOMP is
// not waited for). A workload says what a key's message is (the Send hook,
// MessageFor), hears of each acknowledgement (OnAcknowledged), may serve its
// subscribers between steps (BetweenSteps) and implements Verify.
//
// DeliveryLedger and TakeDelivery serve the workloads that deliver a stream
// to subscribers (sessions, shared groups): what was acknowledged and what
// came, counted into StreamCounters as delivered, lost and duplicated.
// Test support only; one thread.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "conformance/support/raw_client.h"
#include "server/tests/process_support.h"
#include "server/tests/fault_workload.h"

namespace estuary::server::testing {

class StreamWorkload : public Workload {
 public:
  // `publisher_prefix` names the publisher's client ids (a fresh one per
  // connection); `qos` is 1 or 2.
  StreamWorkload(std::vector<std::string> keys, uint8_t qos, std::string publisher_prefix);

  std::vector<std::string> Keys() const override { return all_keys_; }
  void UseKeys(const std::vector<std::string>& keys) override;
  bool Connect(FaultCluster& cluster, int node, std::string* error) override;
  bool WarmUp(std::chrono::milliseconds timeout, std::string* error) override;
  Step Publish(std::chrono::milliseconds wait) override;

  uint8_t qos() const { return qos_; }
  void OnFault() override { fault_at_ = SteadyClock::now(); }
  std::string Notes() const override;

 protected:
  // The Send hook: the message for `key` (topic, retain flag; the base sets
  // payload, QoS and packet id), then what was sent and acknowledged.
  virtual mqtt::PublishPacket MessageFor(const std::string& key) const = 0;
  virtual void OnSent(const std::string& /*key*/, int64_t /*sequence*/) {}
  virtual void OnAcknowledged(const std::string& key, int64_t sequence) = 0;
  // Before the publisher's first connection (e.g. create the subscribers).
  virtual bool Setup(FaultCluster& /*cluster*/, int /*node*/, std::string* /*error*/) { return true; }
  // After each publish step (e.g. read and acknowledge online subscribers).
  virtual void BetweenSteps() {}

  // A QoS 1 publish outside the stream (an end marker), acknowledged.
  bool PublishAcknowledged(mqtt::PublishPacket publish, std::chrono::milliseconds wait);
  int NextConnection() { return ++connections_; }
  // Counts lost messages by when they were acknowledged: before the fault,
  // in its first 5 s (the takeover gap), or later (the Notes).
  void CountLost(const std::vector<int64_t>& sequences);
  // " (acknowledged 1234 ms after the fault)" or "".
  std::string WhenAcknowledged(int64_t sequence) const;

 private:
  struct Outstanding {
    std::string key;
    int64_t sequence = 0;
    uint16_t packet_id = 0;
  };
  void Send(const std::string& key);
  uint16_t NextPacketId() { return packet_id_ = packet_id_ == 65535 ? 1 : packet_id_ + 1; }

  std::vector<std::string> all_keys_;
  std::vector<std::string> keys_;  // the stream's, after UseKeys
  uint8_t qos_;
  std::string publisher_prefix_;
  bool set_up_ = false;
  std::unique_ptr<estuary::testing::RawClient> publisher_;
  std::optional<Outstanding> outstanding_;
  int64_t sequence_ = 0;
  uint16_t packet_id_ = 0;
  size_t next_key_ = 0;
  int connections_ = 0;
  std::map<uint8_t, int64_t> reasons_;  // acknowledgements by reason code, other than success
  std::optional<SteadyClock::time_point> fault_at_;
  std::map<int64_t, int64_t> acked_after_fault_ms_;  // sequence -> ms after the fault
  int64_t lost_before_ = 0, lost_early_ = 0, lost_later_ = 0;
  std::string first_later_;  // the first loss acknowledged 5 s or more after the fault
};

// The sequence number of a stream payload ("s42" -> 42), or -1.
int64_t SequenceOf(const std::string& payload);

// What one subscriber (a session, a group member) keeps across its
// connections: QoS 2 packet ids received and not yet released (a PUBLISH
// resent with one of them is the same message, MQTT 4.3.3).
struct ReceiverState {
  std::set<uint16_t> awaiting_release;
};

// Answers `packet` as an MQTT client does (PUBACK; PUBREC, then PUBCOMP on
// the PUBREL) and returns the sequence number of a newly delivered stream
// message, or nullopt (another packet, or a QoS 2 resend already taken).
std::optional<int64_t> TakeDelivery(estuary::testing::RawClient& client, const mqtt::Packet& packet,
                                    ReceiverState& state);

// A stream of numbered messages to one destination (a session, a group):
// what was acknowledged and what came since the last Tally, and what was
// delivered before.
class DeliveryLedger {
 public:
  void Acknowledged(int64_t sequence) { acknowledged_.insert(sequence); }
  void Delivered(int64_t sequence) { ++seen_[sequence]; }
  bool AllCame() const;
  bool Empty() const { return acknowledged_.empty(); }
  // Counts every acknowledged message once (delivered or lost) and every
  // delivery beyond the first, in this period or after an earlier one
  // (duplicated); then starts a new period. `describe` names a loss.
  // Returns the lost sequences.
  std::vector<int64_t> Tally(StreamCounters& counters, const std::function<std::string(int64_t)>& describe);

 private:
  std::set<int64_t> acknowledged_;  // since the last Tally
  std::map<int64_t, int> seen_;     // since the last Tally
  std::set<int64_t> verified_;      // delivered before the last Tally
};

}  // namespace estuary::server::testing
