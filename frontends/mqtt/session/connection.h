#pragma once
// MqttConnection: the server side of one MQTT network connection, for
// MQTT 3.1, 3.1.1 and 5.0.
//
// Parse-then-process: bytes are framed and decoded by the codec into a
// packet struct, then one handler per packet type acts on it through the
// shard's broker. Deliveries are pulled from the attached core::Session
// within the client's flow-control window (receive maximum) and written to
// the Stream, batched by the stream per loop iteration.
//
// Every protocol violation goes through Fail(), which sends the v5 reason
// code (DISCONNECT, or CONNACK before the session exists) and closes; the
// connection never throws. Owned by the server's shard (shared_ptr, so
// deferred callbacks can hold a weak reference); single-threaded.
#include <cstdint>
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
#include "frontends/mqtt/codec/decoder.h"
#include "frontends/mqtt/codec/packet.h"
#include "io/stream.h"

namespace estuary::mqtt {

// The cluster's answer to a client id claim (docs/cluster.md "One client id
// per cluster"): kGranted once this node's claim is committed by the
// registry partition the id hashes to; kUnavailable when it cannot be (no
// quorum, e.g. this node is on the minority side of a split).
enum class ClaimOutcome : uint8_t { kGranted, kUnavailable };

struct ConnectionSettings {
  core::Authenticator* authenticator = nullptr;  // null = allow all
  // Topic rights (--acl-file): SUBSCRIBE, PUBLISH, the will and every
  // delivery are checked. Null = everything allowed.
  core::Authorizer* authorizer = nullptr;
  // --tls-identity-as-username (docs/security.md "Mutual TLS"): the
  // verified client certificate's subject CN, which replaces the CONNECT's
  // user name; the password is not checked (Mosquitto's
  // use_identity_as_username). "" (no CN) is refused. Unset: off.
  std::optional<std::string> certificate_username;
  // Called with a decoded CONNECT's client id before it is processed. If it
  // returns true the server took the socket elsewhere (the shard that owns
  // the client id) and this connection must stop without touching it.
  std::function<bool(const std::string& client_id)> route_connect;
  // Connections over the node's limit are refused with this set to false.
  std::function<bool()> admit_connection;
  std::optional<std::string> server_reference;  // for redirects (load transfer)
  // From Start, the CONNECT (and its AUTH exchange) must be through within
  // this (--connect-timeout); a claim not answered by then is refused.
  uint32_t connect_timeout_ms = 10'000;
  // Called once when the connect timeout closes a connection whose CONNECT
  // (or AUTH exchange) had not finished (the server counts it; the close is
  // logged at info with the peer's address). Not for an unanswered claim:
  // the client did its part.
  std::function<void()> connect_timed_out;
  // Asks the cluster for the client id (docs/cluster.md "One client id per
  // cluster"). `done` must be called exactly once, on this connection's loop
  // thread (the caller posts it there), possibly after the connection has
  // closed (it then does nothing). Until it is called the connection sends
  // nothing, reads nothing and holds any pipelined packets; the connect
  // timeout keeps running (a claim not answered in time is refused like
  // kUnavailable). Not called for a server-assigned id (unique already).
  // Null: no claim (a single node). `clean_start` is the CONNECT's: the
  // hook may bring a session served elsewhere to this node before it
  // answers (the connection then attaches to it).
  std::function<void(const std::string& client_id, bool clean_start, std::function<void(ClaimOutcome)> done)>
      claim_client_id;
  // Called once, after the connection closed, when a connection whose claim
  // was granted ends together with its session (session expiry 0 at the
  // end: clean session, or v5 expiry 0). Not called when the session stays
  // for a later reconnect, nor when the connection was taken over (here or
  // from another node: OnDetached(kTakenOver)), since the new owner holds
  // the id then.
  std::function<void(const std::string& client_id)> release_client_id;
};

class MqttConnection final : public core::SessionSink,
                             public core::PublisherFlow,
                             public std::enable_shared_from_this<MqttConnection> {
 public:
  // kAuthenticating: a CONNECT with an Authentication Method waits for its
  // AUTH exchange (MQTT 5 section 4.12). kClaiming: a valid, authenticated
  // CONNECT waits for the cluster's client id claim.
  enum class State : uint8_t { kAwaitingConnect, kAuthenticating, kClaiming, kConnected, kClosed };

  MqttConnection(core::ShardBroker& broker, io::Stream& stream, ConnectionSettings settings);
  ~MqttConnection() override;
  MqttConnection(const MqttConnection&) = delete;
  MqttConnection& operator=(const MqttConnection&) = delete;

  // Arms the CONNECT timeout. Call once after construction.
  void Start();
  // Bytes from the network.
  void OnBytes(std::string_view bytes);
  // The network connection is gone (peer closed, error, or our Close done).
  void OnStreamClosed();
  // The stream's write queue drained: resume deliveries.
  void OnWritable();
  // True once route_connect moved the socket to another shard; the
  // connection is then inert and unprocessed_input() holds every byte
  // received, CONNECT included, for the new owner to replay.
  bool handed_off() const { return handed_off_; }
  const std::string& unprocessed_input() const { return input_; }

  // Server-initiated disconnects (shutdown, load transfer).
  void Disconnect(ReasonCode reason, std::optional<std::string> server_reference = {});

  // core::SessionSink
  void OnDeliveriesReady() override;
  void OnDetached(core::DetachReason reason) override;
  // core::PublisherFlow: a subscriber we feed is congested (or relieved).
  void PauseIngress() override;
  void ResumeIngress() override;
  bool reading() const { return reading_; }

  // Deliveries stop, and reading stops, while this much output is queued.
  static constexpr size_t kOutputHighWatermark = 1024 * 1024;

  State state() const { return state_; }
  ProtocolVersion version() const { return version_; }
  const std::string& client_id() const { return client_id_; }
  // For the admin API's client list (docs/admin-api.md): the CONNECT's user
  // name ("" for none) and when the CONNACK went out (loop time, 0 before).
  const std::string& username() const { return username_; }
  int64_t connected_at_ms() const { return connected_at_ms_; }

 private:
  // connection.cc: framing, dispatch, closing
  size_t ProcessFrames(std::string_view view);
  void ProcessBufferedInput();
  bool RoutedElsewhere(std::string_view frame);
  bool ProcessFrame(std::string_view frame);
  void Dispatch(Packet& packet);
  void Fail(ReasonCode reason, std::string_view why);
  void CloseStream();
  void Send(const Packet& packet);
  bool TrimToFit(Packet& packet) const;
  void ArmKeepAlive(int64_t delay_ms);
  // Reads while no subscriber asked for a pause, the publish budget is not
  // spent and our output is not backed up past the high watermark.
  void UpdateReading();
  // --max-publish-rate/--max-publish-bytes-rate: true (and the budget
  // spent) if a PUBLISH of `bytes` may be processed now; false arms the
  // timer that goes on once the budget refilled (the frame waits in input_).
  bool TakePublishBudget(size_t bytes);
  void OnKeepAliveTimer();
  // connect_handler.cc
  void HandleConnect(ConnectPacket& connect);
  // After authentication: client id, rights, claim, then AcceptConnect.
  void ContinueConnect(ConnectPacket& connect);
  bool CheckCredentials(const ConnectPacket& connect);
  // Attaches the session and sends CONNACK: the CONNECT is accepted.
  void AcceptConnect(const ConnectPacket& connect);
  void ClaimClientId(ConnectPacket&& connect);
  void OnClaimAnswered(ClaimOutcome outcome);
  void RefuseUnclaimed(std::string_view why);
  // The session is leaving this connection: a granted id goes back to the
  // cluster at close only if the session ends too.
  void NoteSessionEnd(bool session_ends);
  bool CheckConnect(const ConnectPacket& connect);
  // Takes the client's rights from the authorizer; false (refused) when
  // the will topic is not writable.
  bool CheckAccess(const ConnectPacket& connect);
  void RefuseConnect(ReasonCode reason, std::string_view why);
  void ApplyConnectProperties(const ConnectPacket& connect);
  void SetWill(const ConnectPacket& connect);
  void SendConnack(const ConnectPacket& connect, bool session_present);
  void HandleDisconnect(const DisconnectPacket& disconnect);
  std::string AssignClientId();
  // auth_handler.cc: enhanced authentication (CONNECT's Authentication
  // Method, AUTH packets) and re-authentication (AUTH 0x19).
  void StartEnhancedAuth(ConnectPacket&& connect);
  void HandleAuth(const AuthPacket& auth);
  void StepConnectAuth(std::string_view client_data);
  void StepReauth(std::string_view client_data);
  void SendAuth(ReasonCode reason, std::string data);
  // publish_in.cc: client -> server
  void HandlePublish(PublishPacket& publish);
  bool ResolveTopicAlias(PublishPacket& publish);
  void HandlePuback(const AckPacket& ack);
  void HandlePubrec(const AckPacket& ack);
  void HandlePubrel(const AckPacket& ack);
  void HandlePubcomp(const AckPacket& ack);
  void SendAck(PacketType type, uint16_t packet_id, ReasonCode reason);
  void AnswerQueueFull(PacketType reply, uint16_t packet_id, const std::function<void()>& acknowledge);
  // The same, once the session state changed before it is durable (at once
  // without storage): a PUBREL or PUBCOMP must not outrun its own write.
  void SendAckWhenDurable(PacketType type, uint16_t packet_id, ReasonCode reason);
  // A PUBLISH the ACL does not allow: 5.0 answers 0x87, 3.x acknowledges
  // and drops it (as Mosquitto does).
  void RefusePublish(const PublishPacket& publish);
  // publish_out.cc: server -> client
  void PumpDeliveries();
  bool SendDelivery(const core::Delivery& delivery, uint16_t packet_id, bool dup);
  // False for a delivery the broker queued unchecked (before this client's
  // identity was known) that the ACL does not let it read.
  bool MayDeliver(const core::Delivery& delivery);
  void ResendInflight();
  // subscribe_handler.cc
  void HandleSubscribe(const SubscribePacket& subscribe);
  ReasonCode CheckFilter(const Subscription& subscription);
  void HandleUnsubscribe(const UnsubscribePacket& unsubscribe);

  bool v5() const { return version_ == ProtocolVersion::kV5; }

  core::ShardBroker& broker_;
  io::Stream& stream_;
  ConnectionSettings settings_;
  State state_ = State::kAwaitingConnect;
  ProtocolVersion version_ = ProtocolVersion::kV311;
  std::string input_;  // bytes not processed yet: an incomplete packet, or held while paused
  std::string client_id_;
  core::Session* session_ = nullptr;
  std::shared_ptr<core::ClientAccess> access_;  // null without an ACL
  bool clean_disconnect_ = false;
  bool pumping_ = false;  // PumpDeliveries is on the stack
  core::FlowId flow_id_ = 0;
  uint32_t ingress_pauses_ = 0;
  bool reading_ = true;
  bool handed_off_ = false;
  // Per-client publish budget (limits max_publish_rate/-bytes_rate;
  // docs/security.md "Abuse limits"): while throttle_timer_ runs nothing is
  // processed and the socket is not read.
  bool publish_limited_ = false;
  base::TokenBucket publish_messages_;
  base::TokenBucket publish_bytes_;
  io::TimerId throttle_timer_ = 0;
  uint32_t connect_expiry_interval_ = 0;  // v5: CONNECT's value, checked at DISCONNECT
  std::string username_;                  // the admin API's client list
  int64_t connected_at_ms_ = 0;

  // Client id claim (settings_.claim_client_id) and enhanced authentication.
  std::unique_ptr<ConnectPacket> pending_connect_;  // held while kAuthenticating or kClaiming
  std::unique_ptr<core::AuthExchange> auth_exchange_;  // the exchange running, if any
  std::string auth_method_;  // CONNECT's Authentication Method ("" = none)
  std::string auth_user_;    // who the exchange authenticated
  std::string auth_final_;   // the mechanism's last message, for CONNACK's Authentication Data
  bool claim_call_on_stack_ = false;  // the hook answered from inside itself
  bool claim_granted_ = false;        // ours to release when the session ends
  bool release_on_close_ = false;     // decided as the session ends

  // Keep alive: the deadline is 1.5x the interval after the last packet.
  uint16_t keep_alive_s_ = 0;
  int64_t last_packet_ms_ = 0;
  io::TimerId keep_alive_timer_ = 0;

  // What the client allows us (from CONNECT) and what we allow it.
  uint16_t client_receive_maximum_ = 65535;
  uint32_t client_max_packet_size_ = UINT32_MAX;
  uint16_t client_topic_alias_maximum_ = 0;
  bool request_problem_information_ = true;
  std::vector<std::string> inbound_aliases_;                  // index = alias
  std::unordered_map<std::string, uint16_t> outbound_aliases_;  // topic -> alias
};

}  // namespace estuary::mqtt
