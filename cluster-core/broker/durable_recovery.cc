// ShardBroker's durable side: attaching a store, reading it back at start,
// and the bookkeeping that holds a publisher's acknowledgement until the
// writes it caused are durable on every shard (docs/storage.md).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "cluster-core/broker/shard_broker.h"
#include "cluster-core/store/shard_store.h"

namespace estuary::core {

void ShardBroker::AttachStore(persistence::StorageEngine& engine) {
  store_ = std::make_unique<store::ShardStore>(engine, loop_);
  // Session changes also go to the partitions once the cluster keeps
  // sessions there (docs/partitions.md "Sessions on partitions").
  store_->set_replicate([this](std::vector<store::SessionChange> changes, std::function<void()> done) {
    if (cluster_ == nullptr || !cluster_->SessionsOnPartitions()) {
      done();
      return;
    }
    cluster_->ReplicateSessions(config_.shard_id, std::move(changes), std::move(done));
  }, /*wait=*/!config_.replication_ack_leader);
  store_->set_group_keys([this] { return cluster_ == nullptr || cluster_->GroupKeysInRecords(); });
}

void ShardBroker::AdoptSession(const std::string& client_id,
                               const std::vector<std::pair<std::string, std::string>>& keys, bool taken_over,
                               uint16_t taken_from) {
  // A copy still here lost the id to another node without hearing of it
  // (its refused writes not answered yet, or none made): what it holds may
  // be in no other copy (accepted after the other node's claim, written or
  // still on its way), so its plain QoS 1/2 deliveries are offered to the
  // copy adopted below, which takes each message once (as a hand-off's).
  std::vector<Delivery> carried;
  if (Session* stale = FindSession(client_id)) {
    DetachTakenOver(*stale);
    stale->will().reset();
    if (!stale->moved_stub()) carried = StaleDeliveries(*stale);
    stale->set_store(nullptr);  // the partition's copy is the one adopted below
    RemoveSession(stale);
  }
  if (!store_) return;
  store_->DeleteSession(client_id, /*replicate=*/false);
  store::SessionDecoder decoder;
  for (const auto& [key, value] : keys) {
    if (decoder.Add(key, value)) store_->PutLocal(key, value);
  }
  std::vector<store::RecoveredSession> sessions = decoder.Take();
  if (sessions.empty() || sessions.front().client_id != client_id) return;
  if (!taken_over) sessions.front().record.will.reset();
  std::vector<uint64_t> delivered_again = DropQueuedAlreadyDelivered(sessions.front());
  RecoveryCounts counts;
  RestoreSession(sessions.front(), counts);
  if (Session* session = FindSession(client_id)) {
    for (uint64_t seq : delivered_again) store_->DeleteQueued(client_id, seq);
    if (!delivered_again.empty()) {
      spdlog::info("shard {}: the session of '{}' read from its partition held {} message(s) both queued and "
                   "already delivered; the queued copies were dropped",
                   config_.shard_id, client_id, delivered_again.size());
    }
    if (taken_from != 0 && taken_from != config_.node_id) {
      session->MarkTakenFrom(taken_from, loop_.clock().WallMs() + kTakenFromWindowMs);
    } else {
      // Read from the partition, its previous node not known here (the
      // claim's result was no longer kept) or this node's earlier process:
      // what a copy elsewhere hands on is offered once all the same.
      session->RememberOffers(loop_.clock().WallMs() + kTakenFromWindowMs);
    }
    const size_t queued_before = session->queued_messages();
    for (Delivery& delivery : carried) (void)Offer(*session, std::move(delivery));
    const size_t kept = session->queued_messages() - queued_before;
    if (kept != 0) {
      spdlog::info("shard {}: the copy of '{}' this node held before reading it from its partition had {} "
                   "delivery(ies) the partition's copy lacked; they are queued",
                   config_.shard_id, client_id, kept);
    }
    ReportGroupSessionArrived(*session);
  }
  // A stub of the id's earlier move away from here goes once the adopted
  // copy's subscriptions hold the routes (no route flaps in between).
  if (!moved_stubs_.empty()) EndMovedStub(client_id);
  ShardMetrics::Add(taken_over ? metrics_.sessions_taken_over : metrics_.sessions_adopted);
}

std::vector<uint64_t> ShardBroker::DropQueuedAlreadyDelivered(store::RecoveredSession& recovered) {
  // A session read from its partition can hold one message both in flight
  // (or past PUBREC, or completed) and queued: the copy that lost the
  // client id to another node wrote its in-flight record after that node
  // had queued the message, and the write landed once this node claimed
  // the id back (the partition fences writes by node: docs/partitions.md
  // "Late writes of a copy that lost its client id"). Sending the queued
  // copy would deliver the message a second time under another packet id,
  // which the client cannot recognise (a QoS 2 duplicate): it is dropped.
  // A retained copy (sent again by a subscribe) is not the same delivery.
  using Key = std::tuple<uint16_t, uint64_t, uint32_t>;
  auto key_of = [](const MessageId& id) { return Key{id.node, id.timestamp, id.sequence}; };
  std::set<Key> delivered;
  for (const auto& [packet_id, inflight] : recovered.inflight) {
    if (inflight.delivery.message) delivered.insert(key_of(inflight.delivery.message->id));
    if (inflight.released_id.timestamp != 0) delivered.insert(key_of(inflight.released_id));
  }
  for (const Session::Completed& completed : recovered.completed) delivered.insert(key_of(completed.id));
  delivered.erase(Key{0, 0, 0});  // no id: nothing to compare by
  std::vector<uint64_t> dropped;
  if (delivered.empty()) return dropped;
  std::vector<Delivery> kept;
  kept.reserve(recovered.queued.size());
  for (Delivery& delivery : recovered.queued) {
    if (delivery.message && !delivery.retain && delivery.message->id.timestamp != 0 &&
        delivered.count(key_of(delivery.message->id)) != 0) {
      dropped.push_back(delivery.store_seq);
      continue;
    }
    kept.push_back(std::move(delivery));
  }
  recovered.queued = std::move(kept);
  return dropped;
}

void ShardBroker::SessionCopyReplaced(const std::string& client_id, uint64_t fence) {
  // The old copy's changes the store flushed went to the cluster before
  // this (one thread, in order); those it had not flushed were dropped with
  // it (AdoptSession's DeleteSession), or are overwritten by the new copy's.
  if (cluster_ != nullptr) cluster_->SessionCopyReplaced(config_.shard_id, client_id, fence);
}

void ShardBroker::FlushStore() {
  if (store_) (void)store_->FlushNow();
}

void ShardBroker::AfterDurable(std::function<void()> fn) {
  if (store_) {
    store_->WhenDurable(std::move(fn));
  } else {
    fn();
  }
}

uint64_t ShardBroker::BeginSafe(SafeWaiter waiter) {
  const uint64_t token = next_safe_token_++;
  safe_waiters_.emplace(token, std::move(waiter));
  return token;
}

void ShardBroker::AddSafeStep(uint64_t token) { ++safe_waiters_.at(token).steps; }

void ShardBroker::OnForwardSafe(uint64_t token, bool full) {
  auto it = safe_waiters_.find(token);
  if (it == safe_waiters_.end()) return;
  it->second.full = it->second.full || full;
  if (--it->second.steps != 0) return;
  SafeWaiter waiter = std::move(it->second);
  safe_waiters_.erase(it);
  if (waiter.full && waiter.on_full) {
    waiter.on_full();
  } else {
    waiter.on_safe();
  }
}

void ShardBroker::PersistRetained(const Message& message) {
  // A clear [MQTT-3.3.1-10] is stored as a tombstone (the clearing message,
  // with its id), so a value still held from before it, here or on a node
  // that was down, cannot come back (RetainedStore). A clear without an id
  // has nothing to order by: the topic is deleted.
  if (message.PayloadSize() == 0 && message.id.timestamp == 0) {
    store_->DeleteRetained(message.topic);
  } else {
    store_->PutRetained(message);
  }
}

Expected<ShardBroker::RecoveryCounts, std::string> ShardBroker::Recover() {
  RecoveryCounts counts;
  if (!store_) return counts;
  auto loaded = store_->Load();
  if (!loaded) {
    return MakeError(fmt::format("shard {}: reading the store: {}", config_.shard_id, loaded.error().message));
  }
  counts.skipped = loaded->skipped_records;
  // In a cluster the registry decides whether they are still this node's.
  for (store::RecoveredSession& recovered : loaded->sessions) RestoreSession(recovered, counts, cluster_ != nullptr);
  const int64_t now = loop_.clock().WallMs();
  for (MessagePtr& message : loaded->retained) {
    const bool expired = message->properties.expiry_at_ms && *message->properties.expiry_at_ms <= now;
    if (expired || retained_.IsExpiredTombstone(*message, now)) {
      store_->DeleteRetained(message->topic);
      continue;
    }
    if (!retained_.Apply(message)) continue;
    Broadcast([message](ShardBroker& shard) { shard.ApplyRetained(message); });
    if (message->PayloadSize() != 0) ++counts.retained;
  }
  metrics_.retained_messages.store(retained_.size(), std::memory_order_relaxed);
  return counts;
}

void ShardBroker::RestoreSession(store::RecoveredSession& recovered, RecoveryCounts& counts, bool hold_will) {
  auto owned = std::make_unique<Session>(recovered.client_id, NewGeneration());
  Session& session = *owned;
  sessions_.emplace(recovered.client_id, std::move(owned));
  ShardMetrics::Add(metrics_.sessions);
  ++counts.sessions;
  // No store yet: what is restored is not written back.
  session.set_expiry_interval(recovered.record.expiry_interval);
  session.will() = std::move(recovered.record.will);
  for (const auto& [filter, options] : recovered.subscriptions) Subscribe(&session, filter, options);
  counts.subscriptions += recovered.subscriptions.size();
  for (Delivery& delivery : recovered.queued) session.RestoreQueued(std::move(delivery));
  ShardMetrics::Add(metrics_.queued_messages, recovered.queued.size());
  counts.queued += recovered.queued.size();
  for (auto& [packet_id, inflight] : recovered.inflight) {
    session.RestoreInflight(packet_id, std::move(inflight));
  }
  ShardMetrics::Add(metrics_.inflight_messages, recovered.inflight.size());
  counts.inflight += recovered.inflight.size();
  for (const Session::Completed& completed : recovered.completed) {
    session.RestoreCompleted(completed.packet_id, completed.id);
  }
  for (uint16_t packet_id : recovered.inbound_qos2) session.inbound_qos2().insert(packet_id);
  counts.inbound_qos2 += recovered.inbound_qos2.size();
  session.set_store(store_.get());
  // Shared deliveries tagged again; a member served here without its client
  // gives them up after the redelivery delay (shared_redelivery.cc).
  SharedSessionRestored(session, /*disconnected_member=*/!hold_will);

  // Expiry and will delay run from the stored disconnect; a session that
  // was connected when the node died lost its connection now.
  const int64_t now = loop_.clock().WallMs();
  const bool was_connected = recovered.record.disconnected_at_ms == 0;
  const int64_t disconnected_at = was_connected ? now : recovered.record.disconnected_at_ms;
  session.set_disconnected_at_ms(disconnected_at);
  if (was_connected) session.SaveRecord();
  int64_t will_delay_ms = -1;
  if (session.will()) {
    ++counts.wills;
    will_delay_ms = std::max<int64_t>(0, disconnected_at + int64_t{session.will()->delay_seconds} * 1000 - now);
  }
  if (hold_will) {
    unconfirmed_.push_back(recovered.client_id);
    recovered_seq_end_[recovered.client_id] = Unconfirmed{session.store_seq_mark(), session.generation()};
    will_delay_ms = -1;  // armed by ConfirmRecovered
  }
  std::optional<int64_t> expiry_ms;
  if (session.expiry_interval() != UINT32_MAX) {
    expiry_ms = std::max<int64_t>(0, disconnected_at + int64_t{session.expiry_interval()} * 1000 - now);
  }
  // Armed after the first loop iteration has applied the other shards'
  // recovered routes, so a will published at once still reaches them.
  loop_.Post(BoundToGeneration(session, [this, will_delay_ms, expiry_ms](Session& current) {
    if (will_delay_ms >= 0) ScheduleWill(current, will_delay_ms);
    if (expiry_ms) ScheduleExpiry(current, expiry_ms);
  }));
}

std::vector<Delivery> ShardBroker::LostToAnotherNode(const std::string& client_id) {
  Session* session = FindSession(client_id);
  if (session == nullptr) return {};
  DetachTakenOver(*session);
  session->will().reset();
  recovered_seq_end_.erase(client_id);
  std::vector<Delivery> orphans = TakeShared(*session, /*inflight=*/true, nullptr, /*keep_without_member=*/false);
  std::vector<Delivery> stale = StaleDeliveries(*session);
  session->set_store(nullptr);  // the partition's copy is another node's
  RemoveMovedSession(session, std::move(orphans));
  if (store_) store_->DeleteSession(client_id, /*replicate=*/false);
  ShardMetrics::Add(metrics_.sessions_stale_dropped);
  return stale;
}

std::vector<Delivery> ShardBroker::StaleDeliveries(Session& session) {
  std::vector<Delivery> stale;
  session.ForEachDelivery([&stale](Delivery& delivery) {
    if (!delivery.message || delivery.shared_key != nullptr || delivery.qos == QoS::kAtMostOnce) return;
    Delivery copy;
    copy.message = delivery.message;
    copy.qos = delivery.qos;
    copy.retain = delivery.retain;
    copy.subscription_ids = delivery.subscription_ids;
    stale.push_back(std::move(copy));
  });
  return stale;
}

bool ShardBroker::AcceptHandedOff(const std::string& client_id, std::vector<Delivery> deliveries,
                                  std::function<void()> done) {
  Session* session = FindSession(client_id);
  if (session == nullptr || !session->durable()) return false;
  for (Delivery& delivery : deliveries) {
    ShardMetrics::Add(metrics_.handed_off_in);
    (void)Offer(*session, std::move(delivery));
  }
  // Not behind this shard's earlier batches: one of them may be a refused
  // write held until a hand-off of its own is taken, perhaps by the very
  // node waiting for this answer.
  if (store_) {
    store_->WhenOwnWritesDurable(std::move(done));
  } else {
    done();
  }
  return true;
}

void ShardBroker::ConfirmRecovered(const std::string& client_id, bool ours) {
  const auto recovered_mark = recovered_seq_end_.extract(client_id);
  Session* session = FindSession(client_id);
  // Still this node's after its restart: what this node's earlier process
  // handed it is settled (its client may be back already).
  if (session != nullptr && ours) ReportGroupSessionArrived(*session);
  // Gone, or its client is back (the attach made its own claim, and its
  // disconnect armed its timers), or another copy replaced it: the answer
  // was about the session as recovered.
  if (session == nullptr || recovered_mark.empty() || session->generation() != recovered_mark.mapped().generation) {
    return;
  }
  if (ours) {
    ScheduleSharedRedelivery(*session);
    if (session->will()) {
      const int64_t now = loop_.clock().WallMs();
      const int64_t due = session->disconnected_at_ms() + int64_t{session->will()->delay_seconds} * 1000;
      ScheduleWill(*session, std::max<int64_t>(0, due - now));
    }
    return;
  }
  Renew(*session);  // its timers (expiry) no longer act
  session->will().reset();
  // Shared-group messages it was given since the restart (its routes were
  // back, so its groups picked it) are no other member's yet: they go to
  // another member. What it recovered, the node now serving the session
  // holds too.
  std::vector<Delivery> since_restart;
  {
    const uint64_t end = recovered_mark.mapped().seq_end;
    const size_t queued_before = session->queued_messages();
    since_restart = session->TakeDeliveries(
        [end](const Delivery& delivery) { return delivery.shared_key != nullptr && delivery.store_seq > end; },
        /*inflight=*/false);
    ShardMetrics::Sub(metrics_.queued_messages, queued_before - session->queued_messages());
  }
  session->set_store(nullptr);  // the partition's copy is another node's
  RemoveSession(session, /*session_ended=*/false, std::move(since_restart));
  if (store_) store_->DeleteSession(client_id, /*replicate=*/false);
  ShardMetrics::Add(metrics_.sessions_stale_dropped);
}

}  // namespace estuary::core
