#include "cluster-core/store/shard_store.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace estuary::core::store {

ShardStore::ShardStore(persistence::StorageEngine& engine, io::Loop& loop)
    : engine_(engine), loop_(loop), self_(std::make_shared<ShardStore*>(this)) {}

ShardStore::~ShardStore() { *self_ = nullptr; }

// --- writes ---------------------------------------------------------------

void ShardStore::Put(std::string key, std::string value, bool fresh) {
  if (failed_) return;
  if (fresh) pending_.fresh.insert(key);
  if (!pending_.local.empty()) pending_.local.erase(key);
  pending_.ops.insert_or_assign(std::move(key), std::move(value));
  ScheduleFlush();
}

void ShardStore::PutLocal(std::string key, std::string value) {
  if (failed_) return;
  pending_.local.insert(key);
  pending_.ops.insert_or_assign(std::move(key), std::move(value));
  ScheduleFlush();
}

void ShardStore::DeleteLocal(std::string key) {
  if (failed_) return;
  pending_.local.insert(key);
  pending_.ops.insert_or_assign(std::move(key), std::nullopt);
  ScheduleFlush();
}

void ShardStore::Delete(std::string key) {
  if (failed_) return;
  if (!pending_.local.empty()) pending_.local.erase(key);
  if (auto it = pending_.fresh.find(key); it != pending_.fresh.end()) {
    // Put and deleted before reaching the engine: it never needs to.
    pending_.fresh.erase(it);
    pending_.ops.erase(key);
    return;
  }
  pending_.ops.insert_or_assign(std::move(key), std::nullopt);
  ScheduleFlush();
}

void ShardStore::PutSession(const std::string& client_id, const SessionRecord& record) {
  Put(SessionKey(client_id), EncodeSession(record));
}

void ShardStore::DeleteSession(const std::string& client_id, bool replicate) {
  for (char tag : {kSessionTag, kSubscriptionTag, kQueuedTag, kInflightTag, kInboundTag}) {
    const std::string prefix = SessionPrefix(tag, client_id);
    std::vector<std::string> keys;
    for (auto it = pending_.ops.lower_bound(prefix);
         it != pending_.ops.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
      keys.push_back(it->first);
    }
    auto scanned = engine_.Scan(prefix, [&](std::string_view key, std::string_view) {
      keys.emplace_back(key);
      return true;
    });
    if (!scanned) spdlog::error("storage: scan of session '{}' failed: {}", client_id, scanned.error().message);
    for (auto& key : keys) {
      Delete(key);
      if (!replicate && !failed_ && pending_.ops.count(key) != 0) pending_.local.insert(std::move(key));
    }
  }
  if (replicate && replicate_ && !failed_) {
    pending_.wipes.push_back(client_id);
    ScheduleFlush();
  }
}

void ShardStore::PutSubscription(const std::string& client_id, const std::string& filter,
                                 const SubscriptionOptions& options) {
  Put(SubscriptionKey(client_id, filter), EncodeOptions(options));
}

void ShardStore::DeleteSubscription(const std::string& client_id, const std::string& filter) {
  Delete(SubscriptionKey(client_id, filter));
}

void ShardStore::PutQueued(const std::string& client_id, uint64_t seq, const Delivery& delivery) {
  Put(QueuedKey(client_id, seq), EncodeDelivery(delivery, WithGroupKey(delivery)), /*fresh=*/true);
}

void ShardStore::DeleteQueued(const std::string& client_id, uint64_t seq) {
  Delete(QueuedKey(client_id, seq));
}

void ShardStore::PutInflight(const std::string& client_id, uint16_t packet_id,
                             const InflightDelivery& inflight) {
  Put(InflightKey(client_id, packet_id), EncodeInflight(inflight, TrailingFields()));
}

void ShardStore::PutCompleted(const std::string& client_id, uint16_t packet_id, const MessageId& id) {
  Put(InflightKey(client_id, packet_id), EncodeCompleted(id));
}

void ShardStore::DeleteInflight(const std::string& client_id, uint16_t packet_id) {
  Delete(InflightKey(client_id, packet_id));
}

void ShardStore::PutInboundQos2(const std::string& client_id, uint16_t packet_id) {
  Put(InboundKey(client_id, packet_id), std::string());
}

void ShardStore::DeleteInboundQos2(const std::string& client_id, uint16_t packet_id) {
  Delete(InboundKey(client_id, packet_id));
}

void ShardStore::PutRetained(const Message& message) {
  Put(RetainedKey(message.topic), EncodeMessage(message));
}

