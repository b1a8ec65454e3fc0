#pragma once
// QueueMachine: the replicated message queues whose names hash to one
// partition (issue 7 points 2, 4 and 5; docs/partitions.md "Partitioned
// queues"). A queue named N lives in PartitionOf(QueueKey(N)); a shared
// group's backlog is meant to be spread over K such queues ("<G>/<k>"), so
// it is replicated and survives any minority of nodes. A publish goes into
// a queue by Append and may be acknowledged to its publisher once the
// Append has committed; the queue's consumer acknowledges deliveries by
// Ack, which removes them.
//
// Each queue is an ordered log of messages (the node store's own message
// record, store/record_codec.h), each under an offset. Offsets come from
// one counter of the partition, so they strictly increase within a queue
// and are never handed out twice, not after an ack, a Drop and a queue of
// the same name appearing again, nor a snapshot restore: a retried Ack can
// only ever remove the message it was meant for. A queue appears on its
// first accepted Append or Assign.
//
// Bounded memory: at most `max_messages` messages and `max_bytes` record
// bytes per queue; an Append beyond either is answered "full" (the caller
// applies backpressure or refuses the publish), a record larger than
// `max_bytes` always. "Now" for expiry is the entry's HLC time (as
// RetainedMachine): a message already expired when appended is not kept,
// the others are dropped by a sweep every kSweepEveryMs of entry time (and
// from a queue found full), the same on every replica; Read never serves
// one past its expiry at the leader's wall clock, swept or not.
//
// Consumers: Assign records which node consumes a queue, under an epoch
// that only grows (the group's assignment is decided elsewhere and
// retried; an older decision arriving late must not undo a newer one).
// Acks carry the sender's epoch but are applied whatever it is: an ack
// from a consumer that lost the queue is still the fact that its client
// received the message. Refusing it could not prevent a loss (nothing is
// lost by removing a delivered message), it could only make the new
// consumer deliver the message again. A stale ack is counted.
//
// Commands (one byte tag, then the body; tags 0x40-0x4F, see
// PartitionState; u32/u64 little-endian, bytes = u32 length + bytes, as
// base::LittleEndianWriter writes them):
//   0x40 Append: bytes queue, bytes message record. Result: u64 offset
//        (8 bytes), or the 4 bytes "full".
//   0x41 Ack: bytes queue, u64 epoch, u32 n, n x u64 offset. Result: u32
//        how many were removed (unknown or already acked offsets are
//        ignored: acks are retried).
//   0x42 Assign: bytes queue, u32 consumer node (0: nobody), u64 epoch.
//        Result "1" if epoch > the queue's epoch (then recorded), else "0".
//   0x43 Drop: bytes queue. Removes the queue, its messages and consumer.
//        Result "1" if it existed, else "0".
//   0x44 Hand: bytes queue, u64 offset, bytes session, u32 node, u64
//        incarnation, u64 token. Records that the consumer `node` (in the
//        process `incarnation`, its attempt `token`) is putting the message
//        into the member session `session`: a handed message is not read
//        (so not pushed to any consumer) until it is acknowledged, handed
//        back or settled. Result "1" if recorded: the message is live and
//        not handed, or handed exactly so already (the same command applied
//        again); else "0" (gone, or handed by another attempt).
//   0x45 Unhand: the same body. The put failed (the session went): the
//        message is readable again if it was handed exactly so. Result "1"
//        if it was, else "0".
//   0x46 Settle: bytes queue, bytes session, u32 node, u64 incarnation, u32
//        n, n x {u32 node, u64 timestamp, u32 sequence} message ids. The
//        session arrived on `node` (taken over, moved, or its restart
//        confirmed) holding the messages with those ids: each message
//        handed to it by any other consumer (another node or an earlier
//        incarnation) is removed if the session holds it, handed back
//        otherwise. Result: u32 removed, u32 handed back.
// A malformed command changes nothing, is counted and answered "0".
// Queries:
//   0x40 Read: bytes queue, u64 from, u32 max count, u32 max bytes.
//        Result: u64 the queue's next offset (past its last append; 0 for
//        an unknown queue), u32 n, n x {u64 offset, bytes record}: the live
//        messages with offset >= from in order, at most max count, at most
//        max bytes of records but at least one if max count > 0.
//   0x41 Stats: nothing. Result: u32 n, n x {bytes name, u64 depth, u64
//        bytes, u64 first offset (the next offset if empty), u64 next
//        offset, u32 consumer node, u64 epoch}, in name order.
// A malformed query is answered with nothing (the decoders refuse it).
//
// Hands exist for exactly-once delivery to a shared group's members across
// a consumer's death (docs/cluster.md, "Partitioned shared groups"): the
// consumer hands an offset to a durable member session before putting it
// there and acknowledges it after; whoever takes the session over settles
// what was handed to it, so the message is either in that session or in
// the queue, never both.
//
// Snapshot: u8 version 1, u64 next offset, u64 last sweep ms, u32 n queues,
// n x {bytes name, u64 next offset, u32 consumer, u64 epoch, u32 m, m x
// {u64 offset, bytes record}}. Version 2 (written only while a message is
// handed, so a node of an older binary reads the others) adds after each
// record u8 handed (0/1) and, if 1, bytes session, u32 node, u64
// incarnation, u64 token.
//
// Threading: the partition's (the RaftHost's loop), like every machine.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cluster-core/partition/partition_host.h"
#include "model/message.h"

