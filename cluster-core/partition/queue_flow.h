#pragma once
// The credit state machines of a partitioned queue's push-pull (docs/
// partitions.md "Partitioned queues"; frames 0x60-0x63, queue_frames.h).
// A queue's partition leader pushes the queue's messages to the node that
// consumes it, within credit that node grants; the consumer node's acks
// remove them (QueueMachine's Ack). Both machines are pure: no IO, no clock
// (time is an argument), so an event loop drives them with what arrives and
// sends what they return (the agent: cluster/cluster_queues.cc).
//
// Credit is incremental: a pull grants n more messages, and every message
// in a push spends one, a redelivered one too. The leader and the consumer
// count the same way, so over one link (frames arrive in order, none lost
// while the link is up) both know the same credit; when the link or the
// leader changes, both reset theirs to 0 and the consumer grants afresh.
//
// Delivery is at least once. Whatever was pushed and not acknowledged is
// pushed again after a Reset, a consumer change or the redelivery timeout,
// so a client may see a duplicate at QoS 1 (the consumer drops those it
// still holds or acked recently); nothing acknowledged to a publisher is
// ever skipped.
//
// Threading: whoever owns them (the partition leader's loop for a pusher,
// the consumer node's loop for a puller).
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "cluster-core/partition/partition_host.h"
#include "cluster-core/partition/queue_machine.h"

namespace estuary::partition {

struct QueuePusherLimits {
  // Pushed and not yet acknowledged, whatever the credit: bounds the
  // leader's memory against a consumer that grants without acking.
  uint32_t max_in_flight = 1024;
  uint32_t max_read_count = 256;  // per Read query
  uint32_t max_read_bytes = 4u << 20;
  // A push not acknowledged this long is pushed again (the consumer lost
  // it, or its client is slow: then the consumer drops the duplicate).
  int64_t redeliver_after_ms = 30'000;
};

// A Read query to issue on the leader's machine: EncodeQueueRead(queue,
// from, max_count, max_bytes); its answer goes to OnRead with the token.
struct QueueReadRequest {
  uint64_t from = 0;
  uint32_t max_count = 0;
  uint32_t max_bytes = 0;
  uint64_t token = 0;
  friend bool operator==(const QueueReadRequest&, const QueueReadRequest&) = default;
};

// The leader side, one per queue (whose partition this node leads). Keeps
// the consumer node and epoch, the credit it granted, the offsets in
// flight (pushed, not acknowledged), and the read cursor; nothing of it is
// replicated. A node that gains leadership starts a fresh pusher: its
// cursor 0 reads from the first unacknowledged message, since acks remove
// messages from the machine.
//
// Loop: Grant on a pull; OnAppended when an Append to the queue applies;
// while NextRead gives a request, query the machine and pass the answer to
// OnRead, which returns the messages to push now (one push frame); OnAck
// when an Ack applies (or an ack frame arrives: either, both, in any order,
// repeated); Tick at NextDeadline.
class QueuePusher {
 public:
  QueuePusher(NodeId consumer, uint64_t epoch, QueuePusherLimits limits = {});

  // A pull: `from` granted `credit` more messages (the total saturates at
  // 2^32-1). False, and nothing granted, unless `from` is the consumer and
  // `epoch` its epoch: answer the pull with a kStaleEpoch reject then.
  bool Grant(NodeId from, uint64_t epoch, uint32_t credit);
  // An Append to the queue applied at `offset`: there is more to read.
  void OnAppended(uint64_t offset);
  // The read to issue now, or nothing: no credit, a read outstanding, the
  // in-flight bound reached with nothing to push again, or caught up.
  std::optional<QueueReadRequest> NextRead();
  // The answer to the read `token` (an older token is ignored, as is
  // everything after a Reset): the messages to push now, in offset order,
  // each spending one credit; `now_ms` starts their redelivery clocks.
  std::vector<QueuedMessage> OnRead(uint64_t token, const QueueReadResult& result, int64_t now_ms);
  // The read failed (not leader any more, timeout): it may be issued again.
  void OnReadFailed(uint64_t token);
  // Acknowledged offsets leave the flight; unknown and repeated ones are
  // ignored. Returns how many were in flight.
  size_t OnAck(const std::vector<uint64_t>& offsets);
  // Handed messages became readable again (QueueMachine's Unhand or
  // Settle): pushed again once credit allows, whatever was pushed before.
  void OnReleased(const std::vector<uint64_t>& offsets);
  // Pushes older than redeliver_after_ms at `now_ms` are due again.
  void Tick(int64_t now_ms);
  // When Tick next has something to do, if ever.
  std::optional<int64_t> NextDeadline() const;
  // The link to the consumer went down and up: credit 0, and everything
  // unacknowledged is pushed again (from the first unacknowledged offset)
  // once the consumer grants.
  void Reset();
  // Assign applied: a new consumer starts with no credit and is pushed
  // everything unacknowledged; the same node at a new epoch keeps its state.
  void OnConsumerChanged(NodeId consumer, uint64_t epoch);

