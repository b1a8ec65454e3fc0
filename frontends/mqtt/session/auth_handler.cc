// Enhanced authentication (MQTT 5.0 section 4.12): a CONNECT that names an
// Authentication Method runs a multi-step exchange (core::AuthExchange,
// e.g. SCRAM-SHA-256) in AUTH packets with reason 0x18 before its CONNACK;
// AUTH 0x19 after CONNACK re-authenticates the same user (section 4.12.1).
#include <spdlog/spdlog.h>

#include "frontends/mqtt/session/connection.h"

namespace estuary::mqtt {

void MqttConnection::StartEnhancedAuth(ConnectPacket&& connect) {
  const std::string method = *connect.properties.authentication_method;
  if (settings_.certificate_username) {
    RefuseConnect(ReasonCode::kBadAuthenticationMethod, "the client certificate authenticates on this listener");
    return;
  }
  auth_exchange_ =
      settings_.authenticator ? settings_.authenticator->StartExchange(method, stream_.peer_address()) : nullptr;
  if (!auth_exchange_) {
    RefuseConnect(ReasonCode::kBadAuthenticationMethod, "authentication method '" + method + "' is not supported");
    return;
  }
  auth_method_ = method;
  state_ = State::kAuthenticating;  // the connect timeout keeps running
  pending_connect_ = std::make_unique<ConnectPacket>(std::move(connect));
  if (!pending_connect_->properties.authentication_data) {
    // No initial response: an empty challenge asks for it (as SASL does).
    SendAuth(ReasonCode::kContinueAuthentication, "");
    return;
  }
  StepConnectAuth(*pending_connect_->properties.authentication_data);
}

void MqttConnection::SendAuth(ReasonCode reason, std::string data) {
  AuthPacket auth;
  auth.reason = reason;
  auth.properties.authentication_method = auth_method_;
  if (!data.empty()) auth.properties.authentication_data = std::move(data);
  Send(auth);
}

void MqttConnection::HandleAuth(const AuthPacket& auth) {
  const bool authenticating = state_ == State::kAuthenticating;
  auto refuse = [&](ReasonCode reason, std::string_view why) {
    if (authenticating) {
      RefuseConnect(reason, why);  // before CONNACK: a CONNACK says why
    } else {
      Fail(reason, why);
    }
  };
  if (auth_method_.empty()) {
    refuse(ReasonCode::kProtocolError, "AUTH without an Authentication Method in CONNECT");
    return;
  }
  if (auth.properties.authentication_method.value_or("") != auth_method_) {
    refuse(ReasonCode::kProtocolError, "AUTH with another Authentication Method than CONNECT's");
    return;
  }
  const std::string_view data =
      auth.properties.authentication_data ? std::string_view(*auth.properties.authentication_data) : std::string_view();
  if (auth.reason == ReasonCode::kReAuthenticate && !authenticating && !auth_exchange_) {
    auth_exchange_ = settings_.authenticator->StartExchange(auth_method_, stream_.peer_address());
    if (!auth_exchange_) {
      Fail(ReasonCode::kBadAuthenticationMethod, "re-authentication is not available");
      return;
    }
    StepReauth(data);
    return;
  }
  if (auth.reason != ReasonCode::kContinueAuthentication || !auth_exchange_) {
    refuse(ReasonCode::kProtocolError, "unexpected AUTH reason code");
    return;
  }
  if (authenticating) {
    StepConnectAuth(data);
  } else {
    StepReauth(data);
  }
}

void MqttConnection::StepConnectAuth(std::string_view client_data) {
  core::AuthStep step = auth_exchange_->Respond(client_data);
  switch (step.kind) {
    case core::AuthStep::Kind::kContinue:
      SendAuth(ReasonCode::kContinueAuthentication, std::move(step.data));
      return;
    case core::AuthStep::Kind::kFailed:
      auth_exchange_.reset();
      spdlog::info("mqtt {}: authentication failed: {}", stream_.peer_address(), step.why);
      RefuseConnect(ReasonCode::kNotAuthorized,
                    auth_method_ + " authentication failed" + (step.data.empty() ? "" : " (" + step.data + ")"));
      return;
    case core::AuthStep::Kind::kSucceeded:
      break;
  }
  auth_exchange_.reset();
  auth_user_ = step.user;
  auth_final_ = std::move(step.data);
  const std::unique_ptr<ConnectPacket> connect = std::move(pending_connect_);
  connect->username = auth_user_;  // the identity for the ACL and the logs
  connect->password.reset();
  ContinueConnect(*connect);
}

void MqttConnection::StepReauth(std::string_view client_data) {
  core::AuthStep step = auth_exchange_->Respond(client_data);
  if (step.kind == core::AuthStep::Kind::kContinue) {
    SendAuth(ReasonCode::kContinueAuthentication, std::move(step.data));
    return;
  }
  auth_exchange_.reset();
  if (step.kind == core::AuthStep::Kind::kFailed) {
    spdlog::info("mqtt {} client '{}': re-authentication failed: {}", stream_.peer_address(), client_id_, step.why);
    Fail(ReasonCode::kNotAuthorized, "re-authentication failed");
    return;
  }
  if (step.user != auth_user_) {
    // The rights (ACL) were taken for the first user: another one would
    // need a new connection.
    Fail(ReasonCode::kNotAuthorized, "re-authentication as another user");
    return;
  }
  SendAuth(ReasonCode::kSuccess, std::move(step.data));
}

}  // namespace estuary::mqtt
