// Server -> client: deliveries pulled from the session within the client's
// receive maximum, and the redelivery of in-flight messages on resume.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "frontends/mqtt/codec/encoder.h"
#include "frontends/mqtt/session/connection.h"

namespace estuary::mqtt {
namespace {

using core::ShardMetrics;

}  // namespace

void MqttConnection::OnDeliveriesReady() {
  // Deliver at once: the stream batches everything written in this loop
  // iteration into one write, so there is nothing to gain by deferring, and
  // the session queue then only holds what the socket or the client's
  // receive maximum cannot take yet.
  if (pumping_ || state_ != State::kConnected) return;
  PumpDeliveries();
}

void MqttConnection::OnWritable() {
  PumpDeliveries();
  UpdateReading();
}

void MqttConnection::PumpDeliveries() {
  if (state_ != State::kConnected || session_ == nullptr || pumping_) return;
  pumping_ = true;
  core::ShardMetrics& metrics = broker_.metrics();
  const int64_t now = broker_.loop().clock().WallMs();
  size_t sent = 0;
  // Stop only once past the stream's high watermark, so that it reports on_drain.
  while (session_->HasQueued() && stream_.queued_bytes() <= kOutputHighWatermark) {
    const core::Delivery& next = session_->PeekQueued();
    if (next.qos != QoS::kAtMostOnce && session_->inflight().size() >= client_receive_maximum_) break;
    core::Delivery delivery = session_->PopQueued();
    broker_.OnDequeued(*session_);
    const auto& expiry = delivery.message->properties.expiry_at_ms;
    if (expiry && *expiry <= now) {
      ShardMetrics::Add(metrics.messages_dropped);
      continue;
    }
    if (!MayDeliver(delivery)) continue;
    if (delivery.qos == QoS::kAtMostOnce) {
      sent += SendDelivery(delivery, 0, false) ? 1 : 0;
      continue;
    }
    const uint16_t packet_id = session_->NextPacketId();
    if (!SendDelivery(delivery, packet_id, false)) continue;
    const auto phase = delivery.qos == QoS::kAtLeastOnce ? core::InflightPhase::kAwaitingPuback
                                                         : core::InflightPhase::kAwaitingPubrec;
    session_->AddInflight(packet_id,
                          core::InflightDelivery{std::move(delivery), phase, session_->NextSendOrder()});
    ShardMetrics::Add(metrics.inflight_messages);
    ++sent;
  }
  pumping_ = false;
  if (sent > 0) stream_.Flush();
}

bool MqttConnection::MayDeliver(const core::Delivery& delivery) {
  return delivery.access_checked || !access_ || access_->MayReceive(delivery.message->topic);
}

bool MqttConnection::SendDelivery(const core::Delivery& delivery, uint16_t packet_id, bool dup) {
  const Message& message = *delivery.message;
  PublishPacket header;
  header.dup = dup;
  header.qos = static_cast<uint8_t>(delivery.qos);
  header.retain = delivery.retain;
  header.packet_id = packet_id;
  header.topic = message.topic;
  if (v5()) {
    Properties& p = header.properties;
    const MessageProperties& m = message.properties;
    p.payload_format_indicator = m.payload_format;
    if (m.expiry_at_ms) {
      // [MQTT-3.3.2-6] the interval sent is what remains of it.
      const int64_t remaining_ms = *m.expiry_at_ms - broker_.loop().clock().WallMs();
      // A delivery already started is finished even if it expired since
      // [MQTT-4.3.3-7]: a resend carries the smallest interval, 1 s.
      if (remaining_ms <= 0 && !dup) return false;
      p.message_expiry_interval = static_cast<uint32_t>(std::max<int64_t>(1, (remaining_ms + 999) / 1000));
    }
    p.content_type = m.content_type;
    p.response_topic = m.response_topic;
    p.correlation_data = m.correlation_data;
    p.user_properties.reserve(m.user_properties.size());
    for (const auto& property : m.user_properties) {
      p.user_properties.emplace_back(property.key, property.value);
    }
    p.subscription_identifiers = delivery.subscription_ids;
    if (client_topic_alias_maximum_ > 0) {
      auto it = outbound_aliases_.find(message.topic);
      if (it != outbound_aliases_.end()) {
        p.topic_alias = it->second;
        header.topic.clear();
      } else if (outbound_aliases_.size() < client_topic_alias_maximum_) {
        const auto alias = static_cast<uint16_t>(outbound_aliases_.size() + 1);
        outbound_aliases_.emplace(message.topic, alias);
        p.topic_alias = alias;
      }
    }
  }
  const std::string_view payload = message.payload ? std::string_view(*message.payload) : std::string_view();
  const size_t size = EncodedPublishSize(header, payload.size(), version_);
  if (size > client_max_packet_size_) {
    // [MQTT-3.1.2-25] too large for the client: discard as if delivered.
    spdlog::debug("mqtt: client={} address={} dropping a {} byte message over its maximum packet size",
                  client_id_, stream_.peer_address(), size);
    ShardMetrics::Add(broker_.metrics().messages_dropped);
    if (header.properties.topic_alias && !header.topic.empty()) outbound_aliases_.erase(message.topic);
    return false;
  }
  EncodePublish(header, payload, version_, stream_.output());
  ShardMetrics::Add(broker_.metrics().messages_out);
  ShardMetrics::Add(broker_.metrics().bytes_out, size);
  return true;
}

void MqttConnection::ResendInflight() {
  // [MQTT-4.4.0-1] unacknowledged PUBLISH and PUBREL are sent again, in the
  // order first sent [MQTT-4.6.0-1] (packet ids may have wrapped around).
  auto& inflight = session_->inflight();
  std::vector<std::pair<uint64_t, uint16_t>> order;
  order.reserve(inflight.size());
  for (const auto& [packet_id, entry] : inflight) order.emplace_back(entry.sent_order, packet_id);
  std::sort(order.begin(), order.end());
  for (const auto& [sent_order, packet_id] : order) {
    auto it = inflight.find(packet_id);
    if (it->second.phase == core::InflightPhase::kAwaitingPubcomp) {
      SendAck(PacketType::kPubrel, packet_id, ReasonCode::kSuccess);
    } else if (!MayDeliver(it->second.delivery) || !SendDelivery(it->second.delivery, packet_id, true)) {
      session_->RemoveInflight(packet_id);
      ShardMetrics::Sub(broker_.metrics().inflight_messages);
    }
  }
  stream_.Flush();
}

}  // namespace estuary::mqtt
