// Client -> server: PUBLISH and the acknowledgements of server -> client
// deliveries (PUBACK, PUBREC, PUBREL, PUBCOMP).
#include <spdlog/spdlog.h>

#include "frontends/mqtt/session/connection.h"
#include "model/topic.h"

namespace estuary::mqtt {
namespace {

using core::ShardMetrics;

MessageProperties ToMessageProperties(Properties& p, int64_t now_wall_ms) {
  MessageProperties out;
  out.content_type = std::move(p.content_type);
  out.response_topic = std::move(p.response_topic);
  out.correlation_data = std::move(p.correlation_data);
  out.payload_format = p.payload_format_indicator;
  if (p.message_expiry_interval) {
    out.expiry_at_ms = now_wall_ms + int64_t{*p.message_expiry_interval} * 1000;
  }
  out.user_properties.reserve(p.user_properties.size());
  for (auto& [key, value] : p.user_properties) {
    out.user_properties.push_back({std::move(key), std::move(value)});
  }
  return out;
}

}  // namespace

bool MqttConnection::ResolveTopicAlias(PublishPacket& publish) {
  if (!v5() || !publish.properties.topic_alias) return true;
  const uint16_t alias = *publish.properties.topic_alias;
  if (alias == 0 || alias > broker_.config().limits.topic_alias_maximum) {
    Fail(ReasonCode::kTopicAliasInvalid, "topic alias out of range [MQTT-3.3.2-8, -9]");
    return false;
  }
  if (inbound_aliases_.size() <= alias) inbound_aliases_.resize(size_t{alias} + 1);
  if (publish.topic.empty()) {
    if (inbound_aliases_[alias].empty()) {
      Fail(ReasonCode::kProtocolError, "unknown topic alias");
      return false;
    }
    publish.topic = inbound_aliases_[alias];
  } else {
    inbound_aliases_[alias] = publish.topic;
  }
  return true;
}

void MqttConnection::HandlePublish(PublishPacket& publish) {
  if (!ResolveTopicAlias(publish)) return;
  const core::BrokerLimits& limits = broker_.config().limits;
  if (!ValidateTopicName(publish.topic)) {
    Fail(ReasonCode::kTopicNameInvalid, "invalid topic name [MQTT-3.3.2-2]");
    return;
  }
  if (publish.qos > limits.maximum_qos) {
    Fail(ReasonCode::kQosNotSupported, "QoS above the maximum [MQTT-3.2.2-11]");
    return;
  }
  if (publish.retain && !limits.retain_available) {
    Fail(ReasonCode::kRetainNotSupported, "retain is not available [MQTT-3.2.2-14]");
    return;
  }
  if (publish.properties.response_topic && !ValidateTopicName(*publish.properties.response_topic)) {
    Fail(ReasonCode::kProtocolError, "response topic is not a topic name [MQTT-3.3.2-14]");
    return;
  }
  if (!publish.properties.subscription_identifiers.empty()) {
    Fail(ReasonCode::kProtocolError, "subscription identifier from a client [MQTT-3.3.4-6]");
    return;
  }
  if (access_ && !access_->MayPublish(publish.topic)) {
    RefusePublish(publish);
    return;
  }
  const uint16_t packet_id = publish.packet_id;
  if (v5() && publish.properties.payload_format_indicator.value_or(0) == 1 &&
      !IsValidMqttUtf8(publish.payload)) {
    if (publish.qos == 1) SendAck(PacketType::kPuback, packet_id, ReasonCode::kPayloadFormatInvalid);
    if (publish.qos == 2) SendAck(PacketType::kPubrec, packet_id, ReasonCode::kPayloadFormatInvalid);
    return;
  }
  ShardMetrics::Add(broker_.metrics().messages_in);
  if (publish.qos == 2) {
    auto& pending = session_->inbound_qos2();
    if (pending.count(packet_id) != 0) {  // a retry: already taken [MQTT-4.3.3-9]
      SendAckWhenDurable(PacketType::kPubrec, packet_id, ReasonCode::kSuccess);
      return;
    }
    if (pending.size() >= limits.receive_maximum) {
      Fail(ReasonCode::kReceiveMaximumExceeded, "more QoS 2 publishes in flight than receive maximum");
      return;
    }
    session_->AddInboundQos2(packet_id);
  }

  auto message = std::make_shared<Message>();
  message->id = broker_.NextMessageId();
  message->topic = std::move(publish.topic);
  message->payload = MakePayload(std::move(publish.payload));
  message->properties = ToMessageProperties(publish.properties, broker_.loop().clock().WallMs());
  message->qos = static_cast<QoS>(publish.qos);
  message->retain = publish.retain;
  message->origin = Origin{Protocol::kMqtt, client_id_, broker_.config().node_id};

  if (publish.qos == 0) {
    broker_.Publish(std::move(message), {}, flow_id_);
    return;
  }
  const PacketType reply = publish.qos == 1 ? PacketType::kPuback : PacketType::kPubrec;
  std::weak_ptr<MqttConnection> weak = weak_from_this();
  auto acknowledge = [weak, reply, packet_id] {
    auto self = weak.lock();
    if (self && self->state_ == State::kConnected) {
      self->SendAck(reply, packet_id, ReasonCode::kSuccess);
    }
  };
  std::function<void()> on_full;
  if (limits.session.queue_overflow == core::QueueOverflow::kReject) {
    on_full = [weak, reply, packet_id, acknowledge] {
      if (auto self = weak.lock()) self->AnswerQueueFull(reply, packet_id, acknowledge);
    };
  }
  broker_.Publish(std::move(message), std::move(acknowledge), flow_id_, std::move(on_full));
}

// --queue-overflow reject: a matching session's queue was full. MQTT 5 is
// told (0x97 Quota exceeded; a PUBREC with a reason of 0x80 or more ends
// the QoS 2 exchange, MQTT 5.0 section 4.3.3: its packet id is free again); 3.1.1 has no
// negative acknowledgement: acknowledged as under drop-new, and counted.
void MqttConnection::AnswerQueueFull(PacketType reply, uint16_t packet_id, const std::function<void()>& acknowledge) {
  if (state_ != State::kConnected) return;
  if (!v5()) {
    ShardMetrics::Add(broker_.metrics().publishes_acknowledged_queue_full);
    acknowledge();
    return;
  }
  ShardMetrics::Add(broker_.metrics().publishes_rejected_queue_full);
  if (reply == PacketType::kPubrec) session_->RemoveInboundQos2(packet_id);
  SendAck(reply, packet_id, ReasonCode::kQuotaExceeded);
}

void MqttConnection::RefusePublish(const PublishPacket& publish) {
  spdlog::debug("mqtt: client={} address={} PUBLISH to '{}' denied by the ACL", client_id_, stream_.peer_address(),
                publish.topic);
  // 3.x has no refusal: acknowledged as usual (SendAck sends success), and a
  // QoS 2 PUBREL is answered with PUBCOMP as for any unknown packet id.
  if (publish.qos == 1) SendAck(PacketType::kPuback, publish.packet_id, ReasonCode::kNotAuthorized);
  if (publish.qos == 2) SendAck(PacketType::kPubrec, publish.packet_id, ReasonCode::kNotAuthorized);
}

void MqttConnection::HandlePuback(const AckPacket& ack) {
  auto& inflight = session_->inflight();
  auto it = inflight.find(ack.packet_id);
  if (it == inflight.end() || it->second.phase != core::InflightPhase::kAwaitingPuback) {
    spdlog::debug("mqtt: client={} address={} PUBACK for unknown packet id {}", client_id_, stream_.peer_address(),
                  ack.packet_id);
    return;
  }
  session_->RemoveInflight(ack.packet_id);
  ShardMetrics::Sub(broker_.metrics().inflight_messages);
  PumpDeliveries();
}

void MqttConnection::HandlePubrec(const AckPacket& ack) {
  auto& inflight = session_->inflight();
  auto it = inflight.find(ack.packet_id);
  if (it == inflight.end()) {
    SendAck(PacketType::kPubrel, ack.packet_id, ReasonCode::kPacketIdentifierNotFound);
    return;
  }
  if (IsError(ack.reason)) {  // the receiver refused it: the exchange ends here
    session_->RemoveInflight(ack.packet_id);
    ShardMetrics::Sub(broker_.metrics().inflight_messages);
    PumpDeliveries();
    return;
  }
  session_->MarkReleased(ack.packet_id);  // [MQTT-4.3.3-4] the message itself is no longer needed
  SendAckWhenDurable(PacketType::kPubrel, ack.packet_id, ReasonCode::kSuccess);
}

void MqttConnection::HandlePubrel(const AckPacket& ack) {
  const bool known = session_->RemoveInboundQos2(ack.packet_id);
  SendAckWhenDurable(PacketType::kPubcomp, ack.packet_id,
                     known ? ReasonCode::kSuccess : ReasonCode::kPacketIdentifierNotFound);
}

void MqttConnection::HandlePubcomp(const AckPacket& ack) {
  auto& inflight = session_->inflight();
  auto it = inflight.find(ack.packet_id);
  if (it == inflight.end() || it->second.phase != core::InflightPhase::kAwaitingPubcomp) {
    spdlog::debug("mqtt: client={} address={} PUBCOMP for unknown packet id {}", client_id_, stream_.peer_address(),
                  ack.packet_id);
    return;
  }
  session_->RemoveInflight(ack.packet_id);
  ShardMetrics::Sub(broker_.metrics().inflight_messages);
  PumpDeliveries();
}

void MqttConnection::SendAckWhenDurable(PacketType type, uint16_t packet_id, ReasonCode reason) {
  std::weak_ptr<MqttConnection> weak = weak_from_this();
  broker_.AfterDurable([weak, type, packet_id, reason] {
    auto self = weak.lock();
    if (self && self->state_ == State::kConnected) self->SendAck(type, packet_id, reason);
  });
}

void MqttConnection::SendAck(PacketType type, uint16_t packet_id, ReasonCode reason) {
  AckPacket ack;
  ack.type = type;
  ack.packet_id = packet_id;
  ack.reason = v5() ? reason : ReasonCode::kSuccess;
  Send(ack);
}

}  // namespace estuary::mqtt
