#pragma once
// The per-link state of an AmqpConnection (internal to this library).
#include <proton/delivery.hpp>
#include <proton/link.h>
#include <proton/receiver.hpp>
#include <proton/sender.hpp>

#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

#include "frontends/amqp/session/attach_tap.h"
#include "frontends/amqp/session/connection.h"
#include "frontends/amqp/session/inbound_ledger.h"

namespace estuary::amqp {

// A client receiver: we send. Its deliveries come from a core::Session of
// its own; the link is that session's sink.
struct AmqpConnection::OutgoingLink final : public core::SessionSink {
  OutgoingLink(AmqpConnection& owner, proton::sender link, pn_link_t* c_link)
      : connection(&owner), sender(link), pn(c_link) {}
  void OnDeliveriesReady() override;
  void OnDetached(core::DetachReason reason) override;

  AmqpConnection* connection;
  proton::sender sender;
  pn_link_t* pn;  // the C link behind `sender`, for the per-delivery calls
  core::Session* session = nullptr;
  std::string session_id;
  std::string filter;
  bool durable = false;
  bool dynamic = false;
  // Cluster claims (SessionClaims): out while claiming; granted once ours
  // (the link's close then releases the id). 0: never claimed.
  uint64_t claim_serial = 0;
  bool claiming = false;
  bool claim_granted = false;
  bool presettled = false;  // the client asked for snd-settle-mode settled
  // rcv-settle-mode second, unsettled (exactly once, docs/amqp.md
  // "Exactly-once links"): a QoS 2 delivery's outcome is stored first
  // (Session::MarkReleased: not sent again after a restart), then we
  // settle, then it is forgotten; `releasing` holds those between.
  bool second = false;
  uint64_t serial = 0;  // tells this link from a later one at the same address
  std::unordered_map<pn_delivery_t*, uint16_t> releasing;
  bool opened = false;      // our attach was sent (routes visible)
  bool pumping = false;
  uint64_t next_tag = 0;  // delivery tags of pre-settled transfers
  // In-flight deliveries of the session (by id) to send again before its
  // queue: released ones, and those unsettled at the last detach. They
  // stay in the session's in-flight map (and store) until settled, so a
  // kill -9 before they are sent again loses nothing.
  std::deque<uint16_t> redeliver;
  // The client's unsettled map from its attach (§2.6.13), if it sent one.
  std::optional<UnsettledMap> remote_unsettled;
  // Unsettled transfers on this link -> their in-flight id in the session,
  // which is also the delivery tag (2 bytes, big-endian): stable across
  // detach and restart, so a reattaching client's unsettled map names it.
  // Keyed by the Proton delivery, not its tag: ids are reused once settled.
  std::unordered_map<pn_delivery_t*, uint16_t> unsettled;
};

// A client sender: we receive and publish.
struct AmqpConnection::IncomingLink {
  explicit IncomingLink(proton::receiver link) : receiver(link) {}
  ~IncomingLink() {
    if (record) ledger->Detach(record, generation, closed);
  }
  IncomingLink(const IncomingLink&) = delete;
  IncomingLink& operator=(const IncomingLink&) = delete;
  proton::receiver receiver;
  std::string topic;  // empty: anonymous relay, each message's `to`
  // Unsettled deliveries published and waiting for the broker's on_safe.
  std::map<uint64_t, proton::delivery> awaiting;
  // rcv-settle-mode second (exactly once, docs/amqp.md "Exactly-once
  // links"): the link's kept tags in the shard's ledger, and the Proton
  // delivery of each tag we hold unsettled on this link until the client
  // settles it. `closed`: the client closed the link (its state ends).
  std::shared_ptr<InboundLedger> ledger;
  std::shared_ptr<InboundLinkRecord> record;
  std::unordered_map<std::string, proton::delivery> held;
  uint64_t generation = 0;  // the record's, at our attach
  uint64_t serial = 0;      // tells this link from a later one at the same address
  bool client_settled = false;  // the client settled a delivery: it does settle second
  bool grace_armed = false;     // ArmSettleGrace's timer was set
  bool settles_first = false;   // it settled nothing in the grace: served as mode first
  bool closed = false;
  bool second() const { return record != nullptr; }
};

}  // namespace estuary::amqp
