#include "cluster-core/broker/session.h"

#include <algorithm>
#include <utility>

#include "cluster-core/store/shard_store.h"

namespace estuary::core {
namespace {

// Deliveries staged beyond those in flight when the frontend gave no send
// window. Throughput per session is at most this many per batch (about two
// loop iterations and an fdatasync): 64 capped a persistent subscriber at
// about 10k msgs/s here, behind publishers paused by its queue.
constexpr size_t kStageAhead = 1024;

}  // namespace

Session::EnqueueResult Session::Enqueue(Delivery delivery, const SessionLimits& limits) {
  EnqueueResult result;
  if (delivery.qos == QoS::kAtMostOnce && !connected() && !limits.queue_qos0_offline) {
    ++dropped_;
    return result;
  }
  const size_t bytes = delivery.message->ApproximateBytes();
  while (OverLimits(bytes, limits)) {
    // One message larger than the byte limit never fits, whatever goes.
    if (limits.queue_overflow != QueueOverflow::kDropOldest || bytes > limits.max_queued_bytes ||
        !DropOldestUnstaged()) {
      ++dropped_;
      result.full = true;
      return result;
    }
    ++result.dropped_oldest;
  }
  queued_bytes_ += bytes;
  if (durable() && delivery.qos != QoS::kAtMostOnce) {
    delivery.store_seq = ++next_store_seq_;
    store_->PutQueued(client_id_, delivery.store_seq, delivery);
  }
  queue_.push_back(std::move(delivery));
  result.queued = true;
  return result;
}

bool Session::OverLimits(size_t more_bytes, const SessionLimits& limits) const {
  const size_t stretch = connected() ? size_t{kForwardWindow} * paused_publishers_.size() : 0;
  return queue_.size() >= limits.max_queued_messages + stretch || queued_bytes_ + more_bytes > limits.max_queued_bytes;
}

// The oldest queued delivery a connection has not been promised yet: past
// the staged ones (their packet ids and in-flight records exist), and not
// one whose group queue hand is still open (the queue counts it handed).
bool Session::DropOldestUnstaged() {
  for (size_t index = static_cast<size_t>(staged_end_ - queue_base_); index < queue_.size(); ++index) {
    if (queue_[index].hand_pending) continue;
    const auto position = queue_.begin() + static_cast<std::ptrdiff_t>(index);
    queued_bytes_ -= position->message->ApproximateBytes();
    if (durable() && position->store_seq != 0) store_->DeleteQueued(client_id_, position->store_seq);
    queue_.erase(position);
    ++dropped_;
    return true;
  }
  return false;
}

Delivery Session::PopQueued() {
  DropUnclaimed();
  Delivery front = std::move(queue_.front());
  queue_.pop_front();
  queued_bytes_ -= front.message->ApproximateBytes();
  if (queue_base_ < staged_end_) {
    // Staged: its in-flight record (durable) already replaced the queue record.
    const StagedId staged = staged_ids_.front();
    staged_ids_.pop_front();
    if (staged.packet_id != 0) {
      popped_ = Claim{staged.packet_id, staged.sent_order, PhaseFor(front.qos), head_handed_};
    }
  }
  head_handed_ = false;
  ++queue_base_;
  staged_end_ = std::max(staged_end_, queue_base_);
  released_end_ = std::max(released_end_, queue_base_);
  // Taken off the queue: either sent (and then stored as in flight by
  // AddInflight in the same loop iteration) or dropped.
  if (durable() && front.store_seq != 0) store_->DeleteQueued(client_id_, front.store_seq);
  front.store_seq = 0;
  return front;
}

void Session::AddInflight(uint16_t packet_id, InflightDelivery inflight) {
  if (popped_ && popped_->packet_id == packet_id) {
    // Claims the staged delivery just popped: its record is already durable.
    inflight.sent_order = popped_->sent_order;
    const bool same_phase = inflight.phase == popped_->phase;
    reserved_.erase(packet_id);
    popped_.reset();
    auto [it, added] = inflight_.insert_or_assign(packet_id, std::move(inflight));
    if (durable() && !same_phase) store_->PutInflight(client_id_, packet_id, it->second);
    return;
  }
  if (reserved_.count(packet_id) != 0) {
    // An id staged for a delivery still queued is taken for another one
    // (a frontend re-keying a delivery): that one is staged again.
    for (size_t i = 0; i < staged_ids_.size(); ++i) {
      if (staged_ids_[i].packet_id == packet_id) Restage(i);
    }
  }
  auto [it, added] = inflight_.insert_or_assign(packet_id, std::move(inflight));
  if (durable()) store_->PutInflight(client_id_, packet_id, it->second);
}

// --- staging: sync before send (see the header) --------------------------------

InflightPhase Session::PhaseFor(QoS qos) {
  return qos == QoS::kExactlyOnce ? InflightPhase::kAwaitingPubrec : InflightPhase::kAwaitingPuback;
}

bool Session::HasQueued() {
  DropUnclaimed();
  if (queue_.empty()) return false;
  if (!Gated()) return !queue_.front().hand_pending;
  StageAhead();
  return queue_base_ < released_end_;
}

void Session::StageAhead() {
  if (staging_) return;
  // Never more than the client's window (a restart resends every staged
  // delivery), and never more than kStageAhead beyond those in flight.
  const size_t ahead = inflight_.size() + kStageAhead;
  const size_t limit = send_window_ != 0 ? std::min(send_window_, ahead) : ahead;
  const uint64_t staged_before = staged_end_;
  bool wrote = false;
  while (staged_end_ < queue_base_ + queue_.size()) {
    Delivery& delivery = queue_[staged_end_ - queue_base_];
    if (delivery.hand_pending) break;  // in order: what follows waits with it
    if (delivery.qos == QoS::kAtMostOnce) {
      staged_ids_.push_back(StagedId{});
    } else {
      if (inflight_.size() + reserved_.size() >= limit) break;
      const uint16_t packet_id = FreshPacketId();
      if (packet_id == 0) break;
      reserved_.insert(packet_id);
      const uint64_t sent_order = NextSendOrder();
      const uint64_t store_seq = std::exchange(delivery.store_seq, 0);
      if (store_seq != 0) store_->DeleteQueued(client_id_, store_seq);
      store_->PutInflight(client_id_, packet_id, InflightDelivery{delivery, PhaseFor(delivery.qos), sent_order});
      staged_ids_.push_back(StagedId{packet_id, sent_order, store_seq});
      wrote = true;
    }
    ++staged_end_;
  }
  if (staged_end_ == staged_before) return;
  if (!wrote && released_end_ == staged_before) {
    released_end_ = staged_end_;  // only QoS 0 behind released entries: nothing to wait for
    return;
  }
  staging_ = true;  // a store with nothing pending runs the callback at once
  std::weak_ptr<Session*> alive = Alive();
  store_->WhenDurable([alive, epoch = stage_epoch_, end = staged_end_] {
    if (auto self = alive.lock(); self && *self) (*self)->OnStagedDurable(epoch, end);
  });
  staging_ = false;
}

std::weak_ptr<Session*> Session::Alive() {
  if (!self_) self_ = std::make_shared<Session*>(this);
  return self_;
}

void Session::OnStagedDurable(uint64_t epoch, uint64_t end) {
  if (epoch != stage_epoch_) return;
  released_end_ = std::max(released_end_, std::min(end, staged_end_));
  if (!staging_ && sink_ != nullptr && queue_base_ < released_end_) sink_->OnDeliveriesReady();
}

void Session::Restage(size_t index) {
  const uint16_t old_id = staged_ids_[index].packet_id;
  const uint16_t packet_id = FreshPacketId();
  reserved_.erase(old_id);
  if (head_handed_ && index == 0) head_handed_ = false;
  if (packet_id == 0) {
    // Out of ids: the delivery and everything after it go back to plain queued.
    ResetStaging(queue_base_ + index);
    return;
  }
  reserved_.insert(packet_id);
  staged_ids_[index].packet_id = packet_id;
  const Delivery& delivery = queue_[index];
  if (durable()) {
    store_->PutInflight(client_id_, packet_id,
                        InflightDelivery{delivery, PhaseFor(delivery.qos), staged_ids_[index].sent_order});
  }
  released_end_ = std::min(released_end_, queue_base_ + index);
  ++stage_epoch_;
  if (!durable()) return;
  std::weak_ptr<Session*> alive = Alive();
  store_->WhenDurable([alive, epoch = stage_epoch_, end = staged_end_] {
    if (auto self = alive.lock(); self && *self) (*self)->OnStagedDurable(epoch, end);
  });
}

void Session::DropUnclaimed() {
  if (!popped_) return;
  // Popped and never sent as in flight (expired, too large, presettled).
  reserved_.erase(popped_->packet_id);
  if (durable()) store_->DeleteInflight(client_id_, popped_->packet_id);
  popped_.reset();
}

void Session::ResetStaging(uint64_t from) {
  // Entries from `from` on are plain queued again. Their stored records are
  // gone with the session (durability lost) or rewritten by the caller.
  from = std::max(from, queue_base_);
  while (staged_end_ > from) {
    --staged_end_;
    const StagedId staged = staged_ids_.back();
    staged_ids_.pop_back();
    if (staged.packet_id == 0) continue;
    reserved_.erase(staged.packet_id);
    Delivery& delivery = queue_[staged_end_ - queue_base_];
    if (durable()) {
      // Back under its old queue key, so the queue keeps its order.
      store_->DeleteInflight(client_id_, staged.packet_id);
      delivery.store_seq = staged.store_seq != 0 ? staged.store_seq : ++next_store_seq_;
      store_->PutQueued(client_id_, delivery.store_seq, delivery);
    }
  }
  released_end_ = std::min(released_end_, staged_end_);
  ++stage_epoch_;
}

void Session::MarkReleased(uint16_t packet_id) {
  auto it = inflight_.find(packet_id);
  if (it == inflight_.end()) return;
  it->second.phase = InflightPhase::kAwaitingPubcomp;
  if (it->second.delivery.message) it->second.released_id = it->second.delivery.message->id;
  it->second.delivery.message.reset();  // [MQTT-4.3.3-4]
  if (durable()) store_->PutInflight(client_id_, packet_id, it->second);
}

bool Session::RemoveInflight(uint16_t packet_id) {
  auto it = inflight_.find(packet_id);
  if (it == inflight_.end()) return false;
  const bool completed = it->second.phase == InflightPhase::kAwaitingPubcomp && it->second.released_id.timestamp != 0;
  const MessageId id = it->second.released_id;
  inflight_.erase(it);
  if (!durable()) return true;
  if (completed) {
    KeepCompleted(packet_id, id);  // its marker replaces the in-flight record
  } else {
    store_->DeleteInflight(client_id_, packet_id);
  }
  return true;
}

void Session::KeepCompleted(uint16_t packet_id, const MessageId& id) {
  if (!completed_) completed_ = std::make_unique<std::deque<Completed>>();
  store_->PutCompleted(client_id_, packet_id, id);
  completed_->push_back(Completed{packet_id, id});
  while (completed_->size() > kCompletedRemembered) {
    const uint16_t oldest = completed_->front().packet_id;
    completed_->pop_front();
    // Its key holds the marker still unless the id went back into use.
    if (inflight_.count(oldest) == 0 && reserved_.count(oldest) == 0) store_->DeleteInflight(client_id_, oldest);
  }
}

void Session::ForgetCompleted(uint16_t packet_id) {
  // The id is used again: the record about to be written under it replaces
  // the marker.
  auto& completed = *completed_;
  for (auto it = completed.begin(); it != completed.end(); ++it) {
    if (it->packet_id == packet_id) {
      completed.erase(it);
      return;
    }
  }
}

void Session::RestoreCompleted(uint16_t packet_id, const MessageId& id) {
  if (!completed_) completed_ = std::make_unique<std::deque<Completed>>();
  completed_->push_back(Completed{packet_id, id});
}

void Session::AddInboundQos2(uint16_t packet_id) {
  if (inbound_qos2_.insert(packet_id).second && durable()) store_->PutInboundQos2(client_id_, packet_id);
}

bool Session::RemoveInboundQos2(uint16_t packet_id) {
  if (inbound_qos2_.erase(packet_id) == 0) return false;
  if (durable()) store_->DeleteInboundQos2(client_id_, packet_id);
  return true;
}

void Session::set_expiry_interval(uint32_t seconds) {
  const bool was_durable = durable();
  expiry_interval_ = seconds;
  if (was_durable && !durable()) {
    DropUnclaimed();
    ResetStaging(queue_base_);  // nothing stored any more: not durable
    completed_.reset();         // their markers go with the session's keys
    store_->DeleteSession(client_id_);
  } else if (!was_durable && durable()) {
    PersistAll();
  } else {
    SaveRecord();
  }
}

void Session::set_will(std::optional<WillMessage> will) {
  will_ = std::move(will);
  SaveRecord();
}

void Session::SaveRecord() {
  if (!durable()) return;
  store::SessionRecord record;
  record.expiry_interval = expiry_interval_;
  record.disconnected_at_ms = disconnected_at_ms_;
  record.will = will_;
  store_->PutSession(client_id_, record);
}

void Session::PersistAll() {
  SaveRecord();
  for (const auto& [filter, options] : subscriptions_) store_->PutSubscription(client_id_, filter, options);
  for (Delivery& delivery : queue_) {
    if (delivery.qos == QoS::kAtMostOnce) continue;
    delivery.store_seq = ++next_store_seq_;  // a new key: see ShardStore's "fresh" keys
    store_->PutQueued(client_id_, delivery.store_seq, delivery);
  }
  for (const auto& [packet_id, inflight] : inflight_) store_->PutInflight(client_id_, packet_id, inflight);
  for (uint16_t packet_id : inbound_qos2_) store_->PutInboundQos2(client_id_, packet_id);
}

void Session::RestoreQueued(Delivery delivery) {
  next_store_seq_ = std::max(next_store_seq_, delivery.store_seq);
  queued_bytes_ += delivery.message->ApproximateBytes();
  queue_.push_back(std::move(delivery));
}

void Session::RestoreInflight(uint16_t packet_id, InflightDelivery inflight) {
  send_order_ = std::max(send_order_, inflight.sent_order);
  last_packet_id_ = std::max(last_packet_id_, packet_id);
  inflight_.insert_or_assign(packet_id, std::move(inflight));
}

std::vector<Delivery> Session::TakeDeliveries(const std::function<bool(const Delivery&)>& take, bool inflight,
                                              bool sent_qos2) {
  auto wanted = [&take](const Delivery& delivery) {
    return delivery.message && delivery.qos != QoS::kAtMostOnce && take(delivery);
  };
  std::vector<Delivery> taken;
  if (inflight) {
    std::vector<std::pair<uint64_t, uint16_t>> order;
    for (const auto& [packet_id, entry] : inflight_) {
      const bool kept = entry.phase == InflightPhase::kAwaitingPubcomp ||
                        (!sent_qos2 && entry.phase == InflightPhase::kAwaitingPubrec);
      if (!kept && wanted(entry.delivery)) {
        order.emplace_back(entry.sent_order, packet_id);
      }
    }
    std::sort(order.begin(), order.end());
    for (const auto& [sent_order, packet_id] : order) {
      taken.push_back(std::move(inflight_.at(packet_id).delivery));
      RemoveInflight(packet_id);
    }
  }
  if (std::none_of(queue_.begin(), queue_.end(), wanted)) {
    ForgetOffered(taken);
    return taken;
  }
  // Staged entries carry reserved ids and in-flight records: back to plain
  // queued first, so entries can leave the middle of the queue.
  DropUnclaimed();
  ResetStaging(queue_base_);
  head_handed_ = false;
  std::deque<Delivery> kept;
  for (Delivery& delivery : queue_) {
    if (!wanted(delivery)) {
      kept.push_back(std::move(delivery));
      continue;
    }
    queued_bytes_ -= delivery.message->ApproximateBytes();
    if (durable() && delivery.store_seq != 0) store_->DeleteQueued(client_id_, delivery.store_seq);
    delivery.store_seq = 0;
    delivery.hand_pending = false;  // its Ack is on its way all the same
    taken.push_back(std::move(delivery));
  }
  queue_.swap(kept);
  ForgetOffered(taken);
  return taken;
}

void Session::ForgetOffered(const std::vector<Delivery>& taken) {
  // What leaves the session may come back to it (a group's other member
  // turned it away): then it is new here, not a replay of what it holds.
  if (!remembering_) return;
  for (const Delivery& delivery : taken) offered_.erase(delivery.message->id);
}

// Remembered ids are bounded: past this many the window closes early
// (later messages are no longer checked: one that arrives both ways then
// comes twice, which QoS 1 allows).
constexpr size_t kMaxOfferedRemembered = 1u << 18;

void Session::MarkTakenFrom(uint16_t node, int64_t until_ms) {
  taken_from_ = node;
  taken_until_ms_ = until_ms;
  RememberOffers(until_ms);
}

void Session::RememberOffers(int64_t until_ms) {
  remember_until_ms_ = until_ms;
  remembering_ = true;
  offered_.clear();
  ForEachDelivery([this](Delivery& delivery) {
    if (delivery.message) offered_.insert(delivery.message->id);
  });
  // What the client has had already: past PUBREC, and completed.
  for (const auto& [packet_id, entry] : inflight_) {
    if (!entry.delivery.message && entry.released_id.timestamp != 0) offered_.insert(entry.released_id);
  }
  if (completed_) {
    for (const Completed& completed : *completed_) offered_.insert(completed.id);
  }
}

bool Session::OfferedBefore(const MessageId& id, int64_t now_ms) {
  if (!remembering_) return false;
  if (now_ms >= remember_until_ms_ || offered_.size() >= kMaxOfferedRemembered) {
    remembering_ = false;
    offered_ = {};
    return false;
  }
  return !offered_.insert(id).second;
}

bool Session::ReleaseHanded(const MessageId& id) {
  for (Delivery& delivery : queue_) {
    if (delivery.hand_pending && delivery.message && delivery.message->id == id) {
      delivery.hand_pending = false;
      return true;
    }
  }
  return false;
}

void Session::set_access(std::shared_ptr<ClientAccess> access) {
  access_ = std::move(access);
  if (!access_) return;
  ForEachDelivery([](Delivery& delivery) { delivery.access_checked = false; });
}

void Session::ForEachDelivery(const std::function<void(Delivery&)>& fn) {
  for (Delivery& delivery : queue_) fn(delivery);
  for (auto& [packet_id, entry] : inflight_) fn(entry.delivery);
}

uint16_t Session::NextPacketId() {
  // A staged delivery's id: after its pop (MQTT's order) or, for the
  // released head, before it (AMQP's order).
  if (popped_ && !popped_->handed) {
    popped_->handed = true;
    return popped_->packet_id;
  }
  if (!popped_ && !head_handed_ && queue_base_ < released_end_ && queue_base_ < staged_end_ &&
      staged_ids_.front().packet_id != 0) {
    head_handed_ = true;
    return staged_ids_.front().packet_id;
  }
  return FreshPacketId();
}

uint16_t Session::FreshPacketId() {
  if (inflight_.size() + reserved_.size() >= 65535) return 0;
  do {
    last_packet_id_ = static_cast<uint16_t>(last_packet_id_ == 65535 ? 1 : last_packet_id_ + 1);
  } while (inflight_.count(last_packet_id_) != 0 || reserved_.count(last_packet_id_) != 0);
  if (completed_ && !completed_->empty()) ForgetCompleted(last_packet_id_);
  return last_packet_id_;
}

}  // namespace estuary::core
