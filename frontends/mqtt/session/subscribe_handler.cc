// SUBSCRIBE / SUBACK and UNSUBSCRIBE / UNSUBACK.
#include <algorithm>

#include "frontends/mqtt/session/connection.h"
#include "model/topic.h"

namespace estuary::mqtt {
namespace {

struct Granted {
  std::string filter;
  core::SubscriptionOptions options;
  core::SubscribeOutcome outcome = core::SubscribeOutcome::kAdded;
};

ReasonCode GrantedCode(QoS qos) {
  switch (qos) {
    case QoS::kAtMostOnce: return ReasonCode::kSuccess;
    case QoS::kAtLeastOnce: return ReasonCode::kGrantedQos1;
    case QoS::kExactlyOnce: return ReasonCode::kGrantedQos2;
  }
  return ReasonCode::kSuccess;
}

}  // namespace

ReasonCode MqttConnection::CheckFilter(const Subscription& subscription) {
  const std::string& filter = subscription.filter;
  if (IsSharedFilter(filter)) {
    if (!ParseSharedFilter(filter)) return ReasonCode::kTopicFilterInvalid;
    return ReasonCode::kSuccess;
  }
  if (!ValidateTopicFilter(filter)) return ReasonCode::kTopicFilterInvalid;
  return ReasonCode::kSuccess;
}

void MqttConnection::HandleSubscribe(const SubscribePacket& subscribe) {
  const auto& ids = subscribe.properties.subscription_identifiers;
  const uint32_t subscription_id = ids.empty() ? 0 : ids.front();
  const uint8_t maximum_qos = broker_.config().limits.maximum_qos;
  SubackPacket suback;
  suback.packet_id = subscribe.packet_id;
  std::vector<Granted> granted;
  for (const Subscription& subscription : subscribe.subscriptions) {
    if (v5() && subscription.options.no_local && IsSharedFilter(subscription.filter)) {
      Fail(ReasonCode::kProtocolError, "no local on a shared subscription [MQTT-3.8.3-4]");
      return;
    }
    const ReasonCode check = CheckFilter(subscription);
    if (IsError(check)) {
      suback.reasons.push_back(v5() ? check : ReasonCode::kUnspecifiedError);
      continue;
    }
    if (access_ && !access_->MaySubscribe(subscription.filter)) {
      suback.reasons.push_back(v5() ? ReasonCode::kNotAuthorized : ReasonCode::kUnspecifiedError);  // 3.x: 0x80
      continue;
    }
    core::SubscriptionOptions options;
    options.max_qos = static_cast<QoS>(std::min(subscription.options.qos, maximum_qos));
    options.no_local = subscription.options.no_local;
    options.retain_as_published = subscription.options.retain_as_published;
    options.retain_handling = static_cast<core::RetainHandling>(subscription.options.retain_handling);  // 0-2: the codec refused 3
    options.subscription_id = subscription_id;
    const core::SubscribeOutcome outcome = broker_.Subscribe(session_, subscription.filter, options);
    suback.reasons.push_back(GrantedCode(options.max_qos));
    granted.push_back({subscription.filter, options, outcome});
  }
  // SUBACK once every shard routes the new filters; retained messages after it.
  std::weak_ptr<MqttConnection> weak = weak_from_this();
  broker_.WhenRoutesVisible([weak, suback = std::move(suback), granted = std::move(granted)] {
    auto self = weak.lock();
    if (!self || self->state_ != State::kConnected || self->session_ == nullptr) return;
    self->Send(suback);
    for (const Granted& g : granted) {
      self->broker_.DeliverRetained(self->session_, g.filter, g.options, g.outcome);
    }
  });
}

void MqttConnection::HandleUnsubscribe(const UnsubscribePacket& unsubscribe) {
  UnsubackPacket unsuback;
  unsuback.packet_id = unsubscribe.packet_id;
  for (const std::string& filter : unsubscribe.filters) {
    if (CheckFilter(Subscription{filter, {}}) != ReasonCode::kSuccess) {
      unsuback.reasons.push_back(ReasonCode::kTopicFilterInvalid);
      continue;
    }
    const core::UnsubscribeOutcome outcome = broker_.Unsubscribe(session_, filter);
    unsuback.reasons.push_back(outcome == core::UnsubscribeOutcome::kRemoved ? ReasonCode::kSuccess
                                                                              : ReasonCode::kNoSubscriptionExisted);
  }
  std::weak_ptr<MqttConnection> weak = weak_from_this();
  broker_.WhenRoutesVisible([weak, unsuback = std::move(unsuback)] {
    auto self = weak.lock();
    if (self && self->state_ == State::kConnected) self->Send(unsuback);
  });
}

}  // namespace estuary::mqtt
