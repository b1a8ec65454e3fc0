#pragma once
// Per-shard counters. Written only by the owning shard (relaxed atomics),
// read by the admin listener and the $SYS publisher from any thread.
#include <atomic>
#include <cstdint>

namespace estuary::core {

struct ShardMetrics {
  std::atomic<uint64_t> connections{0};         // open network connections
  std::atomic<uint64_t> connections_total{0};   // accepted since start
  std::atomic<uint64_t> sessions{0};            // sessions held (online + offline)
  std::atomic<uint64_t> sessions_expired{0};    // offline sessions ended by their expiry interval
  std::atomic<uint64_t> messages_in{0};         // PUBLISH received from clients
  std::atomic<uint64_t> messages_out{0};        // PUBLISH sent to clients
  std::atomic<uint64_t> bytes_in{0};
  std::atomic<uint64_t> bytes_out{0};
  std::atomic<uint64_t> messages_dropped{0};    // queue limits, expiry, too large
  std::atomic<uint64_t> queue_full_dropped{0};         // new messages a full session queue refused (drop-new, reject)
  std::atomic<uint64_t> queue_full_dropped_oldest{0};  // queued messages dropped for newer ones (drop-oldest)
  std::atomic<uint64_t> publishes_rejected_queue_full{0};      // reject: MQTT 5 0x97 and AMQP rejected answers
  std::atomic<uint64_t> publishes_acknowledged_queue_full{0};  // reject: MQTT 3.1.1 publishes acknowledged anyway
  std::atomic<uint64_t> queued_messages{0};     // waiting in session queues
  std::atomic<uint64_t> inflight_messages{0};   // sent, unacknowledged
  std::atomic<uint64_t> subscriptions{0};
  std::atomic<uint64_t> retained_messages{0};
  std::atomic<uint64_t> retained_read_fallbacks{0};  // SUBSCRIBEs answered from this node's copy: partitions unreadable
  std::atomic<uint64_t> forwards_out{0};        // publishes forwarded to other shards/nodes
  std::atomic<uint64_t> protocol_errors{0};     // connections closed for bad input
  std::atomic<uint64_t> publish_throttled{0};   // reading paused for a client's publish budget
  std::atomic<uint64_t> client_id_claims{0};          // MQTT CONNECTs and AMQP durable attaches that asked the cluster for their id
  std::atomic<uint64_t> client_id_claims_refused{0};  // of those, refused: no quorum, or no answer in time
  std::atomic<uint64_t> sessions_adopted{0};          // sessions read from their partition on a CONNECT
  std::atomic<uint64_t> sessions_taken_over{0};       // sessions of a gone node served here until their client returns
  std::atomic<uint64_t> sessions_stale_dropped{0};    // recovered sessions another node owned by then
  std::atomic<uint64_t> shared_redelivered{0};        // a departed shared member's messages sent to another member
  std::atomic<uint64_t> shared_dropped_no_member{0};  // shared-group messages that found no member left
  std::atomic<uint64_t> replayed_delivered{0};          // replayed forwards offered to sessions taken from a gone node
  std::atomic<uint64_t> replayed_duplicates_skipped{0};  // offers a session taken over had been made already
  std::atomic<uint64_t> handed_off_in{0};  // deliveries a session's previous node handed to it here after a move
  std::atomic<uint64_t> moved_stubs{0};             // open now: dropped copies of moved sessions still matching
  std::atomic<uint64_t> moved_stub_deliveries{0};   // deliveries those stubs matched, handed on to the new node

  static void Add(std::atomic<uint64_t>& counter, uint64_t n = 1) {
    counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  static void Sub(std::atomic<uint64_t>& counter, uint64_t n = 1) {
    counter.store(counter.load(std::memory_order_relaxed) - n, std::memory_order_relaxed);
  }
};

}  // namespace estuary::core