namespace estuary::partition {

// The key a queue hashes by (DESIGN.md's keyspace).
inline std::string QueueKey(std::string_view queue) { return "queue/" + std::string(queue); }

struct QueueLimits {
  uint64_t max_messages = 100'000;
  uint64_t max_bytes = uint64_t{64} << 20;
};

struct QueueAppendResult {
  bool full = false;
  uint64_t offset = 0;  // when not full
  friend bool operator==(const QueueAppendResult&, const QueueAppendResult&) = default;
};

struct QueuedMessage {
  uint64_t offset = 0;
  std::string record;  // record_codec EncodeMessage bytes
  friend bool operator==(const QueuedMessage&, const QueuedMessage&) = default;
};

struct QueueReadResult {
  uint64_t next_offset = 0;
  std::vector<QueuedMessage> messages;
};

struct QueueStats {
  std::string name;
  uint64_t depth = 0;
  uint64_t bytes = 0;
  uint64_t first_offset = 0;
  uint64_t next_offset = 0;
  NodeId consumer = 0;
  uint64_t epoch = 0;
  friend bool operator==(const QueueStats&, const QueueStats&) = default;
};

std::string EncodeQueueAppend(std::string_view queue, const Message& message);
std::string EncodeQueueAck(std::string_view queue, uint64_t epoch, const std::vector<uint64_t>& offsets);
std::string EncodeQueueAssign(std::string_view queue, NodeId consumer, uint64_t epoch);
std::string EncodeQueueDrop(std::string_view queue);
// Who a message is handed to: a member session, by one attempt (`token`,
// unique within the process) of a consumer node's process.
struct QueueHand {
  std::string session;
  NodeId node = 0;
  uint64_t incarnation = 0;
  uint64_t token = 0;  // ignored in a Settle's `keep`
  friend bool operator==(const QueueHand&, const QueueHand&) = default;
};
std::string EncodeQueueHand(std::string_view queue, uint64_t offset, const QueueHand& hand);
std::string EncodeQueueUnhand(std::string_view queue, uint64_t offset, const QueueHand& hand);
// `keep`: the hands of this node and incarnation are left alone (its own,
// made after the session arrived); `held`: the ids of the messages the
// session holds.
std::string EncodeQueueSettle(std::string_view queue, const QueueHand& keep, const std::vector<MessageId>& held);
struct QueueSettleResult {
  uint32_t removed = 0;
  uint32_t handed_back = 0;
  friend bool operator==(const QueueSettleResult&, const QueueSettleResult&) = default;
};
std::optional<QueueSettleResult> DecodeQueueSettleResult(std::string_view bytes);
std::string EncodeQueueRead(std::string_view queue, uint64_t from, uint32_t max_count, uint32_t max_bytes);
std::string EncodeQueueStats();
// Each nullopt if the bytes are malformed (the machine answers "0" to a
// malformed command).
std::optional<QueueAppendResult> DecodeQueueAppendResult(std::string_view bytes);
std::optional<uint32_t> DecodeQueueAckResult(std::string_view bytes);
std::optional<QueueReadResult> DecodeQueueReadResult(std::string_view bytes);
std::optional<std::vector<QueueStats>> DecodeQueueStats(std::string_view bytes);

// What a replica applied, for the node that pushes a queue to its consumer
// (its partition's leader; queue_flow.h QueuePusher): called inside Apply,
// on every replica, so a hook must be cheap and must not call back into the
// partition (defer the work).
struct QueueApplyHooks {
  // A message was stored at `offset` (not called for one expired on arrival).
  std::function<void(std::string_view queue, uint64_t offset)> appended;
  // An Ack of a known queue applied with these offsets (those already gone
  // included).
  std::function<void(std::string_view queue, const std::vector<uint64_t>& offsets)> acked;
  // Handed messages became readable again (Unhand, Settle): to be pushed.
  std::function<void(std::string_view queue, const std::vector<uint64_t>& offsets)> released;
};

class QueueMachine final : public PartitionMachine {
 public:
  // How often (in entry time) expired messages are swept.
  static constexpr uint64_t kSweepEveryMs = 60'000;

