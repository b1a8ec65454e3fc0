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
  std::vector<uint16_t> inbound_qos2;
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
  // in-flight, inbound ids), flushed or still pending.
  void DeleteSession(const std::string& client_id);
  void PutSubscription(const std::string& client_id, const std::string& filter,
                       const SubscriptionOptions& options);
  void DeleteSubscription(const std::string& client_id, const std::string& filter);
  void PutQueued(const std::string& client_id, uint64_t seq, const Delivery& delivery);
  void DeleteQueued(const std::string& client_id, uint64_t seq);
  void PutInflight(const std::string& client_id, uint16_t packet_id, const InflightDelivery& inflight);
  void DeleteInflight(const std::string& client_id, uint16_t packet_id);
  void PutInboundQos2(const std::string& client_id, uint16_t packet_id);
  void DeleteInboundQos2(const std::string& client_id, uint16_t packet_id);
  void PutRetained(const Message& message);
  void DeleteRetained(const std::string& topic);

  // Runs `fn` once every write made so far is acknowledged (at once when
  // none is outstanding).
  void WhenDurable(std::function<void()> fn);
  // Writes the pending batch now with a synchronous Write (shutdown).
  persistence::Status FlushNow();

  bool failed() const { return failed_; }
  uint64_t batches_written() const { return batches_written_; }
  uint64_t keys_written() const { return keys_written_; }

 private:
  struct Pending {
    std::map<std::string, std::optional<std::string>, std::less<>> ops;  // nullopt = delete
    std::set<std::string, std::less<>> fresh;  // keys known not to be in the engine
    std::vector<std::function<void()>> waiters;
  };
  void Put(std::string key, std::string value, bool fresh = false);
  void Delete(std::string key);
  void ScheduleFlush();
  void Flush();
  void OnWritten(uint64_t batch, const persistence::Status& status);
  persistence::WriteBatch TakeBatch();

  persistence::StorageEngine& engine_;
  io::Loop& loop_;
  Pending pending_;
  bool flush_scheduled_ = false;
  // Batches handed to the engine and not yet acknowledged, oldest first.
  std::deque<std::pair<uint64_t, std::vector<std::function<void()>>>> in_flight_;
  uint64_t next_batch_ = 1;
  bool failed_ = false;
  uint64_t batches_written_ = 0;
  uint64_t keys_written_ = 0;
  std::shared_ptr<ShardStore*> self_;  // callbacks check the store is alive
};

}  // namespace estuary::core::store