  NodeId consumer() const { return consumer_; }
  uint64_t epoch() const { return epoch_; }
  uint32_t credit() const { return credit_; }
  size_t in_flight() const { return in_flight_.size(); }
  uint64_t cursor() const { return cursor_; }
  uint64_t pushed() const { return pushed_; }        // messages pushed, all told
  uint64_t repushed() const { return repushed_; }    // of which pushed again

 private:
  struct Flight {
    int64_t pushed_at_ms = 0;
    bool again = false;  // to be pushed again (Reset, consumer change, timeout)
  };
  enum class Verdict { kPush, kSkip, kStop };

  Verdict Judge(uint64_t offset) const;
  // Drops what cannot come back in [from, to): flights no longer in the
  // machine (their ack applied, or they expired) and acks ahead.
  void Forget(uint64_t from, uint64_t to, const std::set<uint64_t>& seen);

  NodeId consumer_;
  uint64_t epoch_;
  QueuePusherLimits limits_;
  uint32_t credit_ = 0;
  std::map<uint64_t, Flight> in_flight_;
  size_t again_ = 0;          // flights marked again
  uint64_t cursor_ = 0;       // the next read starts here
  uint64_t pushed_high_ = 0;  // past the highest offset ever pushed
  std::optional<uint64_t> known_next_;  // the queue's next offset, as last learned
  // Acks for offsets not yet pushed by this pusher (pushed by a former
  // leader): skipped if a read still returns them. At most max_in_flight.
  std::set<uint64_t> acked_ahead_;
  std::optional<QueueReadRequest> reading_;
  uint64_t next_token_ = 1;
  uint64_t pushed_ = 0;
  uint64_t repushed_ = 0;
};

struct QueuePullerLimits {
  // Messages held (received, not acknowledged by the members' clients)
  // plus credit granted and not yet used never exceed the window.
  uint32_t window = 256;
  // Grant again (up to the window) once held plus unused credit fall to this.
  uint32_t low_water = 64;
  uint32_t max_ack_batch = 1024;
  // Acknowledged offsets remembered to recognise a late duplicate.
  uint32_t remember_acked = 4096;
};

// The consumer side, one per queue this node consumes. Tracks the credit it
// granted against the messages received and still held by its members,
// decides when to grant more, drops duplicates, and batches acks.
//
// Loop: TakeGrant -> a pull frame when non-zero; OnPush with a push frame's
// messages -> deliver the returned ones to members; Acked when a member's
// client acknowledges one (or it is given up: expired, no member left to
// take it); TakeAcks -> an ack frame when non-empty; Reset when the
// queue's leader or the link changes.
class QueuePuller {
 public:
  explicit QueuePuller(uint64_t epoch, QueuePullerLimits limits = {});

  // The credit to grant now, 0 for none (it is counted as granted).
  uint32_t TakeGrant();
  // The messages of a push to hand to members: the new ones, in order.
  // Duplicates of held messages are dropped; duplicates of acknowledged
  // ones are dropped and acknowledged again (the first ack may have gone to
  // a leader that died before applying it). A message beyond the window
  // (a leader pushing past its credit) is dropped; it comes back later.
  std::vector<QueuedMessage> OnPush(const std::vector<QueuedMessage>& messages);
  // A held message was acknowledged; false if it was not held.
  bool Acked(uint64_t offset);
  // A held message this node may not deliver (another consumer's member
  // holds it, or it left the queue): forgotten without an ack, so a later
  // push of it is new. False if it was not held.
  bool Forget(uint64_t offset) { return held_.erase(offset) != 0; }
  // The acks to send now, oldest first, at most max_ack_batch.
  std::vector<uint64_t> TakeAcks();
  // A new leader (or link): the credit it had is gone. Held messages stay
  // held (members have them) and pending acks are still sent: acks apply
  // whatever their epoch.
  void Reset(uint64_t epoch);
  // The members' capacity changed (they came, went, or their queues'
  // bounds did); takes effect at the next TakeGrant.
  void SetWindow(uint32_t window, uint32_t low_water);

  uint64_t epoch() const { return epoch_; }
  size_t held() const { return held_.size(); }
  uint32_t unused_credit() const { return unused_credit_; }
  bool has_acks() const { return !pending_acks_.empty(); }
  uint64_t duplicates() const { return duplicates_; }
  uint64_t over_credit() const { return over_credit_; }  // received with no credit left
  uint64_t overflowed() const { return overflowed_; }    // dropped beyond the window

 private:
  void Remember(uint64_t offset);

  uint64_t epoch_;
  QueuePullerLimits limits_;
  uint32_t unused_credit_ = 0;
  std::set<uint64_t> held_;
  std::deque<uint64_t> pending_acks_;
  std::set<uint64_t> pending_set_;
  std::deque<uint64_t> acked_order_;  // recently acked, oldest first
  std::set<uint64_t> acked_;
  uint64_t duplicates_ = 0;
  uint64_t over_credit_ = 0;
  uint64_t overflowed_ = 0;
};

}  // namespace estuary::partition
