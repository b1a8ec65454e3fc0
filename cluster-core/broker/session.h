#pragma once
// Session: the protocol-neutral state of one client's session on the shard
// that owns its client id. It outlives connections (persistent sessions):
// subscriptions, the queue of deliveries waiting to be sent, deliveries in
// flight (sent, not yet acknowledged) and the inbound exactly-once state.
//
// A connection attaches as the session's SessionSink; the session tells it
// when deliveries are waiting and the connection pulls them within its flow
// control window. Owned by ShardBroker; touched only by its shard's thread.
//
// Durability: with a store (a node with a data dir) a session whose expiry
// interval is above 0 is durable, and every change made through the methods
// below (not through the raw accessors) is written to the store: the record
// (expiry, will, disconnect time), QoS 1/2 queue entries, in-flight
// deliveries and inbound QoS 2 ids. Subscriptions are written by ShardBroker.
//
// Outbound QoS 1/2 on a durable session (sync before send, docs/storage.md):
// while a connection is attached, a queued QoS 1/2 delivery is *staged*
// before the connection may take it: it gets its packet id and send order
// and its in-flight record replaces its queue record in the store, and
// HasQueued() reports the queue head only once that write is durable. So a
// PUBLISH never reaches the wire before the record that makes a restarted
// node resend it with the same packet id. Many are staged at once (see
// set_send_window; one batch, one fdatasync, for all of them). Frontends
// take a staged delivery as before: PopQueued(), and NextPacketId() called
// just before or just after it returns the staged id; AddInflight() with
// that id claims it without another write. A staged delivery popped and not
// claimed (expired, too large, sent presettled) has its record deleted at
// the next HasQueued() or PopQueued().
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "cluster-core/broker/authorizer.h"
#include "cluster-core/broker/flow_control.h"
#include "cluster-core/broker/limits.h"
#include "model/message.h"