void ShardStore::DeleteRetained(const std::string& topic) { Delete(RetainedKey(topic)); }

// --- batching and acknowledgement -------------------------------------------

void ShardStore::WhenDurable(std::function<void()> fn) {
  if (failed_) return;  // never acknowledged: see the header
  if (!pending_.ops.empty() || !pending_.wipes.empty()) {
    pending_.waiters.push_back(std::move(fn));
  } else if (!in_flight_.empty()) {
    in_flight_.back().waiters.push_back(std::move(fn));
  } else {
    fn();
  }
}

void ShardStore::WhenOwnWritesDurable(std::function<void()> fn) {
  if (failed_) return;
  if (!pending_.ops.empty() || !pending_.wipes.empty()) {
    pending_.own_waiters.push_back(std::move(fn));
  } else {
    fn();
  }
}

void ShardStore::ScheduleFlush() {
  if (flush_scheduled_) return;
  flush_scheduled_ = true;
  std::weak_ptr<ShardStore*> alive = self_;
  loop_.Post([alive] {
    if (auto self = alive.lock(); self && *self) (*self)->Flush();
  });
}

namespace {
bool IsSessionKey(std::string_view key) {
  return !key.empty() && key.front() != kRetainedTag;
}
}  // namespace

persistence::WriteBatch ShardStore::TakeBatch(std::vector<SessionChange>* changes) {
  persistence::WriteBatch batch;
  if (changes != nullptr) {
    for (std::string& client : pending_.wipes) changes->push_back({SessionChange::kWipe, std::move(client), {}});
  }
  for (auto& [key, value] : pending_.ops) {
    const bool replicate = changes != nullptr && IsSessionKey(key) && pending_.local.count(key) == 0;
    if (value) {
      batch.Put(key, *value);
      if (replicate) changes->push_back({SessionChange::kPut, key, *value});
    } else {
      batch.Delete(key);
      if (replicate) changes->push_back({SessionChange::kDelete, key, {}});
    }
  }
  keys_written_ += pending_.ops.size();
  pending_.ops.clear();
  pending_.fresh.clear();
  pending_.local.clear();
  pending_.wipes.clear();
  return batch;
}

void ShardStore::Flush() {
  flush_scheduled_ = false;
  if (failed_) return;
  if (pending_.ops.empty() && pending_.wipes.empty()) {
    // Waiters whose writes collapsed to nothing still wait for earlier batches.
    for (auto& fn : std::exchange(pending_.waiters, {})) WhenDurable(std::move(fn));
    for (auto& fn : std::exchange(pending_.own_waiters, {})) fn();
    return;
  }
  const uint64_t id = next_batch_++;
  std::vector<SessionChange> changes;
  persistence::WriteBatch batch = TakeBatch(replicate_ ? &changes : nullptr);
  const bool wait = !changes.empty() && wait_for_replication_;
  in_flight_.push_back(
      InFlight{id, wait ? 2u : 1u, std::exchange(pending_.waiters, {}), std::exchange(pending_.own_waiters, {})});
  ++batches_written_;
  std::weak_ptr<ShardStore*> alive = self_;
  if (!changes.empty()) {
    replicate_(std::move(changes), [alive, id, wait] {
      if (!wait) return;  // acknowledged on the engine's word alone
      if (auto self = alive.lock(); self && *self) (*self)->OnPartDone(id);
    });
  }
  engine_.WriteAsync(batch, [alive, id](persistence::Status status) {
    if (auto self = alive.lock(); self && *self) (*self)->OnWritten(id, status);
  });
}

void ShardStore::OnWritten(uint64_t batch, const persistence::Status& status) {
  if (!status) {
    if (!failed_) {
      spdlog::error("storage: a write failed, no more acknowledgements from this shard: {}",
                    status.error().message);
    }
    failed_ = true;
    in_flight_.clear();
    pending_ = Pending{};
    return;
  }
  OnPartDone(batch);
}

void ShardStore::OnPartDone(uint64_t batch) {
  for (InFlight& flight : in_flight_) {
    if (flight.id == batch) {
      if (--flight.parts_left == 0) {
        for (auto& fn : std::exchange(flight.own_waiters, {})) fn();
      }
      break;
    }
  }
  // Acknowledged in batch order: run every batch up to the first not done.
  while (!in_flight_.empty() && in_flight_.front().parts_left == 0) {
    auto waiters = std::move(in_flight_.front().waiters);
    in_flight_.pop_front();
    for (auto& fn : waiters) fn();
  }
}

