#pragma once
// The silent-partition suite's workload (issue 29): `sessions` MQTT 5
// persistent sessions (expiry 1 h) connected to one node and reading at
// the stream's QoS, each on its own topic (part/s0, ...), and one publisher
// per publishing node streaming at a steady rate with a window of
// publishes in flight, cycling over the sessions' topics. Every client has
// its own thread and raw socket (conformance/support/raw_client.h).
//
// A subscriber whose connection ends reconnects (clean start 0): first to
// its node, then to the others in turn, as a client behind a balancer
// would. Every such end is recorded (when, on which node, the DISCONNECT
// reason if one came) so the test can tell a session taken away from a
// node on the majority side. A publisher whose connection ends gives up
// what it had in flight (never acknowledged, so never counted as lost) and
// reconnects to its own node.
//
// Counting: a message is acknowledged by its PUBACK (QoS 1) or PUBREC
// (QoS 2) with a reason below 0x80; lost = acknowledged and never
// delivered to its session; duplicated = delivered more than once (a QoS 2
// resend of a packet id not yet released is the same delivery, MQTT 4.3.3).
// Test support only.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "server/tests/lab_cluster.h"

namespace estuary::server::testing {

using SteadyTime = std::chrono::steady_clock::time_point;

struct PartitionWorkloadOptions {
  int sessions = 10;
  int subscriber_node = 3;
  std::vector<int> publisher_nodes = {1, 2};
  uint8_t qos = 1;
  int rate = 250;    // publishes per second per publisher
  int window = 32;   // in flight per publisher
};

// One subscriber connection's end.
struct SessionEnd {
  int session = 0;
  int node = 0;
  int64_t at_ms = 0;   // since the workload started
  int reason = -1;     // the DISCONNECT's reason code; -1: the socket just closed
};

struct PublisherFigures {
  int node = 0;
  int64_t sent = 0;
  int64_t acknowledged = 0;
  int64_t refused = 0;  // acknowledged with a reason >= 0x80
  int64_t outstanding = 0;  // sent on the current connection, not acknowledged yet
  int64_t late = 0;  // acknowledged after the ledger was closed (not counted above)
  std::vector<int64_t> ack_times_ms;  // every acknowledgement, ms since start
};

struct WorkloadResult {
  int64_t acknowledged = 0;
  int64_t delivered = 0;
  int64_t lost = 0;
  int64_t duplicated = 0;
  std::vector<std::string> losses;  // the first few, described
  std::vector<std::string> duplicates;  // the first few delivered more than once, described
  std::vector<PublisherFigures> publishers;
  std::vector<SessionEnd> ends;
  int sessions_not_present = 0;  // reconnects that found no session (it was lost)
};

class PartitionWorkload {
 public:
  PartitionWorkload(LabCluster& cluster, PartitionWorkloadOptions options);
  ~PartitionWorkload();  // stops every thread

  // Creates the sessions (subscribed, connected) and connects the
  // publishers; false with `error` if that did not work.
  bool Start(std::string* error);
  // Stops publishing (subscribers keep reading).
  void StopPublishing();
  // Waits (up to `timeout` for each step) until no publisher waits for an
  // acknowledgement, closes the ledger (an acknowledgement after it is
  // counted as late, not as acknowledged: the last check cannot miss it),
  // then until every acknowledged message came. False if one did not.
  bool WaitDelivered(std::chrono::milliseconds timeout);
  // Stops everything and counts.
  WorkloadResult Finish();
  int64_t NowMs() const;
  int64_t acknowledged() const;

 private:
  struct Session;
  struct Publisher;
  void RunSubscriber(Session& session);
  void RunPublisher(Publisher& publisher);
  bool Resume(Session& session, bool first, std::string* error);

  LabCluster& cluster_;
  PartitionWorkloadOptions options_;
  SteadyTime started_;
  std::atomic<bool> stop_all_{false};
  std::atomic<bool> stop_publishing_{false};
  mutable std::mutex mutex_;  // the ledgers and figures below
  bool ledger_closed_ = false;
  std::vector<std::unique_ptr<Session>> sessions_;
  std::vector<std::unique_ptr<Publisher>> publishers_;
  std::vector<SessionEnd> ends_;
  int sessions_not_present_ = 0;
  std::vector<std::thread> threads_;
};

}  // namespace estuary::server::testing
