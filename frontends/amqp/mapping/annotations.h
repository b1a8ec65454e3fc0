#pragma once
// The broker's own message annotations, inside the mapping only: what the
// model implies for them (MappedAnnotations), how to read the ones a sender
// may set, and the application-properties map a list of MQTT user
// properties becomes. docs/mapping.md has the table.
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <proton/annotation_key.hpp>
#include <proton/scalar.hpp>
#include <proton/value.hpp>

#include "frontends/amqp/mapping/mapping.h"
#include "model/message.h"

namespace estuary::amqp::annotations {

using AnnotationMap = std::map<proton::annotation_key, proton::value>;
using PropertyMap = std::map<std::string, proton::scalar>;

// The symbol key `name` (the mapping's own names: kept per thread).
const proton::annotation_key& Key(std::string_view name);

// application-properties for a list of user properties: string values, the
// first value of a repeated key.
PropertyMap ApplicationProperties(std::span<const UserProperty> user_properties);

// True when ApplicationProperties loses something: a repeated key, or an
// order other than the byte order of the keys (Proton sorts maps by key).
bool NeedsUserPropertiesAnnotation(std::span<const UserProperty> user_properties);

// Readers of annotations a sender may set: nullopt when absent or not of
// the documented type (a malformed one is carried as a foreign annotation).
std::optional<std::vector<UserProperty>> ReadUserProperties(const AnnotationMap& annotations);
std::optional<uint8_t> ReadPayloadFormat(const AnnotationMap& annotations);
std::optional<bool> ReadBool(const AnnotationMap& annotations, std::string_view name);

// The MQTT-detail annotations the model implies, for a body that is (or
// is not) an amqp-value string made from a UTF-8 payload.
struct MqttDetails {
  bool retain = false;
  bool string_body = false;
};
AnnotationMap MqttAnnotations(const Message& message, std::span<const UserProperty> user_properties,
                              const MqttDetails& details);

// The keys MqttAnnotations may write; a sender's values for them are kept
// only where they differ from what the model implies.
inline constexpr std::string_view kMqttDetailKeys[] = {
    kRetainAnnotation, kUserPropertiesAnnotation, kPayloadFormatAnnotation,
    kEmptyContentTypeAnnotation};

// The keys only the broker sets: a sender's values are dropped.
inline constexpr std::string_view kBrokerKeys[] = {
    kSubscriptionIdsAnnotation, kOriginClientIdAnnotation, kOriginProtocolAnnotation,
    kAmqpValueBinaryAnnotation};

// False for a value Proton decoded but cannot write back on its own: a
// described value with no value after its descriptor, whose encoding
// would swallow whatever follows it in a map.
bool IsWellFormed(const proton::value& value);
bool AllWellFormed(const AnnotationMap& annotations);

// Origin and subscription identifiers, for one delivery.
void AddDeliveryAnnotations(const Message& message, std::span<const uint32_t> subscription_ids,
                            AnnotationMap& annotations);

}  // namespace estuary::amqp::annotations
