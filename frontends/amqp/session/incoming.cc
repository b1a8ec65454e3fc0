// Client senders: messages in, published to the broker. Credit is granted
// explicitly, bounded by the broker's receive maximum and withheld while a
// congested subscriber has paused this connection (flow_control.h).
#include <proton/delivery.h>
#include <proton/disposition.h>
#include <proton/error_condition.hpp>
#include <proton/receiver_options.hpp>
#include <proton/target.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "frontends/amqp/mapping/mapping.h"
#include "frontends/amqp/session/c_access.h"
#include "frontends/amqp/session/links.h"
#include "model/topic.h"

namespace estuary::amqp {
namespace {

using core::ShardMetrics;

}  // namespace

void AmqpConnection::on_receiver_open(proton::receiver& receiver) {
  if (handed_off_) {
    Defer([this, receiver] { OpenIncoming(receiver); });
    return;
  }
  OpenIncoming(receiver);
}

bool AmqpConnection::RefuseLink(proton::link link, const char* condition, const std::string& description) {
  spdlog::debug("amqp: client={} address={} link '{}' refused: {} ({})", ClientWord(), sasl_.peer_address, link.name(),
                condition, description);
  ShardMetrics::Add(broker_->metrics().protocol_errors);
  // Proton sends our attach, then the detach carrying the error (§2.6.3).
  link.close(proton::error_condition(condition, description));
  return false;
}

void AmqpConnection::OpenIncoming(proton::receiver receiver) {
  if (state_ != State::kOpen) return;
  pn_link_t* link = CObject::Of(receiver);
  if (link_count() >= settings_.max_links) {
    RefuseLink(receiver, kResourceLimitExceeded, "too many links on this connection");
    return;
  }
  proton::target target = receiver.target();
  if (target.dynamic()) {
    RefuseLink(receiver, kNotImplemented, "dynamic targets are not supported; send to a topic");
    return;
  }
  const std::string topic(TopicOfAddress(target.address()));
  if (!topic.empty() && !ValidateTopicName(topic)) {
    RefuseLink(receiver, kInvalidField, "target address '" + topic + "' is not a valid topic name");
    return;
  }
  if (!topic.empty() && access_ && !access_->MayPublish(topic)) {
    RefuseLink(receiver, kUnauthorizedAccess, "the ACL does not allow publishing to '" + topic + "'");
    return;
  }
  // §2.7.3: our attach states the mode we use. rcv-settle-mode second
  // (exactly once, docs/amqp.md "Exactly-once links") is kept unless the
  // sender settles everything as sent, where there is nothing to keep.
  const bool second =
      pn_link_remote_rcv_settle_mode(link) == PN_RCV_SECOND && pn_link_remote_snd_settle_mode(link) != PN_SND_SETTLED;
  pn_link_set_rcv_settle_mode(link, second ? PN_RCV_SECOND : PN_RCV_FIRST);
  pn_link_set_snd_settle_mode(link, pn_link_remote_snd_settle_mode(link));
  pn_link_set_max_message_size(link, broker_->config().limits.max_packet_size);
  receiver.open(proton::receiver_options().credit_window(0).auto_accept(false));
  auto owned = std::make_unique<IncomingLink>(receiver);
  owned->topic = topic;
  if (second) {
    // A link of this name detached before with deliveries unsettled is
    // recovered: its kept tags apply to the transfers sent again (§3.4.6).
    owned->ledger = ledger_;
    owned->record = ledger_->Attach(container_id_, receiver.name(), weak_from_this());
    owned->generation = owned->record->generation;
    owned->serial = ++next_link_serial_;
  }
  IncomingLink& state = *owned;
  incoming_[link] = std::move(owned);
  TopUpCredit(state);
}

void AmqpConnection::TopUpCredit(IncomingLink& link) {
  if (ingress_pauses_ > 0 || state_ != State::kOpen || !link.receiver.active()) return;
  const uint32_t window = std::max<uint32_t>(
      1, std::min<uint32_t>(settings_.link_credit, broker_->config().limits.receive_maximum));
  // Mode second: a delivery takes its place in the window until the client settles it.
  const size_t outstanding = link.second() ? link.held.size() : link.awaiting.size();
  const uint64_t used = static_cast<uint64_t>(std::max(0, link.receiver.credit())) + outstanding;
  if (used * 2 > window) return;  // top up below half the window: fewer flow frames
  link.receiver.add_credit(static_cast<int>(window - used));
}

void AmqpConnection::Reject(proton::delivery& delivery, const std::string& condition,
                            const std::string& description) {
  pn_delivery_t* d = CObject::Of(delivery);
  pn_condition_t* error = pn_disposition_condition(pn_delivery_local(d));
  pn_condition_set_name(error, condition.c_str());
  pn_condition_set_description(error, description.c_str());
  pn_delivery_update(d, PN_REJECTED);
  pn_delivery_settle(d);
}

void AmqpConnection::on_message(proton::delivery& delivery, proton::message& message) {
  pn_link_t* link = CObject::Of(delivery.receiver());
  auto it = incoming_.find(link);
  if (it == incoming_.end() || state_ != State::kOpen) {
    if (!delivery.settled()) delivery.release();
    return;
  }
  IncomingLink& in = *it->second;
  const bool settled = delivery.settled();
  const core::BrokerLimits& limits = broker_->config().limits;
  std::string tag;
  if (in.second() && !settled) {
    tag = DeliveryTag(delivery);
    if (AnswerResend(in, delivery, tag)) return;
    if (!MakeRoom(in)) {
      in.closed = true;  // ended by us: its state goes
      in.receiver.close(proton::error_condition(
          kResourceLimitExceeded, fmt::format("more than {} deliveries unsettled by the client on this link "
                                              "(rcv-settle-mode second): settle them first",
                                              ledger_->max_per_link())));
      incoming_.erase(it);
      return;
    }
  }
  // An anonymous relay (no target address) sends each message to its `to`.
  const std::string relay_topic = in.topic.empty() ? std::string(TopicOfAddress(message.to())) : std::string();
  InboundContext context;
  context.topic = in.topic.empty() ? relay_topic : in.topic;
  context.container_id = container_id_;
  context.node = broker_->config().node_id;
  context.settled = settled;
  context.now_ms = broker_->loop().clock().WallMs();
  if (!relay_topic.empty() && access_ && !access_->MayPublish(relay_topic)) {
    ShardMetrics::Add(broker_->metrics().protocol_errors);
    if (!settled) Refuse(in, delivery, tag, kUnauthorizedAccess, "the ACL does not allow publishing to '" + relay_topic + "'");
    TopUpCredit(in);
    return;
  }
  auto mapped = ToModel(message, context);
  if (!mapped) {
    ShardMetrics::Add(broker_->metrics().protocol_errors);
    if (!settled) Refuse(in, delivery, tag, mapped.error().condition, mapped.error().description);
    TopUpCredit(in);
    return;
  }
  if (mapped->PayloadSize() > limits.max_packet_size) {
    // §2.7.3: a message over the link's max-message-size ends the link.
    in.closed = true;
    in.receiver.close(proton::error_condition(kMessageSizeExceeded, "message larger than the node's maximum"));
    incoming_.erase(it);
    return;
  }
  // Mode second publishes exactly once: QoS 2 to the broker (docs/mapping.md).
  if (in.second() && !settled) mapped->qos = std::min(QoS::kExactlyOnce, static_cast<QoS>(limits.maximum_qos));
  if (!settled && mapped->qos > static_cast<QoS>(limits.maximum_qos)) mapped->qos = QoS::kAtMostOnce;
  ShardMetrics::Add(broker_->metrics().messages_in);
  if (publish_limited_) SpendPublishBudget(mapped->PayloadSize());
  mapped->id = broker_->NextMessageId();
  auto published = std::make_shared<Message>(std::move(*mapped));
  if (settled) {
    broker_->Publish(std::move(published), {}, flow_id_);
    TopUpCredit(in);
    return;
  }
  if (in.second()) {
    PublishOnce(in, delivery, tag, std::move(published));
    return;
  }
  const uint64_t sequence = ++next_sequence_;
  in.awaiting.emplace(sequence, delivery);
  std::weak_ptr<AmqpConnection> weak = weak_from_this();
  std::function<void()> on_full;
  if (limits.session.queue_overflow == core::QueueOverflow::kReject) {
    on_full = [weak, link, sequence] {
      if (auto self = weak.lock()) self->OnSafe(link, sequence, /*full=*/true);
    };
  }
  broker_->Publish(std::move(published), [weak, link, sequence] {
    if (auto self = weak.lock()) self->OnSafe(link, sequence, /*full=*/false);
  }, flow_id_, std::move(on_full));
  TopUpCredit(in);
}

void AmqpConnection::OnSafe(pn_link_t* link, uint64_t sequence, bool full) {
  auto it = incoming_.find(link);
  if (it == incoming_.end() || state_ != State::kOpen) return;
  IncomingLink& in = *it->second;
  auto found = in.awaiting.find(sequence);
  if (found == in.awaiting.end()) return;
  if (full) {
    // --queue-overflow reject: a matching session's queue was full (§3.4.3).
    ShardMetrics::Add(broker_->metrics().publishes_rejected_queue_full);
    Reject(found->second, kResourceLimitExceeded, "a matching subscriber's queue is full");
  } else {
    found->second.accept();  // accepted and settled: at-least-once done (§3.4.2)
  }
  in.awaiting.erase(found);
  TopUpCredit(in);
  ScheduleProcess();
}

void AmqpConnection::CheckOversized() {
  // Proton assembles a multi-frame message before on_message: stop a
  // partial one as soon as it outgrows the limit, not once it is whole.
  const uint64_t limit = broker_->config().limits.max_packet_size;
  std::vector<pn_link_t*> oversized;
  for (auto& [link, state] : incoming_) {
    pn_delivery_t* current = pn_link_current(link);
    if (current != nullptr && pn_delivery_partial(current) && pn_delivery_pending(current) > limit) {
      oversized.push_back(link);
    }
  }
  for (pn_link_t* link : oversized) {
    auto it = incoming_.find(link);
    it->second->closed = true;
    it->second->receiver.close(
        proton::error_condition(kMessageSizeExceeded, "message larger than the node's maximum"));
    incoming_.erase(it);
  }
}

void AmqpConnection::on_receiver_detach(proton::receiver& receiver) {
  incoming_.erase(CObject::Of(receiver));
}

void AmqpConnection::on_receiver_close(proton::receiver& receiver) {
  auto it = incoming_.find(CObject::Of(receiver));
  if (it == incoming_.end()) return;
  it->second->closed = true;  // §2.6.6: the link ends, and its unsettled state with it
  incoming_.erase(it);
}

}  // namespace estuary::amqp
