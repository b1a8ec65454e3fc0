#pragma once
// AmqpConnection: the server side of one AMQP 1.0 network connection,
// driven through a proton::io::connection_driver on the owning shard's
// loop (no Proton container, no Proton threads).
//
// Bytes from the socket go into the driver, events are dispatched to this
// handler, and whatever the driver wants to write is copied to the Stream
// (batched by the stream per loop iteration). `tick()` drives idle-timeout
// heartbeats and dead-peer detection from a loop timer.
//
// Links map onto the broker (docs/amqp.md):
//  - a client receiver (we send) with source address F is a subscription
//    to topic filter F, on a core::Session of its own; a durable source
//    (terminus durable, expiry-policy never) keeps that session across
//    detach and reattach, keyed by container-id and link name;
//  - a client sender (we receive) with target address T publishes to
//    topic T (an anonymous target publishes to each message's `to`).
//
// Ownership and threads: owned by the shard that owns the socket
// (shared_ptr, so deferred callbacks hold weak references); every Proton
// object here is touched only by that shard's thread. A connection may be
// moved once, right after the client's open, to the shard its container-id
// hashes to (handed_off(), then Resume() on the new shard).
#include <proton/connection.hpp>
#include <proton/event.h>
#include <proton/connection_options.hpp>
#include <proton/delivery.hpp>
#include <proton/error_condition.hpp>
#include <proton/link.hpp>
#include <proton/receiver.hpp>
#include <proton/sender.hpp>
#include <proton/session.hpp>
#include <proton/tracker.hpp>
#include <proton/transport.hpp>
#include <proton/io/connection_driver.hpp>
#include <proton/message.hpp>
#include <proton/messaging_handler.hpp>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/token_bucket.h"
#include "cluster-core/broker/authenticator.h"
#include "cluster-core/broker/authorizer.h"
#include "cluster-core/broker/shard_broker.h"
#include "frontends/amqp/session/attach_tap.h"
#include "frontends/amqp/session/inbound_ledger.h"
#include "frontends/amqp/session/sasl.h"
#include "frontends/amqp/session/unsettled_announcer.h"
#include "io/stream.h"

