// Durable subscriptions in a cluster with partitions (docs/amqp.md
// "Durable subscriptions in a cluster"): a durable link's session id is
// claimed in the cluster's client-id registry before the link attaches to
// its session, as an MQTT CONNECT claims its client id. The claim brings a
// session served on another node here first (the shard adopts it), and
// from its commit on the partition takes the session's changes from this
// node only.
#include <spdlog/spdlog.h>

#include "frontends/amqp/session/links.h"

namespace estuary::amqp {

using core::ShardMetrics;

void AmqpConnection::ClaimSession(OutgoingLink& link) {
  link.claiming = true;
  link.claim_serial = ++next_claim_;
  ShardMetrics::Add(broker_->metrics().client_id_claims);
  std::weak_ptr<AmqpConnection> weak = weak_from_this();
  claims_.claim(link.session_id, [weak, pn = link.pn, serial = link.claim_serial,
                                  session_id = link.session_id](bool granted) {
    if (auto self = weak.lock()) self->OnSessionClaimed(pn, serial, session_id, granted);
  });
}

void AmqpConnection::OnSessionClaimed(pn_link_t* pn, uint64_t serial, const std::string& session_id,
                                      bool granted) {
  if (!granted) ShardMetrics::Add(broker_->metrics().client_id_claims_refused);
  auto it = outgoing_.find(pn);
  if (it == outgoing_.end() || it->second->claim_serial != serial || !it->second->claiming) {
    // The link went first. Detached: the session (adopted here, or not
    // yet made) waits for a reattach, as after any detach. Closed: the
    // subscription ends, now that the id is ours.
    auto closed = closed_while_claiming_.find(serial);
    if (closed == closed_while_claiming_.end()) return;
    closed_while_claiming_.erase(closed);
    if (granted) EndClaimedSession(session_id);
    return;
  }
  OutgoingLink& link = *it->second;
  link.claiming = false;
  if (state_ != State::kOpen) return;
  if (!granted) {
    RefuseLink(link.sender, kInternalError,
               "the cluster's client-id registry is unavailable (no quorum): attach again later");
    outgoing_.erase(it);
    ScheduleProcess();
    return;
  }
  link.claim_granted = true;
  AttachSession(link);
  ScheduleProcess();
}

void AmqpConnection::AbandonClaim(const OutgoingLink& link, bool closed) {
  if (closed) closed_while_claiming_.emplace(link.claim_serial, link.session_id);
}

void AmqpConnection::EndClaimedSession(const std::string& session_id) {
  // A link attached to it meanwhile (a later attach of the same name) keeps it.
  if (core::Session* current = broker_->FindSession(session_id); current != nullptr && current->sink() != nullptr) {
    return;
  }
  // What a close does to an attached durable link: no expiry, so the
  // session (and its stored and replicated copy) goes with the disconnect.
  core::Session* session = broker_->Attach(session_id, /*clean_start=*/true, nullptr).session;
  session->set_expiry_interval(0);
  broker_->Disconnect(session, nullptr, false);
  if (claims_.release) claims_.release(session_id);
}

}  // namespace estuary::amqp