  // `wall_ms` gives the leader's wall clock for read-time expiry.
  explicit QueueMachine(std::function<int64_t()> wall_ms, QueueLimits limits = {});

  std::string Apply(const raft::Entry& entry) override;
  std::vector<uint8_t> Snapshot() const override;
  bool Restore(const std::vector<uint8_t>& data) override;
  std::string Query(std::string_view query) const override;

  std::vector<QueueStats> Stats() const;
  void set_hooks(QueueApplyHooks hooks) { hooks_ = std::move(hooks); }
  // No command was ever applied (nor restored): the state of a fresh machine.
  bool pristine() const { return queues_.empty() && next_offset_ == 0 && last_sweep_ms_ == 0; }
  uint64_t next_offset() const { return next_offset_; }
  uint64_t malformed() const { return malformed_; }
  uint64_t stale_acks() const { return stale_acks_; }
  uint64_t expired() const { return expired_; }
  uint64_t handed() const;  // messages handed now, all queues

 private:
  struct Stored {
    std::string record;
    std::optional<int64_t> expiry_at_ms;
    std::optional<QueueHand> hand;
  };
  struct Queue {
    std::map<uint64_t, Stored> messages;  // by offset
    uint64_t bytes = 0;                   // record bytes held
    uint64_t expiring = 0;                // messages with an expiry (the sweep skips queues without)
    uint64_t next_offset = 0;             // past the last append
    NodeId consumer = 0;
    uint64_t epoch = 0;
  };

  std::string ApplyAppend(std::string_view body, int64_t entry_ms);
  std::string ApplyAck(std::string_view body);
  std::string ApplyAssign(std::string_view body);
  std::string ApplyDrop(std::string_view body);
  std::string ApplyHand(std::string_view body, bool hand);
  std::string ApplySettle(std::string_view body);
  std::string Malformed();
  std::string QueryRead(std::string_view body) const;
  // Drops the queue's messages expired at `now_ms`.
  void Sweep(Queue& queue, int64_t now_ms);
  static void Remove(Queue& queue, std::map<uint64_t, Stored>::iterator it);

  std::function<int64_t()> wall_ms_;
  QueueLimits limits_;
  QueueApplyHooks hooks_;
  std::map<std::string, Queue, std::less<>> queues_;
  uint64_t next_offset_ = 0;    // the partition's offset counter
  uint64_t last_sweep_ms_ = 0;  // entry time of the last sweep
  uint64_t malformed_ = 0;
  uint64_t stale_acks_ = 0;
  uint64_t expired_ = 0;
};

}  // namespace estuary::partition
