#include "frontends/mqtt/codec/reason_code.h"

#include <algorithm>
#include <initializer_list>

namespace estuary::mqtt {

const char* ToString(ReasonCode code) {
  switch (code) {
    case ReasonCode::kSuccess: return "Success";
    case ReasonCode::kGrantedQos1: return "Granted QoS 1";
    case ReasonCode::kGrantedQos2: return "Granted QoS 2";
    case ReasonCode::kDisconnectWithWill: return "Disconnect with Will Message";
    case ReasonCode::kNoMatchingSubscribers: return "No matching subscribers";
    case ReasonCode::kNoSubscriptionExisted: return "No subscription existed";
    case ReasonCode::kContinueAuthentication: return "Continue authentication";
    case ReasonCode::kReAuthenticate: return "Re-authenticate";
    case ReasonCode::kUnspecifiedError: return "Unspecified error";
    case ReasonCode::kMalformedPacket: return "Malformed Packet";
    case ReasonCode::kProtocolError: return "Protocol Error";
    case ReasonCode::kImplementationSpecificError: return "Implementation specific error";
    case ReasonCode::kUnsupportedProtocolVersion: return "Unsupported Protocol Version";
    case ReasonCode::kClientIdentifierNotValid: return "Client Identifier not valid";
    case ReasonCode::kBadUserNameOrPassword: return "Bad User Name or Password";
    case ReasonCode::kNotAuthorized: return "Not authorized";
    case ReasonCode::kServerUnavailable: return "Server unavailable";
    case ReasonCode::kServerBusy: return "Server busy";
    case ReasonCode::kBanned: return "Banned";
    case ReasonCode::kServerShuttingDown: return "Server shutting down";
    case ReasonCode::kBadAuthenticationMethod: return "Bad authentication method";
    case ReasonCode::kKeepAliveTimeout: return "Keep Alive timeout";
    case ReasonCode::kSessionTakenOver: return "Session taken over";
    case ReasonCode::kTopicFilterInvalid: return "Topic Filter invalid";
    case ReasonCode::kTopicNameInvalid: return "Topic Name invalid";
    case ReasonCode::kPacketIdentifierInUse: return "Packet Identifier in use";
    case ReasonCode::kPacketIdentifierNotFound: return "Packet Identifier not found";
    case ReasonCode::kReceiveMaximumExceeded: return "Receive Maximum exceeded";
    case ReasonCode::kTopicAliasInvalid: return "Topic Alias invalid";
    case ReasonCode::kPacketTooLarge: return "Packet too large";
    case ReasonCode::kMessageRateTooHigh: return "Message rate too high";
    case ReasonCode::kQuotaExceeded: return "Quota exceeded";
    case ReasonCode::kAdministrativeAction: return "Administrative action";
    case ReasonCode::kPayloadFormatInvalid: return "Payload format invalid";
    case ReasonCode::kRetainNotSupported: return "Retain not supported";
    case ReasonCode::kQosNotSupported: return "QoS not supported";
    case ReasonCode::kUseAnotherServer: return "Use another server";
    case ReasonCode::kServerMoved: return "Server moved";
    case ReasonCode::kSharedSubscriptionsNotSupported: return "Shared Subscriptions not supported";
    case ReasonCode::kConnectionRateExceeded: return "Connection rate exceeded";
    case ReasonCode::kMaximumConnectTime: return "Maximum connect time";
    case ReasonCode::kSubscriptionIdentifiersNotSupported:
      return "Subscription Identifiers not supported";
    case ReasonCode::kWildcardSubscriptionsNotSupported:
      return "Wildcard Subscriptions not supported";
  }
  return "Unknown reason code";
}

uint8_t ToV3ConnackCode(ReasonCode code) {
  switch (code) {
    case ReasonCode::kSuccess:
      return 0;
    case ReasonCode::kUnsupportedProtocolVersion:
      return 1;
    case ReasonCode::kClientIdentifierNotValid:
      return 2;
    case ReasonCode::kBadUserNameOrPassword:
      return 4;
    case ReasonCode::kNotAuthorized:
    case ReasonCode::kBanned:
    case ReasonCode::kBadAuthenticationMethod:
      return 5;
    default:
      // Server unavailable is the closest 3.x answer to every other refusal
      // (busy, shutting down, quota, use another server ...).
      return 3;
  }
}

std::optional<ReasonCode> FromV3ConnackCode(uint8_t code) {
  switch (code) {
    case 0: return ReasonCode::kSuccess;
    case 1: return ReasonCode::kUnsupportedProtocolVersion;
    case 2: return ReasonCode::kClientIdentifierNotValid;
    case 3: return ReasonCode::kServerUnavailable;
    case 4: return ReasonCode::kBadUserNameOrPassword;
    case 5: return ReasonCode::kNotAuthorized;
    default: return std::nullopt;
  }
}

namespace {

bool OneOf(ReasonCode code, std::initializer_list<uint8_t> values) {
  return std::find(values.begin(), values.end(), static_cast<uint8_t>(code)) != values.end();
}

}  // namespace

bool IsValidConnackReason(ReasonCode code) {
  return OneOf(code, {0x00, 0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89,
                      0x8A, 0x8C, 0x90, 0x95, 0x97, 0x99, 0x9A, 0x9B, 0x9C, 0x9D, 0x9F});
}

bool IsValidPubackReason(ReasonCode code) {  // PUBACK and PUBREC
  return OneOf(code, {0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99});
}

bool IsValidPubrelReason(ReasonCode code) {  // PUBREL and PUBCOMP
  return OneOf(code, {0x00, 0x92});
}

bool IsValidSubackReason(ReasonCode code) {
  return OneOf(code, {0x00, 0x01, 0x02, 0x80, 0x83, 0x87, 0x8F, 0x91, 0x97, 0x9E, 0xA1, 0xA2});
}

bool IsValidUnsubackReason(ReasonCode code) {
  return OneOf(code, {0x00, 0x11, 0x80, 0x83, 0x87, 0x8F, 0x91});
}

bool IsValidDisconnectReason(ReasonCode code) {
  return OneOf(code, {0x00, 0x04, 0x80, 0x81, 0x82, 0x83, 0x87, 0x89, 0x8B, 0x8D,
                      0x8E, 0x8F, 0x90, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99,
                      0x9A, 0x9B, 0x9C, 0x9D, 0x9E, 0x9F, 0xA0, 0xA1, 0xA2});
}

bool IsValidAuthReason(ReasonCode code) { return OneOf(code, {0x00, 0x18, 0x19}); }

}  // namespace estuary::mqtt