persistence::Status ShardStore::FlushNow() {
  if (failed_ || (pending_.ops.empty() && pending_.wipes.empty())) return {};
  auto waiters = std::exchange(pending_.waiters, {});
  for (auto& fn : std::exchange(pending_.own_waiters, {})) waiters.push_back(std::move(fn));
  std::vector<SessionChange> changes;
  persistence::WriteBatch batch = TakeBatch(replicate_ ? &changes : nullptr);
  ++batches_written_;
  if (!changes.empty()) replicate_(std::move(changes), [] {});  // shutting down: nobody waits
  auto status = engine_.Write(batch);
  if (!status) {
    failed_ = true;
    return status;
  }
  for (auto& fn : waiters) fn();
  return status;
}

// --- recovery -------------------------------------------------------------

bool SessionDecoder::Add(std::string_view key, std::string_view value) {
  auto parsed = ParseSessionKey(key);
  if (!parsed) return false;
  if (parsed->tag == kSessionTag) {
    auto record = DecodeSession(value);
    if (!parsed->rest.empty() || !record) return false;
    RecoveredSession& session = sessions_[parsed->client_id];
    session.client_id = parsed->client_id;
    session.record = std::move(*record);
    return true;
  }
  // Per-session keys: kept only when their session record exists.
  auto it = sessions_.find(parsed->client_id);
  if (it == sessions_.end()) return false;
  RecoveredSession& session = it->second;
  const std::string& rest = parsed->rest;
  switch (parsed->tag) {
    case kSubscriptionTag: {
      auto options = DecodeOptions(value);
      if (!options || rest.empty()) return false;
      session.subscriptions.emplace_back(rest, *options);
      return true;
    }
    case kQueuedTag: {
      auto delivery = DecodeDelivery(value);
      if (!delivery || rest.size() != 8) return false;
      delivery->store_seq = DecodeBigEndian(rest);
      session.queued.push_back(std::move(*delivery));
      return true;
    }
    case kInflightTag: {
      if (rest.size() != 2 || DecodeBigEndian(rest) == 0) return false;
      const auto packet_id = static_cast<uint16_t>(DecodeBigEndian(rest));
      if (auto inflight = DecodeInflight(value)) {
        session.inflight.emplace_back(packet_id, std::move(*inflight));
        return true;
      }
      auto completed = DecodeCompleted(value);
      if (!completed) return false;
      session.completed.push_back(Session::Completed{packet_id, *completed});
      return true;
    }
    case kInboundTag:
      if (rest.size() != 2) return false;
      session.inbound_qos2.push_back(static_cast<uint16_t>(DecodeBigEndian(rest)));
      return true;
    default:
      return false;
  }
}

std::vector<RecoveredSession> SessionDecoder::Take() {
  std::vector<RecoveredSession> sessions;
  sessions.reserve(sessions_.size());
  for (auto& [id, session] : sessions_) sessions.push_back(std::move(session));
  sessions_.clear();
  return sessions;
}

persistence::Result<RecoveredShard> ShardStore::Load() {
  RecoveredShard shard;
  SessionDecoder sessions;
  std::vector<std::string> bad_keys;

  auto scan = [&](char tag, auto&& visit) -> persistence::Status {
    return engine_.Scan(std::string(1, tag), [&](std::string_view key, std::string_view value) {
      if (!visit(key, value)) bad_keys.emplace_back(key);
      return true;
    });
  };
  // The records first: the other keys of a session need its record.
  persistence::Status status;
  for (char tag : {kSessionTag, kSubscriptionTag, kQueuedTag, kInflightTag, kInboundTag}) {
    if (status) status = scan(tag, [&](std::string_view key, std::string_view value) {
      return sessions.Add(key, value);
    });
  }
  if (status) status = scan(kRetainedTag, [&](std::string_view key, std::string_view value) {
    auto message = DecodeMessage(value);
    if (!message || (*message)->topic != key.substr(1)) return false;
    shard.retained.push_back(std::move(*message));
    return true;
  });
  if (!status) return MakeError(status.error());

  if (!bad_keys.empty()) {
    spdlog::warn("storage: deleting {} undecodable or orphaned records", bad_keys.size());
    persistence::WriteBatch batch;
    for (const auto& key : bad_keys) batch.Delete(key);
    if (auto written = engine_.Write(batch); !written) return MakeError(written.error());
  }
  shard.skipped_records = bad_keys.size();
  shard.sessions = sessions.Take();
  return shard;
}

}  // namespace estuary::core::store
