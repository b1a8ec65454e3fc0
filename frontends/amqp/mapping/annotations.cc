#include "frontends/amqp/mapping/annotations.h"

#include <proton/codec/vector.hpp>
#include <proton/error.hpp>
#include <proton/message.hpp>
#include <proton/symbol.hpp>

#include "frontends/amqp/mapping/mapping.h"
#include "model/topic.h"

namespace estuary::amqp::annotations {

const proton::annotation_key& Key(std::string_view name) {
  // Built once per name and thread: a symbol key costs allocations, and
  // every message looks up the same few names.
  thread_local std::map<std::string, proton::annotation_key, std::less<>> keys;
  auto found = keys.find(name);
  if (found == keys.end()) {
    found = keys.emplace(std::string(name), proton::annotation_key(proton::symbol(std::string(name)))).first;
  }
  return found->second;
}

PropertyMap ApplicationProperties(std::span<const UserProperty> user_properties) {
  PropertyMap map;
  for (const UserProperty& property : user_properties) {
    map.emplace(property.key, proton::scalar(property.value));  // keeps the first
  }
  return map;
}

bool NeedsUserPropertiesAnnotation(std::span<const UserProperty> user_properties) {
  for (size_t i = 1; i < user_properties.size(); ++i) {
    if (!(user_properties[i - 1].key < user_properties[i].key)) return true;
  }
  return false;
}

std::optional<std::vector<UserProperty>> ReadUserProperties(const AnnotationMap& annotations) {
  if (annotations.empty()) return std::nullopt;
  auto found = annotations.find(Key(kUserPropertiesAnnotation));
  if (found == annotations.end() || found->second.type() != proton::LIST) return std::nullopt;
  std::vector<proton::value> items;
  proton::get(found->second, items);
  if (items.size() % 2 != 0) return std::nullopt;
  std::vector<UserProperty> properties;
  properties.reserve(items.size() / 2);
  for (size_t i = 0; i < items.size(); i += 2) {
    if (items[i].type() != proton::STRING || items[i + 1].type() != proton::STRING) {
      return std::nullopt;
    }
    UserProperty property{proton::get<std::string>(items[i]), proton::get<std::string>(items[i + 1])};
    if (!IsValidMqttUtf8(property.key) || !IsValidMqttUtf8(property.value)) return std::nullopt;
    properties.push_back(std::move(property));
  }
  return properties;
}

std::optional<uint8_t> ReadPayloadFormat(const AnnotationMap& annotations) {
  if (annotations.empty()) return std::nullopt;
  auto found = annotations.find(Key(kPayloadFormatAnnotation));
  if (found == annotations.end() || found->second.type() != proton::UBYTE) return std::nullopt;
  auto format = proton::get<uint8_t>(found->second);
  if (format > 1) return std::nullopt;  // MQTT 5 defines 0 and 1 only
  return format;
}

std::optional<bool> ReadBool(const AnnotationMap& annotations, std::string_view name) {
  if (annotations.empty()) return std::nullopt;
  auto found = annotations.find(Key(name));
  if (found == annotations.end() || found->second.type() != proton::BOOLEAN) return std::nullopt;
  return proton::get<bool>(found->second);
}

AnnotationMap MqttAnnotations(const Message& message, std::span<const UserProperty> user_properties,
                              const MqttDetails& details) {
  AnnotationMap map;
  if (details.retain) map[Key(kRetainAnnotation)] = true;
  if (NeedsUserPropertiesAnnotation(user_properties)) {
    std::vector<proton::value> items;
    items.reserve(user_properties.size() * 2);
    for (const UserProperty& property : user_properties) {
      items.emplace_back(property.key);
      items.emplace_back(property.value);
    }
    map[Key(kUserPropertiesAnnotation)] = items;
  }
  const auto& format = message.properties.payload_format;
  if (format && !details.string_body) map[Key(kPayloadFormatAnnotation)] = *format;
  const auto& content_type = message.properties.content_type;
  if (content_type && content_type->empty()) map[Key(kEmptyContentTypeAnnotation)] = true;
  return map;
}

bool IsWellFormed(const proton::value& value) {
  // Written with a sentinel after it and read back, a well-formed value
  // leaves the sentinel where it was.
  proton::message probe;
  probe.body(std::vector<proton::value>{value, proton::value(proton::symbol("end"))});
  std::vector<proton::value> back;
  try {
    proton::message decoded;
    decoded.decode(probe.encode());
    proton::get(decoded.body(), back);
  } catch (const proton::error&) {
    return false;
  }
  return back.size() == 2 && back[1].type() == proton::SYMBOL &&
         proton::get<proton::symbol>(back[1]) == "end";
}

bool AllWellFormed(const AnnotationMap& annotations) {
  for (const auto& [key, value] : annotations) {
    if (!IsWellFormed(value)) return false;
  }
  return true;
}

void AddDeliveryAnnotations(const Message& message, std::span<const uint32_t> subscription_ids,
                            AnnotationMap& annotations) {
  if (!subscription_ids.empty()) {
    std::vector<proton::value> ids(subscription_ids.begin(), subscription_ids.end());
    annotations[Key(kSubscriptionIdsAnnotation)] = ids;
  }
  if (!message.origin.client_id.empty()) {
    annotations[Key(kOriginClientIdAnnotation)] = message.origin.client_id;
  }
  const char* protocol = message.origin.protocol == Protocol::kMqtt   ? "mqtt"
                         : message.origin.protocol == Protocol::kAmqp ? "amqp"
                                                                      : "internal";
  annotations[Key(kOriginProtocolAnnotation)] = proton::symbol(protocol);
}

}  // namespace estuary::amqp::annotations
