#pragma once
// Wire form of the queue frames (docs/internode.md, frames 0x60-0x6F): the
// push-pull between a queue's partition leader and the node that consumes
// the queue (docs/partitions.md "Partitioned queues"; the state machines
// on both ends are queue_flow.h). Pure functions; the decoders read bytes
// from other nodes and refuse anything malformed: a short body, bytes left
// over, a count larger than the bytes left could hold (checked before
// anything is allocated), a node id above 0xFFFF, an unknown reason.
//
// Integers little-endian, `bytes` a u32 length and the bytes
// (base::LittleEndianWriter), as in the partition frames 0x50-0x5F.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster-core/partition/partition_host.h"
#include "cluster-core/partition/queue_machine.h"

namespace estuary::partition {

enum QueueFrameType : uint8_t {
  kQueuePull = 0x60,    // consumer -> leader: bytes queue, u64 epoch, u32 credit
  kQueuePush = 0x61,    // leader -> consumer: bytes queue, u64 epoch, u32 n,
                        // n x {u64 offset, bytes record}
  kQueueAck = 0x62,     // consumer -> leader: bytes queue, u64 epoch, u32 n,
                        // n x u64 offset
  kQueueReject = 0x63,  // either way: bytes queue, u32 node, u8 reason
};

// 0x60: the consumer grants `credit` more messages of `queue` (queue_flow.h:
// credit is incremental, every pushed message spends one).
struct QueuePullFrame {
  std::string queue;
  uint64_t epoch = 0;
  uint32_t credit = 0;
  friend bool operator==(const QueuePullFrame&, const QueuePullFrame&) = default;
};

// 0x61: messages of `queue` with their offsets, in the order read.
struct QueuePushFrame {
  std::string queue;
  uint64_t epoch = 0;
  std::vector<QueuedMessage> messages;
  friend bool operator==(const QueuePushFrame&, const QueuePushFrame&) = default;
};

// 0x62: offsets the consumer's clients acknowledged.
struct QueueAckFrame {
  std::string queue;
  uint64_t epoch = 0;
  std::vector<uint64_t> offsets;
  friend bool operator==(const QueueAckFrame&, const QueueAckFrame&) = default;
};

enum class QueueRejectReason : uint8_t {
  // To a pull or ack: this node does not lead the queue's partition; `node`
  // is the leader it knows (0: unknown).
  kNotLeader = 0,
  // To a pull from a node or at an epoch that is not the queue's consumer
  // now; `node` is the consumer recorded (0: nobody).
  kStaleEpoch = 1,
  // To a push: this node does not consume the queue (any more); `node` is
  // 0. The leader stops pushing to it.
  kNotConsumer = 2,
};
inline constexpr uint8_t kMaxQueueRejectReason = 2;

// 0x63: the receiver refuses what the sender asked of it for `queue`.
struct QueueRejectFrame {
  std::string queue;
  NodeId node = 0;
  QueueRejectReason reason = QueueRejectReason::kNotLeader;
  friend bool operator==(const QueueRejectFrame&, const QueueRejectFrame&) = default;
};

// Every body has exactly one encoding, so a decoded frame encodes back to
// the same bytes.
std::string Encode(const QueuePullFrame& frame);
std::string Encode(const QueuePushFrame& frame);
std::string Encode(const QueueAckFrame& frame);
std::string Encode(const QueueRejectFrame& frame);
std::optional<QueuePullFrame> DecodeQueuePull(std::string_view body);
std::optional<QueuePushFrame> DecodeQueuePush(std::string_view body);
std::optional<QueueAckFrame> DecodeQueueAck(std::string_view body);
std::optional<QueueRejectFrame> DecodeQueueReject(std::string_view body);

}  // namespace estuary::partition