namespace estuary::amqp {

struct AmqpSettings {
  core::Authenticator* authenticator = nullptr;  // null = allow all
  // Topic rights (--acl-file): a receiver's source is a read (each delivery
  // checked too), a sender's target and an anonymous relay's `to` a write;
  // refused with amqp:unauthorized-access. Null = everything allowed.
  core::Authorizer* authorizer = nullptr;
  // Over TLS with a verified client certificate: its subject CN, offered
  // as SASL EXTERNAL (the user is the CN; no password).
  std::optional<std::string> certificate_identity;
  std::string container_id = "estuary";          // ours, in the open frame
  uint32_t idle_timeout_ms = 60'000;             // advertised; 0 = none
  uint32_t max_frame_size = 64 * 1024;
  uint16_t max_sessions = 64;   // channel-max + 1
  uint32_t max_links = 256;     // per connection, both directions
  uint32_t link_credit = 256;   // credit window per client sender (capped by receive-maximum)
  // From Start to an open that is let in (the SASL exchange included): a
  // connection not open by then is closed, also one whose refused open the
  // client never closed (--connect-timeout, the MQTT CONNECT's deadline
  // too). 0 = none.
  uint32_t connect_timeout_ms = 10'000;
  // rcv-settle-mode second, client senders: a link whose client settles
  // nothing within this long of our first outcome is served as in mode
  // first from then on (docs/amqp.md "Exactly-once links": uAMQP asks for
  // mode second and never settles). 0 = never.
  uint32_t client_settle_grace_ms = 2'000;
  // Called once when the connect timeout closes a connection (the server
  // counts it; the close is logged at info with the peer's address).
  std::function<void()> connect_timed_out;
  // Connections over the node's limit are refused with this returning false.
  std::function<bool()> admit_connection;
  // Called once with the client's container-id when its open arrives. If it
  // returns true the connection must move to another shard: it stops (see
  // handed_off()) without answering the open.
  std::function<bool(const std::string& container_id)> route_open;
};

// Durable subscriptions in a cluster with partitions (docs/amqp.md
// "Durable subscriptions in a cluster"): a durable link's session id is
// claimed in the cluster's client-id registry, as an MQTT CONNECT claims
// its client id, before the attach is answered. Unset (a single node): no
// claims. Bound by the shard that owns the connection (BindSessionClaims),
// since a claim's answer runs there.
struct SessionClaims {
  // Asks for `session_id` (never clean: the session continues). `done` must
  // be called exactly once, on the connection's loop thread, possibly after
  // the connection or the link is gone (it then does nothing, or ends a
  // session closed meanwhile). Before a granted answer a session served
  // elsewhere (another node, or a run of this one before) has been adopted
  // by the connection's ShardBroker; not granted: no quorum, or no answer.
  std::function<void(const std::string& session_id, std::function<void(bool granted)> done)> claim;
  // The durable subscription ended here for good (its link closed): the id
  // is free. Not called on a detach (the session stays for a reattach), nor
  // when the link was attached elsewhere (the new owner holds the id).
  std::function<void(const std::string& session_id)> release;
};

// Error conditions (AMQP 1.0 §2.8.15, §2.8.16, §2.8.17).
inline constexpr const char* kNotFound = "amqp:not-found";
inline constexpr const char* kInvalidField = "amqp:invalid-field";
inline constexpr const char* kNotImplemented = "amqp:not-implemented";
inline constexpr const char* kUnauthorizedAccess = "amqp:unauthorized-access";
inline constexpr const char* kResourceLimitExceeded = "amqp:resource-limit-exceeded";
inline constexpr const char* kDecodeError = "amqp:decode-error";
inline constexpr const char* kConnectionForced = "amqp:connection:forced";
inline constexpr const char* kMessageSizeExceeded = "amqp:link:message-size-exceeded";
inline constexpr const char* kLinkStolen = "amqp:link:stolen";
inline constexpr const char* kInternalError = "amqp:internal-error";

// The core::Session id of a durable subscription link. The leading NUL
// cannot occur in an MQTT client id [MQTT-1.5.4-2], so the two never meet.
std::string DurableSessionId(std::string_view container_id, std::string_view link_name);

class AmqpConnection final : public proton::messaging_handler,
                             public core::PublisherFlow,
                             public std::enable_shared_from_this<AmqpConnection> {
 public:
  AmqpConnection(core::ShardBroker& broker, io::Stream& stream, AmqpSettings settings);
  ~AmqpConnection() override;
  AmqpConnection(const AmqpConnection&) = delete;
  AmqpConnection& operator=(const AmqpConnection&) = delete;

  // Accepts the transport (SASL, then AMQP). Call once after construction.
  void Start();
  // Bytes from the network.
  void OnBytes(std::string_view bytes);
  // The network connection is gone (peer closed, error, or our Close done).
  void OnStreamClosed();
  // The stream's write queue drained: resume sending.
  void OnWritable();
  // Server-initiated close: connection close with amqp:connection:forced.
  void Shutdown(std::string_view description);

  // True once route_open moved the connection: the socket must be detached
  // and handed, with this object, to the owning shard, which calls Resume.
  bool handed_off() const { return handed_off_; }
  // On the new shard: rebinds to its broker and stream, answers the open
  // and runs what arrived meanwhile (sessions and links begun with it).
  void Resume(core::ShardBroker& broker, io::Stream& stream);
  // Sets the claim hooks of durable links (see SessionClaims), on the shard
  // that owns the connection, before Start or Resume.
  void BindSessionClaims(SessionClaims claims) { claims_ = std::move(claims); }
  // The shard's exactly-once state of client senders in rcv-settle-mode
  // second (inbound_ledger.h), bound like the claims, before Start or
  // Resume; unbound, the connection keeps its own (recovery only within it).
  void BindInboundLedger(std::shared_ptr<InboundLedger> ledger) { ledger_ = std::move(ledger); }

  bool closed() const { return state_ == State::kClosed; }
  // No open yet (SASL, if any, still running); false once it arrived or closed.
  bool opening() const { return state_ == State::kOpening && !handed_off_; }
  const std::string& remote_container_id() const { return container_id_; }
  const std::string& sasl_user() const { return sasl_.user; }  // the SASL user ("anonymous" for ANONYMOUS); admin API
  size_t link_count() const { return outgoing_.size() + incoming_.size(); }

  // core::PublisherFlow: a subscriber we feed is congested (or relieved):
  // stop (resume) granting credit to our client senders.
  void PauseIngress() override;
  void ResumeIngress() override;

  // Deliveries stop, and reading stops, while this much output is queued.
  static constexpr size_t kOutputHighWatermark = 1024 * 1024;

 private:
  // The `client=` word of a log line about this client (docs/configuration.md
  // "Logs"): its container-id, "-" before its open.
  std::string_view ClientWord() const { return container_id_.empty() ? std::string_view("-") : container_id_; }
  enum class State : uint8_t { kOpening, kOpen, kClosed };
  struct OutgoingLink;
  struct IncomingLink;
  friend struct OutgoingLink;
  friend struct IncomingLink;

  // connection.cc: driving the driver, open/close
  void Process();
  void ScheduleProcess();
  void RenameDecodeFailure();
  void WriteOut();
  void ArmTick(int64_t deadline_ms);
  // The connect timeout (AmqpSettings::connect_timeout_ms), armed by Start
  // and cancelled once an open is let in, or before a move to another
  // shard (which arms its own if it refuses the open).
  void ArmConnectTimer();
  void CancelConnectTimer();
  void AnswerOpen();
  void CloseStream();
  void Teardown();
  void UpdateReading();
  // Spends the publish budget for one transfer of `bytes`; once it is
  // gone, reading stops until it refilled.
  void SpendPublishBudget(size_t bytes);
  // Stops reading until the budget is positive again (true), or resumes it.
  bool ArmThrottle();
  void Defer(std::function<void()> work);
  bool CheckAuthorized();

  // proton::messaging_handler
  void on_connection_open(proton::connection& connection) override;
  void on_connection_close(proton::connection& connection) override;
  void on_transport_close(proton::transport& transport) override;
  void on_transport_error(proton::transport& transport) override;
  void on_connection_error(proton::connection& connection) override;
  void on_error(const proton::error_condition& condition) override;
  void on_session_open(proton::session& session) override;
  void on_receiver_open(proton::receiver& receiver) override;
  void on_sender_open(proton::sender& sender) override;
  void on_receiver_detach(proton::receiver& receiver) override;
  void on_receiver_close(proton::receiver& receiver) override;
  void on_sender_detach(proton::sender& sender) override;
  void on_sender_close(proton::sender& sender) override;
  void on_message(proton::delivery& delivery, proton::message& message) override;
  void on_sendable(proton::sender& sender) override;
  void on_sender_drain_start(proton::sender& sender) override;
  void on_tracker_accept(proton::tracker& tracker) override;
  void on_tracker_reject(proton::tracker& tracker) override;
  void on_tracker_release(proton::tracker& tracker) override;
  void on_tracker_settle(proton::tracker& tracker) override;
  void on_delivery_settle(proton::delivery& delivery) override;

  // incoming.cc: client senders -> publish
  void OpenIncoming(proton::receiver receiver);
  // `full`: --queue-overflow reject refused it for a full session queue.
  void OnSafe(pn_link_t* link, uint64_t sequence, bool full);
  void TopUpCredit(IncomingLink& link);
  void CheckOversized();
  void Reject(proton::delivery& delivery, const std::string& condition, const std::string& description);
  // rcv-settle-mode second (docs/amqp.md "Exactly-once links"; the state
  // in InboundLedger): a transfer whose tag is kept is answered, not
  // published (AnswerResend); a new one is published once (PublishOnce)
  // and answered, unsettled, once Decide records the broker's outcome;
  // the client's settlement forgets the tag (on_delivery_settle).
  static std::string DeliveryTag(const proton::delivery& delivery);
  bool AnswerResend(IncomingLink& in, proton::delivery& delivery, const std::string& tag);
  // Room for one more kept tag on the link; false when the live ones fill it.
  bool MakeRoom(IncomingLink& in);
  void PublishOnce(IncomingLink& in, proton::delivery& delivery, const std::string& tag, MessagePtr message);
  static void Decide(const std::weak_ptr<InboundLinkRecord>& record, const std::string& tag, InboundOutcome outcome);
  // Answers the delivery held under `tag` with its kept outcome once that
  // is durable (AnswerHeld).
  void AnswerKept(const std::weak_ptr<InboundLinkRecord>& record, const std::string& tag);
  void AnswerHeld(const InboundLinkRecord& record, const std::string& tag);
  // The kept outcome of `tag` to the delivery the link holds under it:
  // unsettled, or settled if the client turned out not to settle second.
  void Answer(IncomingLink& in, const std::string& tag);
  void ArmSettleGrace(IncomingLink& in);
  static void SetOutcome(proton::delivery& delivery, const InboundOutcome& outcome);
  // A transfer refused before publishing: rejected (and, in mode second, kept).
  void Refuse(IncomingLink& in, proton::delivery& delivery, const std::string& tag, const std::string& condition,
              const std::string& description);

  // outgoing.cc: subscriptions -> client receivers
  void OpenOutgoing(proton::sender sender);
  void AttachSubscription(proton::sender sender, std::string filter, bool durable, bool dynamic,
                          std::optional<UnsettledMap> remote_unsettled);
  // The link's session attached and subscribed; the attach answered once
  // routes are visible.
  void AttachSession(OutgoingLink& link);
  // session_claims.cc: a durable link's session id claimed in the cluster
  // (SessionClaims) before AttachSession; refused: the link is closed with
  // amqp:internal-error. A link closed while its claim was out ends its
  // session once the claim is granted; closing a claimed link releases it.
  void ClaimSession(OutgoingLink& link);
  void OnSessionClaimed(pn_link_t* link, uint64_t serial, const std::string& session_id, bool granted);
  void AbandonClaim(const OutgoingLink& link, bool closed);
  void EndClaimedSession(const std::string& session_id);
  // Link recovery (§2.6.13): the deliveries in flight at the last detach,
  // in the order first sent, go to redeliver, except those the client's
  // unsettled map holds accepted or rejected (settled here instead);
  // released or modified ones get a new tag. Tells the announcer our
  // unsettled map and which transfers resume.
  void RecoverInflight(OutgoingLink& link);
  // Moves an in-flight delivery to a fresh id (a new delivery tag); returns it.
  static uint16_t Retag(core::Session& session, uint16_t packet_id);
  // Answers the attach once routes are visible: resends what was in flight
  // at the last detach, then retained messages for a new subscription.
  void StartSending(OutgoingLink& link, const core::SubscriptionOptions* new_subscription,
                    core::SubscribeOutcome outcome);
  void Pump(OutgoingLink& link);
  // False for a delivery queued unchecked (before this client's identity
  // was known) that the ACL does not let it read.
  bool MayDeliver(const core::Delivery& delivery) const;
  // One delivery's message as AMQP bytes (valid until the next call), and
  // those bytes sent as a new transfer on the link.
  const std::string& Encode(const core::Delivery& delivery, bool redelivery, int64_t now);
  pn_delivery_t* SendBytes(OutgoingLink& link, std::string_view bytes, std::string_view tag);
  void PumpAll();
  // A client's outcome or settlement of one of our transfers (a sending
  // link's PN_DELIVERY), as Proton C++'s messaging_adapter would report
  // it: the outcome, then the settlement. Returns true if it settled a
  // transfer (the caller pumps the link: credit or a redelivery to send).
  bool ApplyOutcome(OutgoingLink& link, pn_delivery_t* delivery);
  // Settles a transfer once its first outcome (or settlement) arrives;
  // false if it was not ours or already settled.
  bool Settle(OutgoingLink& link, pn_delivery_t* delivery, bool redeliver);
  // Mode second, QoS 2: the outcome stored, then settled, then forgotten.
  void SettleWhenStored(OutgoingLink& link, pn_delivery_t* delivery, uint16_t packet_id);
  // The client's outcomes at the head of the event queue, taken straight
  // from the Proton C collector before the C++ dispatch (which would wrap
  // each in a tracker and dispatch it twice); each link pumped once after.
  void TakeOutcomes();
  void ApplyOutcomeEvent(proton::tracker& tracker);
  void DetachOutgoing(pn_link_t* link, bool closed);
  void OnLinkDetached(OutgoingLink& link, core::DetachReason reason);
  bool RefuseLink(proton::link link, const char* condition, const std::string& description);

  core::ShardBroker* broker_;
  io::Stream* stream_;
  AmqpSettings settings_;
  SessionClaims claims_;
  std::shared_ptr<InboundLedger> ledger_ = std::make_shared<InboundLedger>();
  uint64_t next_claim_ = 0;
  uint64_t next_link_serial_ = 0;
  // Claims whose link was closed before the answer came: serial -> session id.
  std::unordered_map<uint64_t, std::string> closed_while_claiming_;
  SaslState sasl_;  // before driver_: Proton keeps pointers into it
  proton::io::connection_driver driver_;
  State state_ = State::kOpening;
  std::string container_id_;
  std::shared_ptr<core::ClientAccess> access_;  // set at open; null without an ACL
  bool processing_ = false;
  bool process_posted_ = false;
  bool handed_off_ = false;
  bool reading_ = true;
  std::vector<std::function<void()>> deferred_;  // events held while handing off
  std::string pending_input_;                     // bytes read after the open, while handing off
  core::FlowId flow_id_ = 0;
  uint32_t ingress_pauses_ = 0;
  io::TimerId tick_timer_ = 0;
  int64_t tick_deadline_ms_ = 0;
  io::TimerId connect_timer_ = 0;
  bool open_arrived_ = false;    // the client's open came (it may have been refused)
  uint64_t bytes_received_ = 0;  // until the open: for the connect timeout's report
  // Per-client publish budget (limits max_publish_rate/-bytes_rate;
  // docs/security.md "Abuse limits"): transfers are spent as they arrive
  // (a debt past the budget), and while throttle_timer_ runs the socket is
  // not read.
  bool publish_limited_ = false;
  base::TokenBucket publish_messages_;
  base::TokenBucket publish_bytes_;
  io::TimerId throttle_timer_ = 0;
  uint64_t next_sequence_ = 0;
  pn_collector_t* collector_ = nullptr;  // the driver's event queue (TakeOutcomes)
  std::vector<pn_link_t*> to_pump_;      // TakeOutcomes: links that settled something
  proton::message scratch_;         // reused for outgoing messages FromModel builds
  std::vector<char> scratch_bytes_;  // its encoding
  std::string encoded_;              // the message being sent, reused
  AttachTap attach_tap_;             // the client's unsettled maps, which Proton-C drops
  UnsettledAnnouncer announcer_;     // ours, which Proton-C cannot send
  // After driver_: links hold Proton objects and are destroyed first.
  std::unordered_map<pn_link_t*, std::unique_ptr<OutgoingLink>> outgoing_;
  std::unordered_map<pn_link_t*, std::unique_ptr<IncomingLink>> incoming_;
};

}  // namespace estuary::amqp
