#pragma once
// What the fault suite (fault_scenario.h) drives while it injects a fault:
// a Workload publishes a steady stream, one message at a time, and reads
// everything back at the end. The retained-message workload
// (fault_retained_workload.h), the persistent-session QoS 1/2 streams
// (fault_session_workload.h) and the shared group (fault_shared_workload.h)
// implement it on one base, StreamWorkload (fault_stream_workload.h).
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "server/tests/fault_cluster.h"

namespace estuary::server::testing {

// The figures of one case (docs/reliability.md). Counts are messages,
// except where a workload's Verify says otherwise (the retained workload
// counts (node, topic) read-backs).
struct StreamCounters {
  int64_t sent = 0;
  int64_t acknowledged = 0;
  int64_t unacknowledged = 0;  // sent, never acknowledged (gave up, or the connection broke)
  int64_t checked = 0;         // what Verify read back and compared
  int64_t delivered = 0;       // read back as acknowledged (or newer)
  int64_t lost = 0;            // acknowledged, not read back (or an older value instead)
  int64_t duplicated = -1;     // -1: does not apply to the workload
  int64_t longest_unacked_ms = 0;  // longest time publishing went on without any acknowledgement
  std::vector<std::string> losses;  // the first few lost items, described
};

class Workload {
 public:
  enum class Step {
    kAcknowledged,  // the outstanding publish was acknowledged
    kPending,       // still outstanding after the wait
    kBroken,        // the connection broke: the outstanding publish is given up
  };

  virtual ~Workload() = default;
  virtual std::string name() const = 0;
  // Partition keys the stream writes to (ring::Ring::PartitionOf), so the
  // scenario can find their leaders and replicas.
  virtual std::vector<std::string> Keys() const = 0;
  // Limits the stream to these keys (a subset of Keys(), not empty).
  virtual void UseKeys(const std::vector<std::string>& keys) = 0;
  // Connects the publisher (and any subscribers) to `node`; also used to
  // reconnect after kBroken.
  virtual bool Connect(FaultCluster& cluster, int node, std::string* error) = 0;
  // Publishes every key once, waiting for each acknowledgement (opens the
  // partitions before leaders are looked at). False on a timeout.
  virtual bool WarmUp(std::chrono::milliseconds timeout, std::string* error) = 0;
  // Once the victims are chosen, before the stream: e.g. move subscribers
  // to the victims. False (with `error`) if that failed.
  virtual bool Prepare(FaultCluster& /*cluster*/, int /*publisher*/, const std::vector<int>& /*victims*/,
                       std::string* /*error*/) {
    return true;
  }
  // Sends the next message if none is outstanding, then waits up to `wait`
  // for the outstanding one's acknowledgement.
  virtual Step Publish(std::chrono::milliseconds wait) = 0;
  // The fault was just injected (a workload may date its figures by it).
  virtual void OnFault() {}
  // How long the stream runs at least while the fault lasts.
  virtual std::chrono::milliseconds StreamDuringFault() const { return std::chrono::milliseconds(3'000); }
  // What the workload saw worth a note in the figures (e.g. PUBACK reason
  // codes other than success), or "".
  virtual std::string Notes() const { return ""; }
  // Reads everything back on each of `nodes`, filling checked, delivered,
  // lost and duplicated. False (with `error`) if a node never answered.
  virtual bool Verify(FaultCluster& cluster, const std::vector<int>& nodes, StreamCounters& counters,
                      std::string* error) = 0;
};

}  // namespace estuary::server::testing
