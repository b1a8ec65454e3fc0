#include "frontends/mqtt/codec/properties.h"

#include <array>
#include <initializer_list>
#include <optional>
#include <string>
#include <type_traits>

namespace estuary::mqtt {
namespace {

enum class PropertyType : uint8_t {
  kByte, kTwoByte, kFourByte, kVariableByte, kUtf8, kBinary, kUtf8Pair,
};

// What a value must satisfy beyond its type.
enum class ValueRule : uint8_t { kAny, kBoolean, kNonZero };

constexpr uint16_t Scopes(std::initializer_list<PropertyScope> scopes) {
  uint16_t bits = 0;
  for (PropertyScope scope : scopes) bits |= static_cast<uint16_t>(scope);
  return bits;
}

using S = PropertyScope;
constexpr uint16_t kPublishLike = Scopes({S::kPublish, S::kWill});
constexpr uint16_t kWithReasonString =
    Scopes({S::kConnack, S::kPubAck, S::kSuback, S::kUnsuback, S::kDisconnect, S::kAuth});
constexpr uint16_t kEveryScope = 0x07FF;
// Topic Alias 0 has a reason code of its own (v5 §3.3.2.3.4).
constexpr uint8_t kTopicAliasId = 0x23;

// One row of the property table (§2.2.2.2). At most one field pointer is
// set; the two list-valued properties are handled by their type.
struct PropertySpec {
  uint8_t id = 0;
  const char* name = "";
  PropertyType type = PropertyType::kByte;
  uint16_t scopes = 0;
  ValueRule rule = ValueRule::kAny;
  std::optional<uint8_t> Properties::*byte_field = nullptr;
  std::optional<uint16_t> Properties::*two_byte_field = nullptr;
  std::optional<uint32_t> Properties::*four_byte_field = nullptr;
  std::optional<std::string> Properties::*string_field = nullptr;
};

using P = Properties;
using R = ValueRule;

constexpr PropertySpec Byte(uint8_t id, const char* name, uint16_t scopes, ValueRule rule,
                            std::optional<uint8_t> P::*field) {
  PropertySpec spec{id, name, PropertyType::kByte, scopes, rule};
  spec.byte_field = field;
  return spec;
}

constexpr PropertySpec TwoByte(uint8_t id, const char* name, uint16_t scopes, ValueRule rule,
                               std::optional<uint16_t> P::*field) {
  PropertySpec spec{id, name, PropertyType::kTwoByte, scopes, rule};
  spec.two_byte_field = field;
  return spec;
}

constexpr PropertySpec FourByte(uint8_t id, const char* name, uint16_t scopes, ValueRule rule,
                                std::optional<uint32_t> P::*field) {
  PropertySpec spec{id, name, PropertyType::kFourByte, scopes, rule};
  spec.four_byte_field = field;
  return spec;
}

constexpr PropertySpec Text(uint8_t id, const char* name, PropertyType type, uint16_t scopes,
                            std::optional<std::string> P::*field) {
  PropertySpec spec{id, name, type, scopes, ValueRule::kAny};
  spec.string_field = field;
  return spec;
}

constexpr PropertyType kUtf8 = PropertyType::kUtf8;
constexpr PropertyType kBinary = PropertyType::kBinary;
constexpr uint16_t kConnectConnack = Scopes({S::kConnect, S::kConnack});
constexpr uint16_t kConnackOnly = Scopes({S::kConnack});
constexpr uint16_t kAuthScopes = Scopes({S::kConnect, S::kConnack, S::kAuth});

// In identifier order, which is also the order they are written in.
constexpr std::array<PropertySpec, 27> kSpecs = {{
    Byte(0x01, "Payload Format Indicator", kPublishLike, R::kBoolean,
         &P::payload_format_indicator),
    FourByte(0x02, "Message Expiry Interval", kPublishLike, R::kAny,
             &P::message_expiry_interval),
    Text(0x03, "Content Type", kUtf8, kPublishLike, &P::content_type),
    Text(0x08, "Response Topic", kUtf8, kPublishLike, &P::response_topic),
    Text(0x09, "Correlation Data", kBinary, kPublishLike, &P::correlation_data),
    {0x0B, "Subscription Identifier", PropertyType::kVariableByte,
     Scopes({S::kPublish, S::kSubscribe}), R::kNonZero},
    FourByte(0x11, "Session Expiry Interval", Scopes({S::kConnect, S::kConnack, S::kDisconnect}),
             R::kAny, &P::session_expiry_interval),
    Text(0x12, "Assigned Client Identifier", kUtf8, kConnackOnly,
         &P::assigned_client_identifier),
    TwoByte(0x13, "Server Keep Alive", kConnackOnly, R::kAny, &P::server_keep_alive),
    Text(0x15, "Authentication Method", kUtf8, kAuthScopes, &P::authentication_method),
    Text(0x16, "Authentication Data", kBinary, kAuthScopes, &P::authentication_data),
    Byte(0x17, "Request Problem Information", Scopes({S::kConnect}), R::kBoolean,
         &P::request_problem_information),
    FourByte(0x18, "Will Delay Interval", Scopes({S::kWill}), R::kAny, &P::will_delay_interval),
    Byte(0x19, "Request Response Information", Scopes({S::kConnect}), R::kBoolean,
         &P::request_response_information),
    Text(0x1A, "Response Information", kUtf8, kConnackOnly, &P::response_information),
    Text(0x1C, "Server Reference", kUtf8, Scopes({S::kConnack, S::kDisconnect}),
         &P::server_reference),
    Text(0x1F, "Reason String", kUtf8, kWithReasonString, &P::reason_string),
    TwoByte(0x21, "Receive Maximum", kConnectConnack, R::kNonZero, &P::receive_maximum),
    TwoByte(0x22, "Topic Alias Maximum", kConnectConnack, R::kAny, &P::topic_alias_maximum),
    TwoByte(0x23, "Topic Alias", Scopes({S::kPublish}), R::kNonZero, &P::topic_alias),
    Byte(0x24, "Maximum QoS", kConnackOnly, R::kBoolean, &P::maximum_qos),
    Byte(0x25, "Retain Available", kConnackOnly, R::kBoolean, &P::retain_available),
    {0x26, "User Property", PropertyType::kUtf8Pair, kEveryScope},
    FourByte(0x27, "Maximum Packet Size", kConnectConnack, R::kNonZero,
             &P::maximum_packet_size),
    Byte(0x28, "Wildcard Subscription Available", kConnackOnly, R::kBoolean,
         &P::wildcard_subscription_available),
    Byte(0x29, "Subscription Identifier Available", kConnackOnly, R::kBoolean,
         &P::subscription_identifier_available),
    Byte(0x2A, "Shared Subscription Available", kConnackOnly, R::kBoolean,
         &P::shared_subscription_available),
}};

const PropertySpec* FindSpec(uint32_t id) {
  for (const PropertySpec& spec : kSpecs) {
    if (spec.id == id) return &spec;
  }
  return nullptr;
}

bool Allowed(const PropertySpec& spec, PropertyScope scope) {
  return (spec.scopes & static_cast<uint16_t>(scope)) != 0;
}

template <typename Value>
void Store(WireReader& reader, const PropertySpec& spec, std::optional<Value>& field,
           Value value) {
  if (!reader.ok()) return;
  if (field.has_value()) {
    reader.Fail(ReasonCode::kProtocolError, std::string("duplicate ") + spec.name);
    return;
  }
  if constexpr (std::is_integral_v<Value>) {
    if (spec.rule == ValueRule::kBoolean && value > 1) {
      reader.Fail(ReasonCode::kProtocolError, std::string(spec.name) + " not 0 or 1");
      return;
    }
    if (spec.rule == ValueRule::kNonZero && value == 0) {
      const ReasonCode reason = spec.id == kTopicAliasId ? ReasonCode::kTopicAliasInvalid
                                                : ReasonCode::kProtocolError;
      reader.Fail(reason, std::string(spec.name) + " of 0");
      return;
    }
  }
  field = std::move(value);
}

void ReadSubscriptionIdentifier(WireReader& reader, PropertyScope scope,
                                Properties& properties) {
  const uint32_t value = reader.VariableByteInteger();
  if (!reader.ok()) return;
  if (value == 0) {
    reader.Fail(ReasonCode::kProtocolError, "Subscription Identifier of 0");
  } else if (scope != PropertyScope::kPublish && !properties.subscription_identifiers.empty()) {
    reader.Fail(ReasonCode::kProtocolError, "duplicate Subscription Identifier");
  } else {
    properties.subscription_identifiers.push_back(value);
  }
}

void WriteList(const PropertySpec& spec, const Properties& properties, WireWriter& writer) {
  if (spec.type == PropertyType::kVariableByte) {
    for (uint32_t value : properties.subscription_identifiers) {
      writer.Byte(spec.id);
      writer.VariableByteInteger(value);
    }
    return;
  }
  for (const auto& [key, value] : properties.user_properties) {
    writer.Byte(spec.id);
    writer.String(key);
    writer.String(value);
  }
}

void ReadValue(WireReader& reader, const PropertySpec& spec, PropertyScope scope,
               Properties& properties) {
  switch (spec.type) {
    case PropertyType::kByte:
      return Store(reader, spec, properties.*spec.byte_field, reader.Byte());
    case PropertyType::kTwoByte:
      return Store(reader, spec, properties.*spec.two_byte_field, reader.TwoByteInteger());
    case PropertyType::kFourByte:
      return Store(reader, spec, properties.*spec.four_byte_field, reader.FourByteInteger());
    case PropertyType::kUtf8:
      return Store(reader, spec, properties.*spec.string_field, reader.Utf8String());
    case PropertyType::kBinary:
      return Store(reader, spec, properties.*spec.string_field, reader.BinaryData());
    case PropertyType::kVariableByte:
      return ReadSubscriptionIdentifier(reader, scope, properties);
    case PropertyType::kUtf8Pair: {
      std::string key = reader.Utf8String();
      std::string value = reader.Utf8String();
      if (reader.ok()) properties.user_properties.emplace_back(std::move(key), std::move(value));
      return;
    }
  }
}

void ReadProperty(WireReader& reader, PropertyScope scope, Properties& properties) {
  const uint32_t id = reader.VariableByteInteger();
  if (!reader.ok()) return;
  const PropertySpec* spec = FindSpec(id);
  if (spec == nullptr) {
    reader.Fail(ReasonCode::kMalformedPacket, "unknown property " + std::to_string(id));
    return;
  }
  if (!Allowed(*spec, scope)) {
    reader.Fail(ReasonCode::kMalformedPacket,  // §2.2.2.2: an identifier not valid for the packet type
                std::string(spec->name) + " not allowed in this packet");
    return;
  }
  ReadValue(reader, *spec, scope, properties);
}

void WriteSpec(const PropertySpec& spec, const Properties& properties, WireWriter& writer) {
  switch (spec.type) {
    case PropertyType::kByte:
      if (const auto& field = properties.*spec.byte_field) {
        writer.Byte(spec.id);
        writer.Byte(*field);
      }
      return;
    case PropertyType::kTwoByte:
      if (const auto& field = properties.*spec.two_byte_field) {
        writer.Byte(spec.id);
        writer.TwoByteInteger(*field);
      }
      return;
    case PropertyType::kFourByte:
      if (const auto& field = properties.*spec.four_byte_field) {
        writer.Byte(spec.id);
        writer.FourByteInteger(*field);
      }
      return;
    case PropertyType::kUtf8:
    case PropertyType::kBinary:
      if (const auto& field = properties.*spec.string_field) {
        writer.Byte(spec.id);
        writer.String(*field);
      }
      return;
    case PropertyType::kVariableByte:
    case PropertyType::kUtf8Pair:
      return WriteList(spec, properties, writer);
  }
}

void WriteEach(const Properties& properties, WireWriter& writer) {
  for (const PropertySpec& spec : kSpecs) WriteSpec(spec, properties, writer);
}

}  // namespace

Properties ReadProperties(WireReader& reader, PropertyScope scope) {
  Properties properties;
  const uint32_t length = reader.VariableByteInteger();
  WireReader list(reader.Bytes(length));
  if (!reader.ok()) return properties;
  while (list.ok() && !list.empty()) ReadProperty(list, scope, properties);
  if (list.ok() && properties.authentication_data && !properties.authentication_method) {
    list.Fail(ReasonCode::kProtocolError, "Authentication Data without Authentication Method");
  }
  if (!list.ok()) reader.Fail(list.TakeError());
  return properties;
}

void WriteProperties(const Properties& properties, WireWriter& writer) {
  writer.VariableByteInteger(static_cast<uint32_t>(PropertiesSize(properties)));
  WriteEach(properties, writer);
}

size_t PropertiesSize(const Properties& properties) {
  WireWriter counter;
  WriteEach(properties, counter);
  return counter.size();
}

}  // namespace estuary::mqtt
