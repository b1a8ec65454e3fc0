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
  pending_.ops.insert_or_assign(std::move(key), std::move(value));
  ScheduleFlush();
}

void ShardStore::Delete(std::string key) {
  if (failed_) return;
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

void ShardStore::DeleteSession(const std::string& client_id) {
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
    for (auto& key : keys) Delete(std::move(key));
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
  Put(QueuedKey(client_id, seq), EncodeDelivery(delivery), /*fresh=*/true);
}

void ShardStore::DeleteQueued(const std::string& client_id, uint64_t seq) {
  Delete(QueuedKey(client_id, seq));
}

void ShardStore::PutInflight(const std::string& client_id, uint16_t packet_id,
                             const InflightDelivery& inflight) {
  Put(InflightKey(client_id, packet_id), EncodeInflight(inflight));
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
  if (!pending_.ops.empty()) {
    pending_.waiters.push_back(std::move(fn));
  } else if (!in_flight_.empty()) {
    in_flight_.back().second.push_back(std::move(fn));
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

persistence::WriteBatch ShardStore::TakeBatch() {
  persistence::WriteBatch batch;
  for (auto& [key, value] : pending_.ops) {
    if (value) {
      batch.Put(key, *value);
    } else {
      batch.Delete(key);
    }
  }
  keys_written_ += pending_.ops.size();
  pending_.ops.clear();
  pending_.fresh.clear();
  return batch;
}

void ShardStore::Flush() {
  flush_scheduled_ = false;
  if (failed_) return;
  if (pending_.ops.empty()) {
    // Waiters whose writes collapsed to nothing still wait for earlier batches.
    for (auto& fn : std::exchange(pending_.waiters, {})) WhenDurable(std::move(fn));
    return;
  }
  const uint64_t id = next_batch_++;
  in_flight_.emplace_back(id, std::exchange(pending_.waiters, {}));
  persistence::WriteBatch batch = TakeBatch();
  ++batches_written_;
  std::weak_ptr<ShardStore*> alive = self_;
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
  // Engines acknowledge in order; run every batch up to this one.
  while (!in_flight_.empty() && in_flight_.front().first <= batch) {
    auto waiters = std::move(in_flight_.front().second);
    in_flight_.pop_front();
    for (auto& fn : waiters) fn();
  }
}

persistence::Status ShardStore::FlushNow() {
  if (failed_ || pending_.ops.empty()) return {};
  auto waiters = std::exchange(pending_.waiters, {});
  persistence::WriteBatch batch = TakeBatch();
  ++batches_written_;
  auto status = engine_.Write(batch);
  if (!status) {
    failed_ = true;
    return status;
  }
  for (auto& fn : waiters) fn();
  return status;
}

// --- recovery -------------------------------------------------------------

persistence::Result<RecoveredShard> ShardStore::Load() {
  RecoveredShard shard;
  std::map<std::string, RecoveredSession> sessions;
  std::vector<std::string> bad_keys;

  auto scan = [&](char tag, auto&& visit) -> persistence::Status {
    return engine_.Scan(std::string(1, tag), [&](std::string_view key, std::string_view value) {
      if (!visit(key, value)) bad_keys.emplace_back(key);
      return true;
    });
  };
  auto status = scan(kSessionTag, [&](std::string_view key, std::string_view value) {
    auto parsed = ParseSessionKey(key);
    auto record = DecodeSession(value);
    if (!parsed || !parsed->rest.empty() || !record) return false;
    RecoveredSession& session = sessions[parsed->client_id];
    session.client_id = parsed->client_id;
    session.record = std::move(*record);
    return true;
  });
  // Per-session keys: kept only when their session record exists.
  auto owner = [&](std::string_view key) -> std::pair<RecoveredSession*, std::string> {
    auto parsed = ParseSessionKey(key);
    if (!parsed) return {nullptr, {}};
    auto it = sessions.find(parsed->client_id);
    return {it == sessions.end() ? nullptr : &it->second, parsed->rest};
  };
  if (status) status = scan(kSubscriptionTag, [&](std::string_view key, std::string_view value) {
    auto [session, filter] = owner(key);
    auto options = DecodeOptions(value);
    if (session == nullptr || !options || filter.empty()) return false;
    session->subscriptions.emplace_back(std::move(filter), *options);
    return true;
  });
  if (status) status = scan(kQueuedTag, [&](std::string_view key, std::string_view value) {
    auto [session, seq] = owner(key);
    auto delivery = DecodeDelivery(value);
    if (session == nullptr || !delivery || seq.size() != 8) return false;
    delivery->store_seq = DecodeBigEndian(seq);
    session->queued.push_back(std::move(*delivery));
    return true;
  });
  if (status) status = scan(kInflightTag, [&](std::string_view key, std::string_view value) {
    auto [session, id] = owner(key);
    auto inflight = DecodeInflight(value);
    if (session == nullptr || !inflight || id.size() != 2 || DecodeBigEndian(id) == 0) return false;
    session->inflight.emplace_back(static_cast<uint16_t>(DecodeBigEndian(id)), std::move(*inflight));
    return true;
  });
  if (status) status = scan(kInboundTag, [&](std::string_view key, std::string_view) {
    auto [session, id] = owner(key);
    if (session == nullptr || id.size() != 2) return false;
    session->inbound_qos2.push_back(static_cast<uint16_t>(DecodeBigEndian(id)));
    return true;
  });
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
  for (auto& [id, session] : sessions) shard.sessions.push_back(std::move(session));
  return shard;
}

}  // namespace estuary::core::store