namespace estuary::core {

namespace store {
class ShardStore;
}

// MQTT 5.0 section 3.8.3.1, Retain Handling: when a subscription gets the
// retained messages that match it (the values are the wire's and the
// stored subscription record's).
enum class RetainHandling : uint8_t {
  kSendOnSubscribe = 0,
  kSendIfNew = 1,  // only if the subscription did not exist
  kNever = 2,
};

// What ShardBroker::Subscribe did: a new subscription, or new options for
// one the session had (MQTT 5.0 section 3.8.4: a SUBSCRIBE to a filter it
// holds replaces it; retain handling 1 tells the two apart).
enum class SubscribeOutcome : uint8_t { kAdded, kReplaced };
// What ShardBroker::Unsubscribe did (UNSUBACK 0x00 or 0x11, No
// subscription existed).
enum class UnsubscribeOutcome : uint8_t { kRemoved, kNotSubscribed };

struct SubscriptionOptions {
  QoS max_qos = QoS::kAtMostOnce;
  bool no_local = false;
  bool retain_as_published = false;
  RetainHandling retain_handling = RetainHandling::kSendOnSubscribe;
  uint32_t subscription_id = 0;  // 0 = none
  friend bool operator==(const SubscriptionOptions&, const SubscriptionOptions&) = default;
};

// One message bound for one session.
struct Delivery {
  MessagePtr message;
  QoS qos = QoS::kAtMostOnce;  // min(published QoS, granted QoS)
  bool retain = false;         // the retain flag as delivered
  std::vector<uint32_t> subscription_ids;
  uint64_t store_seq = 0;  // its queue key when stored (durable sessions), else 0
  // Made through a shared subscription: SharedKey(group, filter); null for
  // a plain one. Stored in the q/f records (record_codec.h); after a
  // restore it is the group's key_ref (ShardBroker::TagSharedDeliveries),
  // and records from before it was stored are tagged from the subscriptions.
  std::shared_ptr<const std::string> shared_key = nullptr;
  // A partitioned group's QoS 2 message handed to this session: not sent
  // (nor anything queued behind it) until the queue's Ack of it commits
  // (Session::ReleaseHanded; docs/cluster.md "Partitioned shared groups").
  // Not stored: a restored delivery is sent as usual.
  bool hand_pending = false;
  // The session's ClientAccess allowed it when offered (ShardBroker::Offer).
  // Not stored: a restored delivery, or one queued before its client's
  // identity was known, is checked by the connection before it is sent.
  bool access_checked = false;
};

enum class InflightPhase : uint8_t {
  kAwaitingPuback,   // QoS 1 sent
  kAwaitingPubrec,   // QoS 2 sent
  kAwaitingPubcomp,  // QoS 2, PUBREL sent
};

struct InflightDelivery {
  Delivery delivery;
  InflightPhase phase = InflightPhase::kAwaitingPuback;
  uint64_t sent_order = 0;  // resends follow the original order across id wrap-around
  // Past PUBREC, where the message itself is dropped: its id (all zero when
  // not known: a record written before it was kept). A copy of the session
  // taken over elsewhere knows by it that the message was delivered
  // (Session::RememberOffers).
  MessageId released_id{};
};

// Why a connection loses its session.
enum class DetachReason : uint8_t { kTakenOver, kSessionRemoved, kShutdown };

class SessionSink {
 public:
  virtual ~SessionSink() = default;
  // The queue went from empty to non-empty (or room opened up).
  virtual void OnDeliveriesReady() = 0;
  // Another connection took the session, or the broker is closing.
  virtual void OnDetached(DetachReason reason) = 0;
};

struct WillMessage {
  MessagePtr message;  // id and expiry are set again when it is published
  uint32_t delay_seconds = 0;
  std::optional<uint32_t> expiry_interval;  // message expiry, seconds from publication
};

class Session {
 public:
  // `generation`: unique on the owning shard (ShardBroker::NewGeneration).
  Session(std::string client_id, uint64_t generation)
      : client_id_(std::move(client_id)), incarnation_(generation), generation_(generation) {}
  ~Session() {
    if (self_) *self_ = nullptr;
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const std::string& client_id() const { return client_id_; }

  // The client's topic rights (authorizer.h), set by the connection that
  // attaches; null without an ACL. Setting one marks every delivery held
  // unchecked, so the connection checks it against the new identity.
  ClientAccess* access() const { return access_.get(); }
  void set_access(std::shared_ptr<ClientAccess> access);

  // Subscriptions keyed by the filter as the client sent it ($share/.. kept).
  std::map<std::string, SubscriptionOptions>& subscriptions() { return subscriptions_; }
  const std::map<std::string, SubscriptionOptions>& subscriptions() const { return subscriptions_; }

  // Queues a delivery, unless the queue limits are reached: then, by
  // limits.queue_overflow, the new one is dropped (full), or (drop-oldest)
  // the oldest queued ones not yet staged for sending (nor waiting for a
  // group queue's hand) make room. QoS 0 is dropped while no connection is
  // attached unless limits.queue_qos0_offline. While connected, publishers
  // paused by this session may still have kForwardWindow forwards each in
  // flight: the message limit stretches by that much, which their pause
  // bounds.
  struct EnqueueResult {
    bool queued = false;
    bool full = false;            // not queued: the queue was at its limits
    uint32_t dropped_oldest = 0;  // queued after dropping this many of the oldest
  };
  EnqueueResult Enqueue(Delivery delivery, const SessionLimits& limits);
  // On a durable session with a connection: only a head whose staging is
  // durable (see above); stages more as a side effect.
  bool HasQueued();
  const Delivery& PeekQueued() const { return queue_.front(); }
  Delivery PopQueued();
  size_t queued_messages() const { return queue_.size(); }
  size_t queued_bytes() const { return queued_bytes_; }

  // Outbound in-flight, by packet id. Skips ids in flight and staged; 0
  // when all 65535 are used. Hands out a staged delivery's id (see above).
  uint16_t NextPacketId();
  uint64_t NextSendOrder() { return ++send_order_; }
  std::map<uint16_t, InflightDelivery>& inflight() { return inflight_; }
  // A QoS 1/2 delivery was sent with `packet_id`.
  void AddInflight(uint16_t packet_id, InflightDelivery inflight);
  // PUBREC arrived: awaiting PUBCOMP, the message itself is no longer needed.
  void MarkReleased(uint16_t packet_id);
  // PUBACK or PUBCOMP arrived (or the delivery was abandoned). On a durable
  // session a completed QoS 2 delivery is remembered (completed()).
  bool RemoveInflight(uint16_t packet_id);
  // The last kCompletedRemembered QoS 2 deliveries the client completed
  // (PUBCOMP), by packet id and message id, oldest first; durable sessions
  // only. Each is stored as a marker under its packet id's in-flight key
  // (record_codec.h), replaced when the id is used again, so a copy of the
  // session taken over elsewhere does not deliver one of them twice when
  // its publisher's node sends it again (docs/partitions.md, "QoS 2 across
  // a takeover").
  static constexpr size_t kCompletedRemembered = 64;
  struct Completed {
    uint16_t packet_id = 0;
    MessageId id;
  };
  const std::deque<Completed>* completed() const { return completed_.get(); }
  void RestoreCompleted(uint16_t packet_id, const MessageId& id);
  // Inbound exactly-once: packet ids whose PUBLISH was taken and whose
  // PUBREL has not arrived.
  std::set<uint16_t>& inbound_qos2() { return inbound_qos2_; }
  void AddInboundQos2(uint16_t packet_id);
  bool RemoveInboundQos2(uint16_t packet_id);

  SessionSink* sink() const { return sink_; }
  void set_sink(SessionSink* sink) { sink_ = sink; }
  bool connected() const { return sink_ != nullptr; }

  // Seconds the session outlives its connection; UINT32_MAX = never.
  uint32_t expiry_interval() const { return expiry_interval_; }
  // Becoming durable writes the whole session; ceasing to be deletes it.
  void set_expiry_interval(uint32_t seconds);

  std::optional<WillMessage>& will() { return will_; }
  void set_will(std::optional<WillMessage> will);

  // --- durability (see above) ---------------------------------------------
  void set_store(store::ShardStore* store) { store_ = store; }
  bool durable() const { return store_ != nullptr && expiry_interval_ != 0; }
  // Wall-clock ms of the last disconnect; 0 while connected.
  int64_t disconnected_at_ms() const { return disconnected_at_ms_; }
  void set_disconnected_at_ms(int64_t wall_ms) { disconnected_at_ms_ = wall_ms; }
  // Writes the session record (expiry, will, disconnect time) if durable.
  void SaveRecord();
  // Staging (see above): how many QoS 1/2 deliveries may be in flight and
  // staged together (a frontend sets the client's receive maximum, so a
  // restart never resends more than it allows); 0 = unknown, then up to
  // 1024 are staged beyond those in flight (session.cc, kStageAhead).
  void set_send_window(size_t window) { send_window_ = window; }
  // Staged deliveries not yet claimed (tests, metrics).
  size_t staged() const { return reserved_.size(); }
  // Recovery: state read back from the store, not written again.
  void RestoreQueued(Delivery delivery);
  // Deliveries queued from now on have a store sequence above this mark
  // (a restarted cluster node tells them from the ones it recovered).
  uint64_t store_seq_mark() const { return next_store_seq_; }
  void RestoreInflight(uint16_t packet_id, InflightDelivery inflight);

  // --- shared subscriptions ------------------------------------------------------
  // Takes out the QoS 1/2 deliveries `take` selects: queued ones (staging
  // is undone first) and, with `inflight`, those in flight still awaiting
  // PUBACK or PUBREC (a PUBREC'd one is the client's), those awaiting
  // PUBREC only with `sent_qos2`. Their stored records are deleted.
  // In-flight ones first (in send order), then queue order.
  std::vector<Delivery> TakeDeliveries(const std::function<bool(const Delivery&)>& take, bool inflight,
                                       bool sent_qos2 = true);
  // Calls `fn` on every delivery held, queued and in flight (tagging).
  void ForEachDelivery(const std::function<void(Delivery&)>& fn);
  // The queued delivery of message `id` waiting for its hand's Ack may be
  // sent now; false if none waited.
  bool ReleaseHanded(const MessageId& id);

  // Congestion: at or above half of either queue limit while connected.
  bool Congested(const SessionLimits& limits) const {
    return queue_.size() * 2 >= limits.max_queued_messages ||
           queued_bytes_ * 2 >= limits.max_queued_bytes;
  }
  // Relieved: at or below a quarter of both limits.
  bool Relieved(const SessionLimits& limits) const {
    return queue_.size() * 4 <= limits.max_queued_messages &&
           queued_bytes_ * 4 <= limits.max_queued_bytes;
  }
  // Publishers paused because of this session's queue.
  std::set<FlowRef>& paused_publishers() { return paused_publishers_; }

  // --- task transfer (docs/partitions.md, "The takeover gap") ---------------------
  // A session taken from `node` (a gone node's, adopted here; or claimed
  // from it by a reconnect) is sent again the forwards that node never
  // confirmed (kForwardReplay). Until `until_ms` every message offered to
  // it is remembered by id, seeded with what it holds now, so a message
  // that arrives both ways (or that the session already held) is kept once.
  void MarkTakenFrom(uint16_t node, int64_t until_ms);
  // The window alone, for a copy adopted from the partition whose previous
  // node is not known (a claim whose result was no longer kept): hand-offs
  // from wherever it was may still come (docs/partitions.md).
  void RememberOffers(int64_t until_ms);
  // The node it was taken from, while the window lasts; 0 otherwise.
  uint16_t taken_from(int64_t now_ms) const { return now_ms < taken_until_ms_ ? taken_from_ : 0; }
  // In the window: true if `id` was offered before (remembered otherwise).
  // A delivery taken out (TakeDeliveries) is forgotten: it may be offered
  // again.
  bool OfferedBefore(const MessageId& id, int64_t now_ms);
  bool remembering() const { return remembering_; }

  // A stub of a session that moved to another node (ShardBroker::
  // EndMovedStub): its subscriptions match, nothing is queued here.
  bool moved_stub() const { return moved_stub_; }
  void MarkMovedStub() { moved_stub_ = true; }

  uint64_t dropped_messages() const { return dropped_; }
  // What a deferred action was armed for (ShardBroker::BoundToGeneration,
  // issue 27). Both are drawn from one counter per shard, so no two
  // sessions of a shard ever share a value, even under one client id: the
  // incarnation names this Session (a clean start or an adopted copy is
  // another one) and never changes; the generation changes at every attach
  // and disconnect, so a timer armed at a disconnect acts only if nothing
  // happened to the session since.
  uint64_t incarnation() const { return incarnation_; }
  uint64_t generation() const { return generation_; }
  void Renew(uint64_t generation) { generation_ = generation; }

 private:
  std::string client_id_;
  std::shared_ptr<ClientAccess> access_;
  std::map<std::string, SubscriptionOptions> subscriptions_;
  std::deque<Delivery> queue_;
  size_t queued_bytes_ = 0;
  std::map<uint16_t, InflightDelivery> inflight_;
  std::set<uint16_t> inbound_qos2_;
  uint16_t last_packet_id_ = 0;
  uint64_t send_order_ = 0;
  SessionSink* sink_ = nullptr;
  uint32_t expiry_interval_ = 0;
  std::optional<WillMessage> will_;
  std::set<FlowRef> paused_publishers_;
  uint64_t dropped_ = 0;
  uint64_t incarnation_;
  uint64_t generation_;
  uint16_t taken_from_ = 0;
  int64_t taken_until_ms_ = 0;
  bool moved_stub_ = false;
  bool remembering_ = false;
  int64_t remember_until_ms_ = 0;
  std::unordered_set<MessageId, MessageIdHash> offered_;  // in the window only
  std::unique_ptr<std::deque<Completed>> completed_;      // made on the first completion
  void KeepCompleted(uint16_t packet_id, const MessageId& id);
  void ForgetCompleted(uint16_t packet_id);
  store::ShardStore* store_ = nullptr;
  int64_t disconnected_at_ms_ = 0;
  uint64_t next_store_seq_ = 0;
  void PersistAll();

  // Staging. Queue positions are absolute (pops advance queue_base_): the
  // entries before staged_end_ are staged, those before released_end_ are
  // durable and visible. staged_ids_ holds the packet id (0 for QoS 0), send
  // order and former queue key of each staged entry still queued.
  struct Claim {
    uint16_t packet_id = 0;
    uint64_t sent_order = 0;
    InflightPhase phase = InflightPhase::kAwaitingPuback;
    bool handed = false;  // NextPacketId returned it
  };
  bool Gated() const { return durable() && connected(); }
  void StageAhead();
  void OnStagedDurable(uint64_t epoch, uint64_t end);
  void Restage(size_t index);
  void DropUnclaimed();
  void ForgetOffered(const std::vector<Delivery>& taken);
  bool OverLimits(size_t more_bytes, const SessionLimits& limits) const;
  bool DropOldestUnstaged();
  void ResetStaging(uint64_t from);
  static InflightPhase PhaseFor(QoS qos);
  uint16_t FreshPacketId();
  uint64_t queue_base_ = 0;
  uint64_t staged_end_ = 0;
  uint64_t released_end_ = 0;
  struct StagedId {
    uint16_t packet_id = 0;
    uint64_t sent_order = 0;
    uint64_t store_seq = 0;
  };
  std::deque<StagedId> staged_ids_;
  std::set<uint16_t> reserved_;    // ids of staged deliveries not yet claimed
  std::optional<Claim> popped_;    // a staged delivery popped, not yet claimed
  bool head_handed_ = false;       // the head's id was handed out before its pop
  bool staging_ = false;
  uint64_t stage_epoch_ = 0;  // bumped when staged ids change: older callbacks are void
  size_t send_window_ = 0;
  std::shared_ptr<Session*> self_;  // made on first staging; callbacks check the session lives
  std::weak_ptr<Session*> Alive();
};

}  // namespace estuary::core
