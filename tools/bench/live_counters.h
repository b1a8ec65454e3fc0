#pragma once
// Figures a worker thread shares while it runs: written by the worker's
// loop thread (relaxed atomics), read by the coordinator thread for the
// progress line and to know when publishing and draining are over. The
// exact end-of-run figures are in WorkerResult instead.
#include <atomic>
#include <cstdint>

namespace estuary::bench {

struct LiveCounters {
  std::atomic<uint64_t> sent{0};
  std::atomic<uint64_t> received{0};
  std::atomic<uint64_t> unique_received{0};
  std::atomic<uint64_t> expected{0};  // deliveries owed to subscribers for what was sent
  std::atomic<uint64_t> inflight{0};  // QoS 1/2 publishes not yet acknowledged
  std::atomic<bool> sending_done{false};  // every publisher of the worker stopped sending
};

}  // namespace estuary::bench
