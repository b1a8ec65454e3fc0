#pragma once
// ShardStore: one shard's durable state on its own StorageEngine, between
// ShardBroker/Session and persistence (docs/storage.md, "What a node
// stores"; key layout in record_codec.h).
//
// Writes are collected into one WriteBatch per loop iteration and handed
// to the engine's WriteAsync at the end of it (a Loop Post), so one
// iteration's enqueues, acks and session changes cost one batch and, under
// sync=always, share one fdatasync. WhenDurable(fn) runs fn once every write
// made so far is acknowledged by the engine under its sync policy: the
// broker chains a publisher's PUBACK/PUBREC onto it.
//
// A key put and deleted again before its batch leaves (a queued delivery
// taken by a connected subscriber in the same iteration) is never written.
//
// If the engine fails a write the store logs it, refuses later writes and
// never runs the waiters of the failed and later batches: nothing is
// acknowledged that may not be on disk.
//
// Replication (optional, set_replicate; docs/partitions.md "Sessions on
// partitions"): every change to a session key is also handed, in order and
// batched like the engine's, to the partitions that keep sessions, and a
// batch counts as acknowledged only once both the engine and the
// replication have acknowledged it. A session wipe (DeleteSession) goes to
// the replication as one change, since keys read back from a partition
// need not be in the engine. Retained messages stay on the engine alone.
//
// Threading: the shard's thread, like the engine. The engine and the Loop
// must outlive the store.
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cluster-core/broker/session.h"
#include "cluster-core/store/record_codec.h"
#include "io/loop.h"
#include "persistence/storage_engine.h"

namespace estuary::core::store {

// What Load() found for one session.
struct RecoveredSession {
  std::string client_id;
  SessionRecord record;
  std::vector<std::pair<std::string, SubscriptionOptions>> subscriptions;
  std::vector<Delivery> queued;  // in queue order, store_seq set
  std::vector<std::pair<uint16_t, InflightDelivery>> inflight;
  std::vector<Session::Completed> completed;  // markers (Session::completed()), by packet id
  std::vector<uint16_t> inbound_qos2;
};

// Hands a batch of changes to the replication; `done` runs on the shard's
// loop once they are replicated (retried until then).
using ReplicateFn = std::function<void(std::vector<SessionChange> changes, std::function<void()> done)>;

// Builds sessions from their keys and values (record first, as the keys
// sort per tag: 's', then 'b', 'q', 'f', 'i'); Add refuses (false) a key
// that does not decode or whose session record is missing.
class SessionDecoder {
 public:
  bool Add(std::string_view key, std::string_view value);
  std::vector<RecoveredSession> Take();

 private:
  std::map<std::string, RecoveredSession> sessions_;
};

struct RecoveredShard {
  std::vector<RecoveredSession> sessions;
  std::vector<MessagePtr> retained;
  uint64_t skipped_records = 0;  // undecodable or orphaned, deleted
};

class ShardStore {
 public:
  ShardStore(persistence::StorageEngine& engine, io::Loop& loop);
  ~ShardStore();
  ShardStore(const ShardStore&) = delete;
  ShardStore& operator=(const ShardStore&) = delete;

  // Reads everything back (at start-up, before any write).
  persistence::Result<RecoveredShard> Load();

  void PutSession(const std::string& client_id, const SessionRecord& record);
  // Deletes every key of the session (record, subscriptions, queue,
  // in-flight, inbound ids), flushed or still pending; with `replicate`
  // false the replication is not told (the partition's copy is another
  // node's, or about to be written back: see ShardBroker::AdoptSession).
  void DeleteSession(const std::string& client_id, bool replicate = true);
  void PutSubscription(const std::string& client_id, const std::string& filter,
                       const SubscriptionOptions& options);
  void DeleteSubscription(const std::string& client_id, const std::string& filter);
  void PutQueued(const std::string& client_id, uint64_t seq, const Delivery& delivery);
  void DeleteQueued(const std::string& client_id, uint64_t seq);
  void PutInflight(const std::string& client_id, uint16_t packet_id, const InflightDelivery& inflight);
  void DeleteInflight(const std::string& client_id, uint16_t packet_id);
  // A completed QoS 2 delivery's marker, under its packet id's in-flight key.
  void PutCompleted(const std::string& client_id, uint16_t packet_id, const MessageId& id);
  void PutInboundQos2(const std::string& client_id, uint16_t packet_id);
  void DeleteInboundQos2(const std::string& client_id, uint16_t packet_id);
  // Writes a key to the engine only, not to the replication (a session
  // read back from a partition, kept locally from now on).
  void PutLocal(std::string key, std::string value);
  // Deletes a key from the engine only (one written by PutLocal).
  void DeleteLocal(std::string key);
  void PutRetained(const Message& message);
  void DeleteRetained(const std::string& topic);

