// CONNECT, CONNACK and DISCONNECT: the start and the end of a connection.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "frontends/mqtt/session/connection.h"
#include "model/topic.h"

namespace estuary::mqtt {
namespace {

// Reason codes a 3.x CONNACK can carry; for anything else 3.x closes
// without a CONNACK [MQTT-3.1.4-1].
bool V3CanCarry(ReasonCode reason) {
  switch (reason) {
    case ReasonCode::kUnsupportedProtocolVersion:
    case ReasonCode::kClientIdentifierNotValid:
    case ReasonCode::kServerUnavailable:
    case ReasonCode::kServerBusy:
    case ReasonCode::kQuotaExceeded:
    case ReasonCode::kBadUserNameOrPassword:
    case ReasonCode::kNotAuthorized:
      return true;
    default:
      return false;
  }
}

}  // namespace

void MqttConnection::HandleConnect(ConnectPacket& connect) {
  version_ = connect.version;
  // Known before any reply, so that even a refusal fits [MQTT-3.2.2-19].
  client_max_packet_size_ = connect.properties.maximum_packet_size.value_or(UINT32_MAX);
  if (settings_.certificate_username) {
    connect.username = *settings_.certificate_username;
    connect.password.reset();
  }
  if (!CheckConnect(connect)) return;
  if (connect.properties.authentication_method) {
    StartEnhancedAuth(std::move(connect));
    return;
  }
  if (!CheckCredentials(connect)) return;
  ContinueConnect(connect);
}

void MqttConnection::ContinueConnect(ConnectPacket& connect) {
  client_id_ = connect.client_id;
  if (client_id_.empty()) {
    // Not claimed: built from this node's id, clock and sequence, so no
    // other node can assign it, and the round trip is saved.
    client_id_ = AssignClientId();
  }
  if (!CheckAccess(connect)) return;
  if (!connect.client_id.empty() && settings_.claim_client_id) {
    ClaimClientId(std::move(connect));
    return;
  }
  AcceptConnect(connect);
}

void MqttConnection::AcceptConnect(const ConnectPacket& connect) {
  ApplyConnectProperties(connect);
  auto attached = broker_.Attach(client_id_, connect.clean_start, this);
  session_ = attached.session;
  if (access_) session_->set_access(access_);
  // A durable session stages deliveries (records synced before they are
  // sent); a restart resends those, so staging stays within the client's
  // receive maximum (MQTT 5 §3.3.4: no more unacknowledged QoS 1/2 than it).
  if (v5()) {
    session_->set_send_window(client_receive_maximum_);
    connect_expiry_interval_ = connect.properties.session_expiry_interval.value_or(0);
  } else {
    session_->set_send_window(0);  // no receive maximum before MQTT 5: the default stage-ahead
    connect_expiry_interval_ = connect.clean_start ? 0 : UINT32_MAX;
  }
  session_->set_expiry_interval(
      std::min(connect_expiry_interval_, broker_.config().limits.max_session_expiry));
  SetWill(connect);
  state_ = State::kConnected;
  username_ = connect.username.value_or("");
  connected_at_ms_ = broker_.loop().NowMs();
  SendConnack(connect, attached.session_present);
  spdlog::debug("mqtt: client={} address={} connected (v{}, clean={}, present={})", client_id_,
                stream_.peer_address(), static_cast<int>(version_), connect.clean_start,
                attached.session_present);
  if (keep_alive_s_ != 0) ArmKeepAlive(int64_t{keep_alive_s_} * 1500);
  if (attached.session_present) ResendInflight();
  PumpDeliveries();
}

// Holds the CONNECT (and, by state, every byte after it) until the cluster
// has committed this node's claim on the client id.
void MqttConnection::ClaimClientId(ConnectPacket&& connect) {
  state_ = State::kClaiming;
  pending_connect_ = std::make_unique<ConnectPacket>(std::move(connect));
  core::ShardMetrics::Add(broker_.metrics().client_id_claims);
  UpdateReading();
  std::weak_ptr<MqttConnection> weak = weak_from_this();
  claim_call_on_stack_ = true;
  const bool clean_start = pending_connect_->clean_start;
  settings_.claim_client_id(client_id_, clean_start, [weak](ClaimOutcome outcome) {
    if (auto self = weak.lock()) self->OnClaimAnswered(outcome);
  });
  claim_call_on_stack_ = false;
}

void MqttConnection::OnClaimAnswered(ClaimOutcome outcome) {
  if (state_ != State::kClaiming) return;  // closed first (network, timeout, shutdown)
  if (outcome != ClaimOutcome::kGranted) {
    RefuseUnclaimed("client id registry unavailable (no quorum)");
    return;
  }
  claim_granted_ = true;
  const std::unique_ptr<ConnectPacket> connect = std::move(pending_connect_);
  AcceptConnect(*connect);
  // Answered from inside the hook: the ProcessFrames below us goes on with
  // the pipelined packets itself.
  if (claim_call_on_stack_ || state_ == State::kClosed) return;
  ProcessBufferedInput();
  UpdateReading();
}

void MqttConnection::RefuseUnclaimed(std::string_view why) {
  core::ShardMetrics::Add(broker_.metrics().client_id_claims_refused);
  pending_connect_.reset();
  RefuseConnect(ReasonCode::kServerUnavailable, why);  // 3.x: return code 3
}

bool MqttConnection::CheckConnect(const ConnectPacket& connect) {
  const core::BrokerLimits& limits = broker_.config().limits;
  if (settings_.admit_connection && !settings_.admit_connection()) {
    RefuseConnect(v5() ? ReasonCode::kQuotaExceeded : ReasonCode::kServerUnavailable,
                  "connection limit reached");
    return false;
  }
  if (connect.client_id.empty() && (!connect.clean_start && !v5())) {
    RefuseConnect(ReasonCode::kClientIdentifierNotValid, "empty client id needs clean session [MQTT-3.1.3-8]");
    return false;
  }
  if (connect.client_id.empty() && version_ == ProtocolVersion::kV31) {
    RefuseConnect(ReasonCode::kClientIdentifierNotValid, "MQTT 3.1 needs a client id");
    return false;
  }
  if (connect.will) {
    if (!ValidateTopicName(connect.will->topic)) {
      RefuseConnect(ReasonCode::kTopicNameInvalid, "invalid will topic");
      return false;
    }
    if (connect.will->qos > limits.maximum_qos) {
      RefuseConnect(ReasonCode::kQosNotSupported, "will QoS above the maximum");
      return false;
    }
    if (connect.will->retain && !limits.retain_available) {
      RefuseConnect(ReasonCode::kRetainNotSupported, "retained wills are not available");
      return false;
    }
    const auto& will_response = connect.will->properties.response_topic;
    if (will_response && !ValidateTopicName(*will_response)) {
      RefuseConnect(ReasonCode::kProtocolError, "will response topic is not a topic name [MQTT-3.1.3-11]");
      return false;
    }
    if (connect.will->properties.payload_format_indicator.value_or(0) == 1 &&
        !IsValidMqttUtf8(connect.will->payload)) {
      RefuseConnect(ReasonCode::kPayloadFormatInvalid, "will payload is not UTF-8");
      return false;
    }
  }
  return true;
}

bool MqttConnection::CheckCredentials(const ConnectPacket& connect) {
  if (settings_.certificate_username) {
    // The certificate authenticated the client (the handshake verified it).
    if (!settings_.certificate_username->empty()) return true;
    RefuseConnect(ReasonCode::kNotAuthorized, "the client certificate has no subject CN");
    return false;
  }
  core::AllowAllAuthenticator allow_all;
  core::Authenticator& authenticator = settings_.authenticator ? *settings_.authenticator : allow_all;
  core::Credentials credentials{connect.client_id, connect.username, connect.password,
                                stream_.peer_address()};
  switch (authenticator.Authenticate(credentials)) {
    case core::AuthDecision::kAllow:
      return true;
    case core::AuthDecision::kBadCredentials:
      RefuseConnect(ReasonCode::kBadUserNameOrPassword, "bad user name or password");
      return false;
    case core::AuthDecision::kNotAuthorized:
      RefuseConnect(ReasonCode::kNotAuthorized, "not authorized");
      return false;
  }
  return false;
}

bool MqttConnection::CheckAccess(const ConnectPacket& connect) {
  if (settings_.authorizer == nullptr) return true;
  access_ = settings_.authorizer->ForClient({client_id_, connect.username});
  if (connect.will && !access_->MayPublish(connect.will->topic)) {
    RefuseConnect(ReasonCode::kNotAuthorized, "the ACL does not allow publishing the will topic");
    return false;
  }
  return true;
}

void MqttConnection::RefuseConnect(ReasonCode reason, std::string_view why) {
  spdlog::debug("mqtt: client={} address={} CONNECT refused: {} ({})", client_id_.empty() ? "-" : client_id_,
                stream_.peer_address(), ToString(reason), why);
  core::ShardMetrics::Add(broker_.metrics().protocol_errors);
  if (v5() || V3CanCarry(reason)) {
    ConnackPacket connack;
    connack.reason = reason;
    if (v5()) connack.properties.reason_string = std::string(why);
    Send(connack);
  }
  CloseStream();
}

void MqttConnection::ApplyConnectProperties(const ConnectPacket& connect) {
  const Properties& properties = connect.properties;
  const core::BrokerLimits& limits = broker_.config().limits;
  keep_alive_s_ = connect.keep_alive;
  if (v5() && keep_alive_s_ > limits.max_keep_alive) keep_alive_s_ = limits.max_keep_alive;
  client_receive_maximum_ = properties.receive_maximum.value_or(65535);
  client_max_packet_size_ = properties.maximum_packet_size.value_or(UINT32_MAX);
  client_topic_alias_maximum_ = properties.topic_alias_maximum.value_or(0);
  request_problem_information_ = properties.request_problem_information.value_or(1) == 1;
  inbound_aliases_.clear();  // sized on first use: idle connections stay small
  outbound_aliases_.clear();
}

void MqttConnection::SetWill(const ConnectPacket& connect) {
  if (!connect.will) {
    session_->set_will(std::nullopt);
    return;
  }
  const Will& will = *connect.will;
  auto message = std::make_shared<Message>();
  message->topic = will.topic;
  message->payload = MakePayload(will.payload);
  message->qos = static_cast<QoS>(will.qos);
  message->retain = will.retain;
  message->origin = Origin{Protocol::kMqtt, client_id_, broker_.config().node_id};
  const Properties& p = will.properties;
  message->properties.payload_format = p.payload_format_indicator;
  message->properties.content_type = p.content_type;
  message->properties.response_topic = p.response_topic;
  message->properties.correlation_data = p.correlation_data;
  for (const auto& [key, value] : p.user_properties) {
    message->properties.user_properties.push_back({key, value});
  }
  core::WillMessage stored;
  stored.message = std::move(message);
  stored.delay_seconds = p.will_delay_interval.value_or(0);
  stored.expiry_interval = p.message_expiry_interval;
  session_->set_will(std::move(stored));
}

void MqttConnection::SendConnack(const ConnectPacket& connect, bool session_present) {
  ConnackPacket connack;
  connack.session_present = session_present;
  if (v5()) {
    const core::BrokerLimits& limits = broker_.config().limits;
    Properties& p = connack.properties;
    if (session_->expiry_interval() != connect_expiry_interval_) {
      p.session_expiry_interval = session_->expiry_interval();
    }
    p.receive_maximum = limits.receive_maximum;
    if (limits.maximum_qos < 2) p.maximum_qos = limits.maximum_qos;
    if (!limits.retain_available) p.retain_available = 0;
    p.maximum_packet_size = limits.max_packet_size;
    if (connect.client_id.empty()) p.assigned_client_identifier = client_id_;
    p.topic_alias_maximum = limits.topic_alias_maximum;
    // Wildcard, subscription identifier and shared subscriptions are
    // available: the default when absent, so not sent.
    if (keep_alive_s_ != connect.keep_alive) p.server_keep_alive = keep_alive_s_;
    if (connect.properties.request_response_information.value_or(0) == 1) {
      p.response_information = "reply/" + client_id_;
    }
    if (settings_.server_reference) p.server_reference = settings_.server_reference;
    if (!auth_method_.empty()) {
      p.authentication_method = auth_method_;  // the same method as the CONNECT
      if (!auth_final_.empty()) p.authentication_data = std::move(auth_final_);
      auth_final_.clear();
    }
  }
  Send(connack);
}

void MqttConnection::HandleDisconnect(const DisconnectPacket& disconnect) {
  if (v5() && disconnect.properties.session_expiry_interval) {
    const uint32_t requested = *disconnect.properties.session_expiry_interval;
    if (connect_expiry_interval_ == 0 && requested != 0) {
      Fail(ReasonCode::kProtocolError, "session expiry set at DISCONNECT after 0 at CONNECT [MQTT-3.14.2-2]");
      return;
    }
    session_->set_expiry_interval(std::min(requested, broker_.config().limits.max_session_expiry));
  }
  // [MQTT-3.14.4-3] a normal DISCONNECT discards the will; v5 0x04 keeps it.
  clean_disconnect_ = !(v5() && disconnect.reason == ReasonCode::kDisconnectWithWill);
  CloseStream();
}

std::string MqttConnection::AssignClientId() {
  // An id that hashes to this shard, so the session stays where it is.
  const core::ShardConfig& config = broker_.config();
  for (;;) {
    const MessageId id = broker_.NextMessageId();
    std::string candidate = fmt::format("estuary-{:x}-{:x}-{:x}", config.node_id, id.timestamp, id.sequence);
    if (core::ShardForClientId(candidate, config.shard_count) == config.shard_id) return candidate;
  }
}

}  // namespace estuary::mqtt
