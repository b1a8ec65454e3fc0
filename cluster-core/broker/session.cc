#include "cluster-core/broker/session.h"

#include <algorithm>
#include <utility>

#include "cluster-core/store/shard_store.h"

namespace estuary::core {

bool Session::Enqueue(Delivery delivery, const SessionLimits& limits) {
  if (delivery.qos == QoS::kAtMostOnce && !connected() && !limits.queue_qos0_offline) {
    ++dropped_;
    return false;
  }
  const size_t bytes = delivery.message->ApproximateBytes();
  const size_t stretch = connected() ? size_t{kForwardWindow} * paused_publishers_.size() : 0;
  if (queue_.size() >= limits.max_queued_messages + stretch ||
      queued_bytes_ + bytes > limits.max_queued_bytes) {
    ++dropped_;
    return false;
  }
  queued_bytes_ += bytes;
  if (durable() && delivery.qos != QoS::kAtMostOnce) {
    delivery.store_seq = ++next_store_seq_;
    store_->PutQueued(client_id_, delivery.store_seq, delivery);
  }
  queue_.push_back(std::move(delivery));
  return true;
}

Delivery Session::PopQueued() {
  Delivery front = std::move(queue_.front());
  queue_.pop_front();
  queued_bytes_ -= front.message->ApproximateBytes();
  // Taken off the queue: either sent (and then stored as in flight by
  // AddInflight in the same loop iteration) or dropped.
  if (durable() && front.store_seq != 0) store_->DeleteQueued(client_id_, front.store_seq);
  front.store_seq = 0;
  return front;
}

void Session::AddInflight(uint16_t packet_id, InflightDelivery inflight) {
  auto [it, added] = inflight_.insert_or_assign(packet_id, std::move(inflight));
  if (durable()) store_->PutInflight(client_id_, packet_id, it->second);
}

void Session::MarkReleased(uint16_t packet_id) {
  auto it = inflight_.find(packet_id);
  if (it == inflight_.end()) return;
  it->second.phase = InflightPhase::kAwaitingPubcomp;
  it->second.delivery.message.reset();  // [MQTT-4.3.3-4]
  if (durable()) store_->PutInflight(client_id_, packet_id, it->second);
}

bool Session::RemoveInflight(uint16_t packet_id) {
  if (inflight_.erase(packet_id) == 0) return false;
  if (durable()) store_->DeleteInflight(client_id_, packet_id);
  return true;
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

uint16_t Session::NextPacketId() {
  if (inflight_.size() >= 65535) return 0;
  do {
    last_packet_id_ = static_cast<uint16_t>(last_packet_id_ == 65535 ? 1 : last_packet_id_ + 1);
  } while (inflight_.count(last_packet_id_) != 0);
  return last_packet_id_;
}

}  // namespace estuary::core