  // Runs `fn` once every write made so far is acknowledged (at once when
  // none is outstanding).
  void WhenDurable(std::function<void()> fn);
  // Runs `fn` once the writes not yet handed to the engine (this loop
  // iteration's) are acknowledged, whatever earlier batches still wait for
  // (at once when there are none). For a write that must not wait behind
  // another that may wait for it: a moved session's hand-off (the sending
  // node's batch is held until the receiver has them durably;
  // docs/partitions.md "Deliveries left behind by a move").
  void WhenOwnWritesDurable(std::function<void()> fn);
  // Writes the pending batch now with a synchronous Write (shutdown).
  persistence::Status FlushNow();

  // `wait` false (replication.ack = "leader"): a batch is acknowledged once
  // the engine has it; the replication still gets every change, in order.
  void set_replicate(ReplicateFn replicate, bool wait = true) {
    replicate_ = std::move(replicate);
    wait_for_replication_ = wait;
  }
  bool replicated() const { return static_cast<bool>(replicate_); }
  // Whether delivery records may keep their shared group's key (asked for
  // each delivery that has one): false while a node of an older binary,
  // which rejects such records, is in the cluster (docs/storage.md, "Older
  // binaries and rolling upgrades"). Unset: always.
  void set_group_keys(std::function<bool()> allowed) { group_keys_ = std::move(allowed); }

  bool failed() const { return failed_; }
  uint64_t batches_written() const { return batches_written_; }
  uint64_t keys_written() const { return keys_written_; }

 private:
  struct Pending {
    std::map<std::string, std::optional<std::string>, std::less<>> ops;  // nullopt = delete
    std::set<std::string, std::less<>> fresh;  // keys known not to be in the engine
    std::set<std::string, std::less<>> local;  // PutLocal keys: not replicated
    std::vector<std::string> wipes;            // client ids, replicated before `ops`
    std::vector<std::function<void()>> waiters;
    std::vector<std::function<void()>> own_waiters;  // WhenOwnWritesDurable
  };
  void Put(std::string key, std::string value, bool fresh = false);
  bool WithGroupKey(const Delivery& delivery) const { return delivery.shared_key && TrailingFields(); }
  // Every reader of the records knows trailing fields (set_group_keys).
  bool TrailingFields() const { return !group_keys_ || group_keys_(); }
  void Delete(std::string key);
  void ScheduleFlush();
  void Flush();
  void OnWritten(uint64_t batch, const persistence::Status& status);
  void OnPartDone(uint64_t batch);
  persistence::WriteBatch TakeBatch(std::vector<SessionChange>* changes);

  persistence::StorageEngine& engine_;
  io::Loop& loop_;
  Pending pending_;
  bool flush_scheduled_ = false;
  // Batches handed to the engine (and the replication) and not yet
  // acknowledged by both, oldest first; acknowledged in order.
  struct InFlight {
    uint64_t id = 0;
    uint32_t parts_left = 0;
    std::vector<std::function<void()>> waiters;
    std::vector<std::function<void()>> own_waiters;  // run when this batch is done, in order or not
  };
  std::deque<InFlight> in_flight_;
  ReplicateFn replicate_;
  std::function<bool()> group_keys_;
  bool wait_for_replication_ = true;
  uint64_t next_batch_ = 1;
  bool failed_ = false;
  uint64_t batches_written_ = 0;
  uint64_t keys_written_ = 0;
  std::shared_ptr<ShardStore*> self_;  // callbacks check the store is alive
};

}  // namespace estuary::core::store
