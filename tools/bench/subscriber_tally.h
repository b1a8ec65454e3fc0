#pragma once
// SubscriberTally: what one subscriber received. Reads the header each
// publisher put in the payload, records end-to-end latency (arrival minus
// send time, both CLOCK_MONOTONIC of this process) and tracks every
// publisher's sequence numbers for duplicates, reordering and loss.
//
// Owned by a Worker, on the worker's loop thread.
#include <cstdint>
#include <string_view>
#include <vector>

#include "tools/bench/live_counters.h"
#include "tools/bench/sequence_tracker.h"
#include "tools/bench/stats.h"

namespace estuary::bench {

class SubscriberTally {
 public:
  SubscriberTally(uint32_t index, uint32_t run_id, uint32_t publishers, WorkerResult& result,
                  LiveCounters& live);

  void OnMessage(std::string_view payload, int64_t arrival_ns);
  SubscriberResult Result() const;

 private:
  uint32_t index_;
  uint32_t run_id_;
  WorkerResult& result_;
  LiveCounters& live_;
  std::vector<SequenceTracker> by_publisher_;
};

}  // namespace estuary::bench
