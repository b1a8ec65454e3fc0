// Client senders in rcv-settle-mode second (exactly once; docs/amqp.md
// "Exactly-once links"): a transfer is published once and answered
// unsettled, its tag kept in the shard's InboundLedger until the client
// settles; a transfer resent under a kept tag is answered, not published.
#include <proton/delivery.h>
#include <proton/disposition.h>
#include <proton/error_condition.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "frontends/amqp/session/c_access.h"
#include "frontends/amqp/session/links.h"

namespace estuary::amqp {

using core::ShardMetrics;

std::string AmqpConnection::DeliveryTag(const proton::delivery& delivery) {
  const proton::binary tag = delivery.tag();
  return std::string(tag.begin(), tag.end());
}

bool AmqpConnection::AnswerResend(IncomingLink& in, proton::delivery& delivery, const std::string& tag) {
  auto kept = in.record->tags.find(tag);
  if (kept == in.record->tags.end()) return false;
  // Taken before (on this link, or on the one it recovers): not published
  // again; answered with the outcome given then, or once it is decided.
  ledger_->CountResend();
  in.held[tag] = delivery;
  if (kept->second.kind != InboundOutcome::Kind::kPending) AnswerKept(in.record, tag);
  TopUpCredit(in);
  return true;
}

bool AmqpConnection::MakeRoom(IncomingLink& in) {
  InboundLinkRecord& record = *in.record;
  if (record.tags.size() < ledger_->max_per_link()) return true;
  // Tags kept from an earlier attach that the client did not send again
  // (a client that cannot resume forgets them): dropped before the live ones.
  if (record.tags.size() == in.held.size()) return false;
  const size_t before = record.tags.size();
  std::vector<std::string> leftovers;
  for (const auto& entry : record.tags) {
    if (in.held.count(entry.first) == 0) leftovers.push_back(entry.first);
  }
  for (const std::string& tag : leftovers) ledger_->Drop(record, tag);
  spdlog::info("amqp: client={} link '{}': {} kept tags of earlier attaches forgotten (limit {})", ClientWord(),
               in.receiver.name(), before - record.tags.size(), ledger_->max_per_link());
  return true;
}

void AmqpConnection::PublishOnce(IncomingLink& in, proton::delivery& delivery, const std::string& tag,
                                 MessagePtr message) {
  ledger_->Keep(*in.record, tag, InboundOutcome{});  // pending until on_safe (not written)
  in.held[tag] = delivery;
  std::weak_ptr<InboundLinkRecord> record = in.record;
  std::function<void()> on_full;
  if (broker_->config().limits.session.queue_overflow == core::QueueOverflow::kReject) {
    on_full = [record, tag] {
      Decide(record, tag, {InboundOutcome::Kind::kRejected, kResourceLimitExceeded, "a matching subscriber's queue is full"});
    };
  }
  broker_->Publish(std::move(message), [record, tag] { Decide(record, tag, {InboundOutcome::Kind::kAccepted, {}, {}}); },
                   flow_id_, std::move(on_full));
  TopUpCredit(in);
}

void AmqpConnection::Decide(const std::weak_ptr<InboundLinkRecord>& weak, const std::string& tag,
                            InboundOutcome outcome) {
  // The ledger's record, not the connection: a resend on a recovered link
  // (another connection, maybe) waits for this outcome too.
  auto record = weak.lock();
  if (!record) return;  // the link closed, or was forgotten
  auto kept = record->tags.find(tag);
  if (kept == record->tags.end() || kept->second.kind != InboundOutcome::Kind::kPending) return;
  record->ledger->Keep(*record, tag, std::move(outcome));  // written, with a data dir
  if (auto holder = record->holder.lock()) holder->AnswerKept(record, tag);
}

void AmqpConnection::AnswerKept(const std::weak_ptr<InboundLinkRecord>& weak_record, const std::string& tag) {
  // Once the kept outcome is durable: a client told `accepted` may settle
  // and forget, and after a kill -9 a resend must still find the tag.
  std::weak_ptr<AmqpConnection> weak = weak_from_this();
  broker_->AfterDurable([weak, weak_record, tag] {
    auto self = weak.lock();
    auto record = weak_record.lock();
    if (self && record) self->AnswerHeld(*record, tag);
  });
}

void AmqpConnection::AnswerHeld(const InboundLinkRecord& record, const std::string& tag) {
  if (state_ != State::kOpen) return;
  for (auto& [pn, in] : incoming_) {
    if (in->record.get() != &record) continue;
    auto held = in->held.find(tag);
    if (held == in->held.end()) return;
    auto kept = record.tags.find(tag);
    if (kept == record.tags.end()) return;  // settled meanwhile
    const InboundOutcome& outcome = kept->second;
    if (outcome.kind == InboundOutcome::Kind::kRejected && outcome.condition == kResourceLimitExceeded) {
      ShardMetrics::Add(broker_->metrics().publishes_rejected_queue_full);
    }
    Answer(*in, tag);
    TopUpCredit(*in);
    ScheduleProcess();
    return;
  }
}

void AmqpConnection::Answer(IncomingLink& in, const std::string& tag) {
  auto held = in.held.find(tag);
  if (held == in.held.end()) return;
  const InboundOutcome& outcome = in.record->tags.at(tag);
  SetOutcome(held->second, outcome);
  if (in.settles_first) {
    // A client that does not settle second: as in mode first (see ArmSettleGrace).
    pn_delivery_settle(CObject::Of(held->second));
    in.held.erase(held);
    ledger_->Drop(*in.record, tag);
    return;
  }
  ArmSettleGrace(in);
}

void AmqpConnection::ArmSettleGrace(IncomingLink& in) {
  // uAMQP (and the Azure SDKs on it) asks for mode second on every link,
  // then waits for us to settle first and never settles: it would hang.
  // A link whose client has settled nothing within the grace of our first
  // answer is served as in mode first from then on (logged once): what it
  // holds is settled now, what follows at once; exactly once no longer
  // holds on that link. A client that settles once is never switched.
  if (in.client_settled || in.grace_armed || settings_.client_settle_grace_ms == 0) return;
  in.grace_armed = true;
  std::weak_ptr<AmqpConnection> weak = weak_from_this();
  broker_->loop().AddTimer(settings_.client_settle_grace_ms, [weak, pn = CObject::Of(in.receiver), serial = in.serial] {
    auto self = weak.lock();
    if (!self || self->state_ != State::kOpen) return;
    auto it = self->incoming_.find(pn);
    if (it == self->incoming_.end() || it->second->serial != serial || it->second->client_settled) return;
    IncomingLink& link = *it->second;
    spdlog::info("amqp: client={} address={} link '{}' asked for rcv-settle-mode second but settled nothing within {} "
                 "ms of our outcome: served as in mode first from now on (at least once)",
                 self->ClientWord(), self->sasl_.peer_address, link.receiver.name(),
                 self->settings_.client_settle_grace_ms);
    link.settles_first = true;
    std::vector<std::string> decided;
    for (const auto& [tag, delivery] : link.held) {
      if (link.record->tags.at(tag).kind != InboundOutcome::Kind::kPending) decided.push_back(tag);
    }
    for (const std::string& tag : decided) self->Answer(link, tag);
    self->TopUpCredit(link);
    self->Process();
  });
}

void AmqpConnection::SetOutcome(proton::delivery& delivery, const InboundOutcome& outcome) {
  // Unsettled: the client settles first, then we do (§2.7.3, rcv-settle-mode second).
  pn_delivery_t* d = CObject::Of(delivery);
  if (outcome.kind == InboundOutcome::Kind::kRejected) {
    pn_condition_t* error = pn_disposition_condition(pn_delivery_local(d));
    pn_condition_set_name(error, outcome.condition.c_str());
    pn_condition_set_description(error, outcome.description.c_str());
    pn_delivery_update(d, PN_REJECTED);
  } else {
    pn_delivery_update(d, PN_ACCEPTED);
  }
}

void AmqpConnection::Refuse(IncomingLink& in, proton::delivery& delivery, const std::string& tag,
                            const std::string& condition, const std::string& description) {
  if (!in.second()) {
    Reject(delivery, condition, description);
    return;
  }
  ledger_->Keep(*in.record, tag, InboundOutcome{InboundOutcome::Kind::kRejected, condition, description});
  in.held[tag] = delivery;
  AnswerKept(in.record, tag);
}

void AmqpConnection::on_delivery_settle(proton::delivery& delivery) {
  // The client settled one of its transfers: in mode second the end of it
  // (we settle after it); its tag is forgotten and may be used again.
  // Mode first: nothing to do (we settle with our answer, as before).
  auto it = incoming_.find(CObject::Of(delivery.receiver()));
  if (it == incoming_.end() || !it->second->second()) return;
  IncomingLink& in = *it->second;
  in.client_settled = true;  // it does settle second: never switched to mode first
  const std::string tag = DeliveryTag(delivery);
  auto held = in.held.find(tag);
  if (held != in.held.end() && CObject::Of(held->second) == CObject::Of(delivery)) {
    in.held.erase(held);
    ledger_->Drop(*in.record, tag);
  }
  delivery.settle();
  TopUpCredit(in);
}

}  // namespace estuary::amqp
