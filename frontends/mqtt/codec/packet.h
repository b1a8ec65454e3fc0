#pragma once
// MQTT control packets as plain structs (MQTT 3.1, 3.1.1 and 5.0).
//
// Codec types only: no behaviour. Decoding is in decoder.h, encoding in
// encoder.h. One struct per packet; PUBACK, PUBREC, PUBREL and PUBCOMP share
// AckPacket. Version-specific fields (properties, reason codes) are simply
// ignored when encoding for 3.1/3.1.1.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "frontends/mqtt/codec/reason_code.h"

namespace estuary::mqtt {

enum class ProtocolVersion : uint8_t { kV31 = 3, kV311 = 4, kV5 = 5 };

enum class PacketType : uint8_t {
  kConnect = 1, kConnack = 2, kPublish = 3, kPuback = 4, kPubrec = 5,
  kPubrel = 6, kPubcomp = 7, kSubscribe = 8, kSuback = 9, kUnsubscribe = 10,
  kUnsuback = 11, kPingreq = 12, kPingresp = 13, kDisconnect = 14, kAuth = 15,
};
const char* ToString(PacketType type);

// Every MQTT 5.0 property (§2.2.2.2). Unset optionals are absent on the
// wire. user_properties keep their order and duplicates.
struct Properties {
  std::optional<uint8_t> payload_format_indicator;        // 0x01
  std::optional<uint32_t> message_expiry_interval;        // 0x02
  std::optional<std::string> content_type;                // 0x03
  std::optional<std::string> response_topic;              // 0x08
  std::optional<std::string> correlation_data;            // 0x09 binary
  std::vector<uint32_t> subscription_identifiers;         // 0x0B varint, repeatable in PUBLISH
  std::optional<uint32_t> session_expiry_interval;        // 0x11
  std::optional<std::string> assigned_client_identifier;  // 0x12
  std::optional<uint16_t> server_keep_alive;              // 0x13
  std::optional<std::string> authentication_method;       // 0x15
  std::optional<std::string> authentication_data;         // 0x16 binary
  std::optional<uint8_t> request_problem_information;     // 0x17
  std::optional<uint32_t> will_delay_interval;            // 0x18
  std::optional<uint8_t> request_response_information;    // 0x19
  std::optional<std::string> response_information;        // 0x1A
  std::optional<std::string> server_reference;            // 0x1C
  std::optional<std::string> reason_string;               // 0x1F
  std::optional<uint16_t> receive_maximum;                // 0x21
  std::optional<uint16_t> topic_alias_maximum;            // 0x22
  std::optional<uint16_t> topic_alias;                    // 0x23
  std::optional<uint8_t> maximum_qos;                     // 0x24
  std::optional<uint8_t> retain_available;                // 0x25
  std::vector<std::pair<std::string, std::string>> user_properties;  // 0x26
  std::optional<uint32_t> maximum_packet_size;            // 0x27
  std::optional<uint8_t> wildcard_subscription_available;    // 0x28
  std::optional<uint8_t> subscription_identifier_available;  // 0x29
  std::optional<uint8_t> shared_subscription_available;      // 0x2A

  friend bool operator==(const Properties&, const Properties&) = default;
};

struct Will {
  std::string topic;
  std::string payload;
  uint8_t qos = 0;
  bool retain = false;
  Properties properties;  // v5 will properties
  friend bool operator==(const Will&, const Will&) = default;
};

struct ConnectPacket {
  std::string protocol_name;  // "MQTT" or "MQIsdp"
  ProtocolVersion version = ProtocolVersion::kV311;
  bool clean_start = true;  // "clean session" before v5
  uint16_t keep_alive = 0;  // seconds
  std::string client_id;
  std::optional<Will> will;
  std::optional<std::string> username;
  std::optional<std::string> password;  // binary
  Properties properties;
  friend bool operator==(const ConnectPacket&, const ConnectPacket&) = default;
};

struct ConnackPacket {
  bool session_present = false;
  // v5 reason code; for 3.x encoded as the return code by ToV3ConnackCode.
  ReasonCode reason = ReasonCode::kSuccess;
  Properties properties;
  friend bool operator==(const ConnackPacket&, const ConnackPacket&) = default;
};

struct PublishPacket {
  bool dup = false;
  uint8_t qos = 0;
  bool retain = false;
  std::string topic;  // may be empty in v5 when a topic alias is used
  uint16_t packet_id = 0;  // present only for qos > 0
  Properties properties;
  std::string payload;
  friend bool operator==(const PublishPacket&, const PublishPacket&) = default;
};

// PUBACK, PUBREC, PUBREL, PUBCOMP.
struct AckPacket {
  PacketType type = PacketType::kPuback;
  uint16_t packet_id = 0;
  ReasonCode reason = ReasonCode::kSuccess;
  Properties properties;
  friend bool operator==(const AckPacket&, const AckPacket&) = default;
};

struct SubscribeOptions {
  uint8_t qos = 0;
  bool no_local = false;            // v5
  bool retain_as_published = false; // v5
  uint8_t retain_handling = 0;      // v5: 0, 1 or 2
  friend bool operator==(const SubscribeOptions&, const SubscribeOptions&) = default;
};

struct Subscription {
  std::string filter;
  SubscribeOptions options;
  friend bool operator==(const Subscription&, const Subscription&) = default;
};

struct SubscribePacket {
  uint16_t packet_id = 0;
  Properties properties;
  std::vector<Subscription> subscriptions;
  friend bool operator==(const SubscribePacket&, const SubscribePacket&) = default;
};

struct SubackPacket {
  uint16_t packet_id = 0;
  Properties properties;
  // v5 reason codes; for 3.x: 0x00/0x01/0x02 granted QoS, 0x80 failure.
  std::vector<ReasonCode> reasons;
  friend bool operator==(const SubackPacket&, const SubackPacket&) = default;
};

struct UnsubscribePacket {
  uint16_t packet_id = 0;
  Properties properties;
  std::vector<std::string> filters;
  friend bool operator==(const UnsubscribePacket&, const UnsubscribePacket&) = default;
};

struct UnsubackPacket {
  uint16_t packet_id = 0;
  Properties properties;
  std::vector<ReasonCode> reasons;  // v5 only; empty for 3.x
  friend bool operator==(const UnsubackPacket&, const UnsubackPacket&) = default;
};

struct PingreqPacket {
  friend bool operator==(const PingreqPacket&, const PingreqPacket&) = default;
};
struct PingrespPacket {
  friend bool operator==(const PingrespPacket&, const PingrespPacket&) = default;
};

struct DisconnectPacket {
  ReasonCode reason = ReasonCode::kSuccess;  // v5
  Properties properties;
  friend bool operator==(const DisconnectPacket&, const DisconnectPacket&) = default;
};

struct AuthPacket {
  ReasonCode reason = ReasonCode::kSuccess;
  Properties properties;
  friend bool operator==(const AuthPacket&, const AuthPacket&) = default;
};

using Packet = std::variant<ConnectPacket, ConnackPacket, PublishPacket, AckPacket,
                            SubscribePacket, SubackPacket, UnsubscribePacket,
                            UnsubackPacket, PingreqPacket, PingrespPacket,
                            DisconnectPacket, AuthPacket>;

PacketType TypeOf(const Packet& packet);

}  // namespace estuary::mqtt
