#pragma once
// MQTT 5.0 reason codes (§2.4) and their MQTT 3.x equivalents.
#include <cstdint>
#include <optional>

namespace estuary::mqtt {

enum class ReasonCode : uint8_t {
  kSuccess = 0x00,  // also Normal disconnection, Granted QoS 0
  kGrantedQos1 = 0x01,
  kGrantedQos2 = 0x02,
  kDisconnectWithWill = 0x04,
  kNoMatchingSubscribers = 0x10,
  kNoSubscriptionExisted = 0x11,
  kContinueAuthentication = 0x18,
  kReAuthenticate = 0x19,
  kUnspecifiedError = 0x80,
  kMalformedPacket = 0x81,
  kProtocolError = 0x82,
  kImplementationSpecificError = 0x83,
  kUnsupportedProtocolVersion = 0x84,
  kClientIdentifierNotValid = 0x85,
  kBadUserNameOrPassword = 0x86,
  kNotAuthorized = 0x87,
  kServerUnavailable = 0x88,
  kServerBusy = 0x89,
  kBanned = 0x8A,
  kServerShuttingDown = 0x8B,
  kBadAuthenticationMethod = 0x8C,
  kKeepAliveTimeout = 0x8D,
  kSessionTakenOver = 0x8E,
  kTopicFilterInvalid = 0x8F,
  kTopicNameInvalid = 0x90,
  kPacketIdentifierInUse = 0x91,
  kPacketIdentifierNotFound = 0x92,
  kReceiveMaximumExceeded = 0x93,
  kTopicAliasInvalid = 0x94,
  kPacketTooLarge = 0x95,
  kMessageRateTooHigh = 0x96,
  kQuotaExceeded = 0x97,
  kAdministrativeAction = 0x98,
  kPayloadFormatInvalid = 0x99,
  kRetainNotSupported = 0x9A,
  kQosNotSupported = 0x9B,
  kUseAnotherServer = 0x9C,
  kServerMoved = 0x9D,
  kSharedSubscriptionsNotSupported = 0x9E,
  kConnectionRateExceeded = 0x9F,
  kMaximumConnectTime = 0xA0,
  kSubscriptionIdentifiersNotSupported = 0xA1,
  kWildcardSubscriptionsNotSupported = 0xA2,
};

const char* ToString(ReasonCode code);
inline bool IsError(ReasonCode code) { return static_cast<uint8_t>(code) >= 0x80; }

// MQTT 3.1.1 CONNACK return codes (§3.2.2.3) from a v5 reason code.
// 0 accepted, 1 unacceptable protocol version, 2 identifier rejected,
// 4 bad user name or password, 5 not authorized (also Banned and Bad
// authentication method), 3 server unavailable for every other error.
uint8_t ToV3ConnackCode(ReasonCode code);
// The reverse for codes 0..5; nullopt for the reserved 6..255.
std::optional<ReasonCode> FromV3ConnackCode(uint8_t code);

// Whether a v5 packet of that kind may carry `code` (the reason code tables
// of §3.2.2.2, §3.4.2.1, §3.5.2.1, §3.6.2.1, §3.7.2.1, §3.9.3, §3.11.3,
// §3.14.2.1 and §3.15.2.1). The decoder rejects others as Protocol Errors.
bool IsValidConnackReason(ReasonCode code);
bool IsValidPubackReason(ReasonCode code);  // PUBACK and PUBREC
bool IsValidPubrelReason(ReasonCode code);  // PUBREL and PUBCOMP
bool IsValidSubackReason(ReasonCode code);
bool IsValidUnsubackReason(ReasonCode code);
bool IsValidDisconnectReason(ReasonCode code);
bool IsValidAuthReason(ReasonCode code);

}  // namespace estuary::mqtt
