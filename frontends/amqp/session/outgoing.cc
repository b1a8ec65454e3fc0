// Client receivers: a subscription per link, on a core::Session of its
// own, sent within the link credit. Durable sources keep their session
// across detach/reattach (keyed by container-id and link name).
#include <proton/binary.hpp>
#include <proton/delivery.h>
#include <proton/disposition.h>
#include <proton/error_condition.hpp>
#include <proton/sender_options.hpp>
#include <proton/source.hpp>
#include <proton/terminus.h>
#include <proton/tracker.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <set>

#include "frontends/amqp/mapping/mapping.h"
#include "frontends/amqp/session/c_access.h"
#include "frontends/amqp/session/links.h"
#include "model/topic.h"

namespace estuary::amqp {
namespace {

using core::ShardMetrics;

// Session ids of non-durable links: unique within the process.
std::string EphemeralSessionId(uint16_t shard) {
  static std::atomic<uint64_t> counter{0};
  return std::string(1, '\0') + "amqp-link/" + std::to_string(shard) + "/" + std::to_string(++counter);
}

std::string DynamicAddress(uint16_t node, uint16_t shard) {
  static std::atomic<uint64_t> counter{0};
  return "tmp/amqp/" + std::to_string(node) + "/" + std::to_string(shard) + "/" +
         std::to_string(++counter);
}

// A transfer's delivery tag: its id in the session's in-flight map.
std::string TagOf(uint16_t packet_id) {
  return {static_cast<char>(packet_id >> 8), static_cast<char>(packet_id & 0xFF)};
}

bool IsValidFilter(const std::string& filter) {
  if (IsSharedFilter(filter)) return ParseSharedFilter(filter).has_value();
  return ValidateTopicFilter(filter).has_value();
}

}  // namespace

void AmqpConnection::OutgoingLink::OnDeliveriesReady() {
  if (pumping) return;
  connection->Pump(*this);
  connection->ScheduleProcess();
}

void AmqpConnection::OutgoingLink::OnDetached(core::DetachReason reason) {
  session = nullptr;  // no longer ours: do not touch it
  connection->OnLinkDetached(*this, reason);
}

void AmqpConnection::OnLinkDetached(OutgoingLink& link, core::DetachReason reason) {
  if (reason == core::DetachReason::kTakenOver) {
    // §2.6.1 / §2.8.16: the same durable link attached elsewhere.
    link.sender.close(proton::error_condition(kLinkStolen, "the link was attached by another connection"));
  } else {
    link.sender.close(proton::error_condition(kConnectionForced, "server shutting down"));
  }
  outgoing_.erase(CObject::Of(link.sender));
  ScheduleProcess();
}

void AmqpConnection::on_sender_open(proton::sender& sender) {
  if (handed_off_) {
    Defer([this, sender] { OpenOutgoing(sender); });
    return;
  }
  OpenOutgoing(sender);
}

void AmqpConnection::OpenOutgoing(proton::sender sender) {
  // The unsettled map of this attach, read off the wire (Proton-C drops it).
  std::optional<UnsettledMap> remote_unsettled = attach_tap_.Take(sender.name());
  if (state_ != State::kOpen) return;
  if (link_count() >= settings_.max_links) {
    RefuseLink(sender, kResourceLimitExceeded, "too many links on this connection");
    return;
  }
  proton::source source = sender.source();
  const bool dynamic = source.dynamic();
  std::string filter = dynamic ? DynamicAddress(broker_->config().node_id, broker_->config().shard_id)
                               : std::string(TopicOfAddress(source.address()));
  if (filter.empty()) {
    RefuseLink(sender, kInvalidField, "a source address (a topic filter) is required");
    return;
  }
  if (!IsValidFilter(filter)) {
    RefuseLink(sender, kInvalidField, "source address '" + filter + "' is not a valid topic filter");
    return;
  }
  if (!dynamic && access_ && !access_->MaySubscribe(filter)) {
    RefuseLink(sender, kUnauthorizedAccess, "the ACL does not allow reading '" + filter + "'");
    return;
  }
  // §3.5.3, §3.5.6: a durable terminus that never expires is a durable subscription.
  const bool durable = !dynamic && source.durability_mode() != proton::terminus::NONDURABLE &&
                       source.expiry_policy() == proton::terminus::NEVER;
  AttachSubscription(sender, std::move(filter), durable, dynamic, std::move(remote_unsettled));
}

void AmqpConnection::AttachSubscription(proton::sender sender, std::string filter, bool durable, bool dynamic,
                                        std::optional<UnsettledMap> remote_unsettled) {
  pn_link_t* link = CObject::Of(sender);
  auto owned = std::make_unique<OutgoingLink>(*this, sender, link);
  OutgoingLink& out = *owned;
  out.filter = std::move(filter);
  out.durable = durable;
  out.dynamic = dynamic;
  out.remote_unsettled = std::move(remote_unsettled);
  out.presettled = pn_link_remote_snd_settle_mode(link) == PN_SND_SETTLED;
  out.second = !out.presettled && pn_link_remote_rcv_settle_mode(link) == PN_RCV_SECOND;
  out.serial = ++next_link_serial_;
  out.session_id = durable ? DurableSessionId(container_id_, sender.name())
                           : EphemeralSessionId(broker_->config().shard_id);
  outgoing_[link] = std::move(owned);
  if (durable && claims_.claim) {
    ClaimSession(out);  // AttachSession once the cluster answers
    return;
  }
  AttachSession(out);
}

void AmqpConnection::AttachSession(OutgoingLink& out) {
  pn_link_t* link = out.pn;
  const std::string& filter = out.filter;
  const bool durable = out.durable;
  auto attached = broker_->Attach(out.session_id, !durable, &out);
  core::Session* session = attached.session;
  out.session = session;
  // A dynamic address is the link's own: whoever may write to it may reach it.
  if (access_ && !out.dynamic) session->set_access(access_);
  const core::BrokerLimits& limits = broker_->config().limits;
  session->set_expiry_interval(durable ? limits.max_session_expiry : 0);
  core::SubscriptionOptions options;
  // Mode second takes QoS 2 as published (the two-step settlement below);
  // mode first at most QoS 1.
  options.max_qos = out.presettled ? QoS::kAtMostOnce
                                   : std::min(out.second ? QoS::kExactlyOnce : QoS::kAtLeastOnce,
                                              static_cast<QoS>(limits.maximum_qos));
  auto& subscriptions = session->subscriptions();
  auto existing = subscriptions.find(filter);
  const bool resubscribe = existing == subscriptions.end() || !(existing->second == options);
  std::vector<std::string> stale;
  for (const auto& entry : subscriptions) {
    if (entry.first != filter) stale.push_back(entry.first);
  }
  for (const auto& old : stale) broker_->Unsubscribe(session, old);
  core::SubscribeOutcome outcome = core::SubscribeOutcome::kAdded;  // (used only with resubscribe)
  if (resubscribe) outcome = broker_->Subscribe(session, filter, options);

  pn_link_set_snd_settle_mode(link, out.presettled ? PN_SND_SETTLED : PN_SND_UNSETTLED);
  // rcv-settle-mode second: the receiver settles after us; we settle once
  // its outcome arrives (Settle), for QoS 2 once that outcome is stored.
  pn_link_set_rcv_settle_mode(link, pn_link_remote_rcv_settle_mode(link));
  if (out.dynamic) {
    // The assigned address, with `dynamic` unset, or Proton erases it.
    pn_terminus_t* local = pn_link_source(link);
    pn_terminus_set_dynamic(local, false);
    pn_terminus_set_address(local, filter.c_str());
  }
  // Attach once every shard routes the filter: a message published after
  // the client saw our attach reaches it (and retained ones follow it).
  std::weak_ptr<AmqpConnection> weak = weak_from_this();
  broker_->WhenRoutesVisible([weak, link, options, resubscribe, outcome] {
    auto self = weak.lock();
    if (!self || self->state_ != State::kOpen) return;
    auto it = self->outgoing_.find(link);
    if (it == self->outgoing_.end()) return;
    self->StartSending(*it->second, resubscribe ? &options : nullptr, outcome);
  });
}

void AmqpConnection::StartSending(OutgoingLink& link, const core::SubscriptionOptions* new_subscription,
                                  core::SubscribeOutcome outcome) {
  link.sender.open(proton::sender_options().auto_settle(false));  // Settle() settles, once
  link.opened = true;
  if (link.session == nullptr) return;
  RecoverInflight(link);
  if (new_subscription != nullptr) {
    broker_->DeliverRetained(link.session, link.filter, *new_subscription, outcome);
  }
  Pump(link);
  ScheduleProcess();
}

void AmqpConnection::RecoverInflight(OutgoingLink& link) {
  core::Session& session = *link.session;
  std::vector<std::pair<uint64_t, uint16_t>> order;
  for (const auto& [packet_id, entry] : session.inflight()) order.emplace_back(entry.sent_order, packet_id);
  std::sort(order.begin(), order.end());
  const std::optional<UnsettledMap> remote = std::move(link.remote_unsettled);
  link.remote_unsettled.reset();
  ShardMetrics& metrics = broker_->metrics();
  std::vector<std::string> unsettled;  // ours, for our attach: sent again under the same tag
  std::set<std::string> resume;        // held by the client, not terminal: resumed
  for (const auto& [sent_order, packet_id] : order) {
    const std::string tag = TagOf(packet_id);
    std::optional<RemoteDeliveryState> state;
    if (remote) {
      auto it = remote->find(tag);
      if (it != remote->end()) state = it->second;
    }
    if (session.inflight().at(packet_id).phase == core::InflightPhase::kAwaitingPubcomp) {
      // Its outcome arrived and was stored, and we were about to settle (or
      // had settled): settled here, never sent again, not in our map, so a
      // client still holding it settles it too (§2.6.13).
      session.RemoveInflight(packet_id);
      ShardMetrics::Sub(metrics.inflight_messages);
      continue;
    }
    switch (state.value_or(RemoteDeliveryState::kNone)) {
      case RemoteDeliveryState::kRejected:
      case RemoteDeliveryState::kModifiedUndeliverable:
        ShardMetrics::Add(metrics.messages_dropped);
        [[fallthrough]];
      case RemoteDeliveryState::kAccepted:
        // The outcome reached the client's side: the delivery is done
        // with, not sent again (§2.6.13).
        session.RemoveInflight(packet_id);
        ShardMetrics::Sub(metrics.inflight_messages);
        break;
      case RemoteDeliveryState::kReleased:
      case RemoteDeliveryState::kModified:
        // Terminal at the client, which keeps that tag until we settle it
        // (which only a resumed transfer could do): a new delivery, under
        // a new tag.
        link.redeliver.push_back(Retag(session, packet_id));
        break;
      default:
        // Null or received at the client: resumed (same tag, resume set).
        // Not in its map (it never got it, or settled it first): sent
        // again under the same tag. In the order first sent.
        if (state) resume.insert(tag);
        unsettled.push_back(tag);
        link.redeliver.push_back(packet_id);
        break;
    }
  }
  // §2.6.13: our attach (written after this) lists what we still hold
  // unsettled under the tags the client saw, and the transfers of those it
  // holds unsettled too carry resume.
  if (link.durable && !link.presettled) {
    announcer_.Announce(link.sender.name(), std::move(unsettled), std::move(resume));
  }
}

uint16_t AmqpConnection::Retag(core::Session& session, uint16_t packet_id) {
  const uint16_t fresh = session.NextPacketId();
  if (fresh == 0) return packet_id;  // every id in flight: keep the old one
  core::InflightDelivery entry = session.inflight().at(packet_id);
  session.RemoveInflight(packet_id);  // one batch with the AddInflight: never lost
  session.AddInflight(fresh, std::move(entry));
  return fresh;
}

void AmqpConnection::PumpAll() {
  for (auto& entry : outgoing_) Pump(*entry.second);
}

bool AmqpConnection::MayDeliver(const core::Delivery& delivery) const {
  return delivery.access_checked || !access_ || access_->MayReceive(delivery.message->topic);
}

void AmqpConnection::Pump(OutgoingLink& link) {
  if (state_ != State::kOpen || !link.opened || link.session == nullptr || link.pumping) return;
  link.pumping = true;
  core::Session& session = *link.session;
  ShardMetrics& metrics = broker_->metrics();
  int64_t now = -1;  // read once, and only if something is sent
  while (pn_link_credit(link.pn) > 0 && stream_->queued_bytes() <= kOutputHighWatermark) {
    core::Delivery delivery;
    uint16_t packet_id = 0;
    const bool redelivery = !link.redeliver.empty();
    if (redelivery) {
      packet_id = link.redeliver.front();
      link.redeliver.pop_front();
      auto found = session.inflight().find(packet_id);
      if (found == session.inflight().end()) continue;  // settled meanwhile
      if (!found->second.delivery.message) {  // nothing to send (an MQTT QoS 2 leftover)
        session.RemoveInflight(packet_id);
        ShardMetrics::Sub(metrics.inflight_messages);
        continue;
      }
      delivery = found->second.delivery;  // the message is shared, not copied
    } else if (session.HasQueued()) {
      if (!link.presettled && (packet_id = session.NextPacketId()) == 0) break;  // all ids in flight
      delivery = session.PopQueued();
      broker_->OnDequeued(session);
    } else {
      break;
    }
    if (now < 0) now = broker_->loop().clock().WallMs();
    const auto& expiry = delivery.message->properties.expiry_at_ms;
    // Expired, or queued unchecked and not readable by this client: dropped.
    const bool dropped = (expiry && *expiry <= now) || !MayDeliver(delivery);
    if (dropped) ShardMetrics::Add(metrics.messages_dropped);
    if (link.presettled || dropped) {
      if (!dropped) {
        const uint64_t tag = ++link.next_tag;
        SendBytes(link, Encode(delivery, redelivery, now), {reinterpret_cast<const char*>(&tag), sizeof tag});
      }
      if (redelivery) {  // in flight from an unsettled attach before: done with now
        session.RemoveInflight(packet_id);
        ShardMetrics::Sub(metrics.inflight_messages);
      }
      if (dropped) continue;
    } else {
      link.unsettled[SendBytes(link, Encode(delivery, redelivery, now), TagOf(packet_id))] = packet_id;
      if (!redelivery) {
        // The phase follows the delivery's QoS, as the session staged it
        // (QoS 2 only on links in mode second).
        const core::InflightPhase phase = delivery.qos == QoS::kExactlyOnce ? core::InflightPhase::kAwaitingPubrec
                                                                            : core::InflightPhase::kAwaitingPuback;
        session.AddInflight(packet_id, core::InflightDelivery{std::move(delivery), phase, session.NextSendOrder()});
        ShardMetrics::Add(metrics.inflight_messages);
      }
    }
    ShardMetrics::Add(metrics.messages_out);
  }
  // §2.6.7: a drain with nothing left to send uses up the credit.
  // (The client's drain flag first: the C++ draining() is the dearer call.)
  if (link.redeliver.empty() && !session.HasQueued() && pn_link_get_drain(link.pn) && link.sender.draining()) {
    link.sender.return_credit();
  }
  link.pumping = false;
}

const std::string& AmqpConnection::Encode(const core::Delivery& delivery, bool redelivery, int64_t now) {
  // The common case straight to bytes; FromModel (the reference) for the rest.
  if (!redelivery && EncodeFromModel(delivery, now, encoded_)) return encoded_;
  FromModel(delivery, now, scratch_);
  if (redelivery) {
    scratch_.delivery_count(scratch_.delivery_count() + 1);
    scratch_.first_acquirer(false);
  }
  scratch_.encode(scratch_bytes_);
  encoded_.assign(scratch_bytes_.begin(), scratch_bytes_.end());
  return encoded_;
}

pn_delivery_t* AmqpConnection::SendBytes(OutgoingLink& link, std::string_view bytes, std::string_view tag) {
  // What proton::sender::send does, minus encoding a proton::message.
  pn_link_t* pn_link = link.pn;
  pn_delivery_t* delivery = pn_delivery(pn_link, pn_dtag(tag.data(), tag.size()));
  pn_link_send(pn_link, bytes.data(), bytes.size());
  pn_link_advance(pn_link);
  // snd-settle-mode settled: settled as sent.
  if (pn_link_snd_settle_mode(pn_link) == PN_SND_SETTLED) pn_delivery_settle(delivery);
  // proton::sender::send also forgets a drain once the credit is used up
  // (so that the next drain request is announced again); with no credit
  // left, return_credit() does exactly that and nothing else.
  if (pn_link_credit(pn_link) == 0) link.sender.return_credit();
  return delivery;
}

void AmqpConnection::on_sendable(proton::sender& sender) {
  auto it = outgoing_.find(CObject::Of(sender));
  if (it != outgoing_.end()) Pump(*it->second);
}

void AmqpConnection::on_sender_drain_start(proton::sender& sender) {
  auto it = outgoing_.find(CObject::Of(sender));
  if (it != outgoing_.end()) {
    Pump(*it->second);
  } else if (sender.draining()) {
    sender.return_credit();
  }
}

bool AmqpConnection::Settle(OutgoingLink& link, pn_delivery_t* delivery, bool redeliver) {
  if (link.session == nullptr) return false;
  // The first outcome (or settlement) of a transfer decides; we settle then.
  auto entry = link.unsettled.find(delivery);
  if (entry == link.unsettled.end()) return false;
  const uint16_t packet_id = entry->second;
  link.unsettled.erase(entry);
  if (!redeliver && link.second) {
    auto inflight = link.session->inflight().find(packet_id);
    if (inflight != link.session->inflight().end() && inflight->second.phase == core::InflightPhase::kAwaitingPubrec) {
      SettleWhenStored(link, delivery, packet_id);
      return true;
    }
  }
  pn_delivery_settle(delivery);
  if (!redeliver) {
    if (link.session->RemoveInflight(packet_id)) ShardMetrics::Sub(broker_->metrics().inflight_messages);
  } else if (link.session->inflight().count(packet_id) != 0) {
    link.redeliver.push_back(packet_id);  // stays in flight until sent again and settled
  }
  return true;
}

void AmqpConnection::SettleWhenStored(OutgoingLink& link, pn_delivery_t* delivery, uint16_t packet_id) {
  // The QoS 2 analogue of PUBREC, PUBREL, PUBCOMP: the outcome makes the
  // in-flight entry "released" (the message dropped, never sent again:
  // RecoverInflight and Pump forget such an entry), and only once that is
  // durable do we settle, after which the receiver forgets the delivery
  // (§3.4, rcv-settle-mode second). Settling first would let a restart
  // resend a message whose receiver had already let go of its tag.
  link.session->MarkReleased(packet_id);
  link.releasing.emplace(delivery, packet_id);
  std::weak_ptr<AmqpConnection> weak = weak_from_this();
  broker_->AfterDurable([weak, pn = link.pn, serial = link.serial, delivery] {
    auto self = weak.lock();
    if (!self || self->state_ != State::kOpen) return;
    auto it = self->outgoing_.find(pn);
    if (it == self->outgoing_.end() || it->second->serial != serial) return;
    OutgoingLink& out = *it->second;
    auto releasing = out.releasing.find(delivery);
    if (releasing == out.releasing.end()) return;
    const uint16_t id = releasing->second;
    out.releasing.erase(releasing);
    pn_delivery_settle(delivery);  // our settled disposition: the receiver may forget it now
    if (out.session != nullptr && out.session->RemoveInflight(id)) {
      ShardMetrics::Sub(self->broker_->metrics().inflight_messages);
    }
    self->Pump(out);
    self->ScheduleProcess();
  });
}

bool AmqpConnection::ApplyOutcome(OutgoingLink& link, pn_delivery_t* delivery) {
  if (!pn_delivery_updated(delivery)) return false;
  bool settled = false;
  switch (pn_delivery_remote_state(delivery)) {
    case PN_ACCEPTED:
      settled = Settle(link, delivery, false);
      break;
    case PN_REJECTED:
      // Rejected: the receiver will never take it (§3.4.2); dropped.
      settled = Settle(link, delivery, false);
      if (settled) ShardMetrics::Add(broker_->metrics().messages_dropped);
      break;
    case PN_RELEASED:
    case PN_MODIFIED: {
      // Released, or modified (§3.4.4, §3.4.5): sent again, unless the
      // receiver marked it undeliverable-here, the only receiver it has.
      const bool undeliverable = pn_delivery_remote_state(delivery) == PN_MODIFIED &&
                                 pn_disposition_is_undeliverable(pn_delivery_remote(delivery));
      settled = Settle(link, delivery, !undeliverable);
      if (settled && undeliverable) ShardMetrics::Add(broker_->metrics().messages_dropped);
      break;
    }
    default:
      break;
  }
  // Settled with no outcome: done with, as if accepted (no-op when an
  // outcome already settled it).
  if (!settled && pn_delivery_settled(delivery)) settled = Settle(link, delivery, false);
  return settled;
}

void AmqpConnection::ApplyOutcomeEvent(proton::tracker& tracker) {
  // The events TakeOutcomes left to the C++ dispatch. Called once per
  // outcome and once more for the settlement; the second finds nothing.
  pn_delivery_t* delivery = CObject::Of(tracker);
  auto it = outgoing_.find(pn_delivery_link(delivery));
  if (it == outgoing_.end()) return;
  if (ApplyOutcome(*it->second, delivery)) Pump(*it->second);
}

void AmqpConnection::TakeOutcomes() {
  // Only between dispatches (no event handed out and still current), and
  // only from the head of the queue, so events keep their order; the
  // first event that is not an update of one of our transfers (or a
  // PN_TRANSPORT) stops it and the C++ dispatch takes the rest.
  if (collector_ == nullptr || outgoing_.empty() || pn_collector_prev(collector_) != nullptr) return;
  pn_link_t* current = nullptr;
  OutgoingLink* link = nullptr;
  while (pn_event_t* event = pn_collector_peek(collector_)) {
    const pn_event_type_t type = pn_event_type(event);
    if (type == PN_TRANSPORT) {
      // "The transport has output": neither the driver nor the C++
      // dispatch acts on it (we write after every pass anyway), and one
      // sits before the outcomes whenever we sent since the last pass.
      pn_collector_pop(collector_);
      continue;
    }
    if (type != PN_DELIVERY) break;
    pn_delivery_t* delivery = pn_event_delivery(event);
    pn_link_t* pn_link = pn_delivery_link(delivery);
    if (pn_link != current) {
      if (!pn_link_is_sender(pn_link)) break;
      auto it = outgoing_.find(pn_link);
      if (it == outgoing_.end() || it->second->session == nullptr) break;
      current = pn_link;
      link = it->second.get();
    }
    if (ApplyOutcome(*link, delivery) &&
        std::find(to_pump_.begin(), to_pump_.end(), pn_link) == to_pump_.end()) {
      to_pump_.push_back(pn_link);
    }
    pn_collector_pop(collector_);
  }
  for (pn_link_t* pn_link : to_pump_) {
    auto it = outgoing_.find(pn_link);
    if (it != outgoing_.end()) Pump(*it->second);
  }
  to_pump_.clear();
}

void AmqpConnection::on_tracker_accept(proton::tracker& tracker) { ApplyOutcomeEvent(tracker); }

void AmqpConnection::on_tracker_reject(proton::tracker& tracker) { ApplyOutcomeEvent(tracker); }

void AmqpConnection::on_tracker_release(proton::tracker& tracker) { ApplyOutcomeEvent(tracker); }

void AmqpConnection::on_tracker_settle(proton::tracker& tracker) { ApplyOutcomeEvent(tracker); }

void AmqpConnection::DetachOutgoing(pn_link_t* link, bool closed) {
  auto it = outgoing_.find(link);
  if (it == outgoing_.end()) return;
  OutgoingLink& out = *it->second;
  if (out.claiming) AbandonClaim(out, closed);
  if (out.session != nullptr) {
    // Deliveries waiting to be sent again are still in the session's
    // in-flight map: the next attach recovers them.
    // A close (or a non-durable link) ends the subscription; a detach of a
    // durable one keeps it, and its queue, for the reattach.
    if (closed || !out.durable) out.session->set_expiry_interval(0);
    broker_->Disconnect(out.session, &out, false);
    out.session = nullptr;
    // Ended for good: the cluster's claim on its id goes too.
    if (closed && out.claim_granted && claims_.release) claims_.release(out.session_id);
  }
  outgoing_.erase(it);
}

void AmqpConnection::on_sender_detach(proton::sender& sender) { DetachOutgoing(CObject::Of(sender), false); }

void AmqpConnection::on_sender_close(proton::sender& sender) { DetachOutgoing(CObject::Of(sender), true); }

}  // namespace estuary::amqp
