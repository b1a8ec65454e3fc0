#include "cluster-core/broker/session.h"

#include <utility>

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
  queue_.push_back(std::move(delivery));
  return true;
}

Delivery Session::PopQueued() {
  Delivery front = std::move(queue_.front());
  queue_.pop_front();
  queued_bytes_ -= front.message->ApproximateBytes();
  return front;
}

uint16_t Session::NextPacketId() {
  if (inflight_.size() >= 65535) return 0;
  do {
    last_packet_id_ = static_cast<uint16_t>(last_packet_id_ == 65535 ? 1 : last_packet_id_ + 1);
  } while (inflight_.count(last_packet_id_) != 0);
  return last_packet_id_;
}

}  // namespace estuary::core
