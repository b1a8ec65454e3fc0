#include "frontends/amqp/mapping/mapping.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

#include <proton/binary.hpp>
#include <proton/codec/map.hpp>
#include <proton/error.hpp>
#include <proton/message_id.hpp>
#include <proton/uuid.hpp>

#include "frontends/amqp/mapping/annotations.h"
#include "frontends/amqp/mapping/body.h"
#include "model/topic.h"

namespace estuary::amqp {

namespace {

using annotations::AnnotationMap;
using annotations::Key;
using annotations::PropertyMap;

AnnotationMap ReadAnnotations(const proton::message::annotation_map& map) {
  AnnotationMap result;
  if (!map.empty()) proton::get(map.value(), result);
  return result;
}

PropertyMap ReadProperties(const proton::message::property_map& map) {
  PropertyMap result;
  if (!map.empty()) proton::get(map.value(), result);
  return result;
}

// MQTT correlation data for an AMQP correlation-id: binary as is, a string
// as its UTF-8 bytes, a ulong in decimal, a uuid in its 36-character form.
std::optional<std::string> CorrelationBytes(const proton::message_id& id) {
  switch (id.type()) {
    case proton::BINARY: {
      auto bytes = proton::get<proton::binary>(id);
      return std::string(bytes.begin(), bytes.end());
    }
    case proton::STRING:
      return proton::get<std::string>(id);
    case proton::ULONG:
      return std::to_string(proton::get<uint64_t>(id));
    case proton::UUID:
      return proton::get<proton::uuid>(id).str();
    default:
      return std::nullopt;
  }
}

// The earlier of ttl (relative to now) and absolute-expiry-time.
std::optional<int64_t> ExpiryAt(const proton::message& in, int64_t now_ms) {
  std::optional<int64_t> at;
  const int64_t ttl = in.ttl().milliseconds();
  const int64_t absolute = in.expiry_time().milliseconds();
  if (ttl > 0) at = now_ms + ttl;
  if (absolute != 0) at = at ? std::min(*at, absolute) : absolute;
  return at;
}

bool IsMqttContentType(const std::string& text) { return IsValidMqttUtf8(text); }
bool IsMqttResponseTopic(const std::string& text) { return ValidateTopicName(text).has_value(); }

void MapProperties(const proton::message& in, const AnnotationMap& annotations, int64_t now_ms,
                   Message& message) {
  MessageProperties& properties = message.properties;
  // Only what MQTT may carry: a content type of MQTT UTF-8, a reply-to that
  // is a valid topic name. Anything else stays in the extras, for AMQP.
  const std::string content_type = in.content_type();
  if (!content_type.empty()) {
    if (IsMqttContentType(content_type)) properties.content_type = content_type;
  } else if (annotations::ReadBool(annotations, kEmptyContentTypeAnnotation) == true) {
    properties.content_type = "";
  }
  if (IsMqttResponseTopic(in.reply_to())) properties.response_topic = in.reply_to();
  properties.correlation_data = CorrelationBytes(in.correlation_id());
  properties.expiry_at_ms = ExpiryAt(in, now_ms);
}

// A message made only once something is set on it: most incoming
// messages have no extras, and building one costs more than the mapping.
class LazyMessage {
 public:
  proton::message* operator->() {
    if (!message_) message_.emplace();
    return &*message_;
  }
  bool empty() const { return !message_.has_value(); }

 private:
  std::optional<proton::message> message_;
};

// Every header and properties field the model has no place for, as set
// fields of `extras`.
void CopyUnmappedFields(const proton::message& in, std::string_view topic, LazyMessage& extras) {
  if (in.priority() != proton::message::default_priority) extras->priority(in.priority());
  if (in.first_acquirer()) extras->first_acquirer(true);
  if (in.delivery_count() != 0) extras->delivery_count(in.delivery_count());
  if (in.id().type() != proton::NULL_TYPE) extras->id(in.id());
  if (!in.user().empty()) extras->user(in.user());
  if (!in.to().empty() && in.to() != topic) extras->to(in.to());
  if (!in.subject().empty()) extras->subject(in.subject());
  const std::string content_type = in.content_type();
  if (!content_type.empty() && !IsMqttContentType(content_type)) extras->content_type(content_type);
  const std::string reply_to = in.reply_to();
  if (!reply_to.empty() && !IsMqttResponseTopic(reply_to)) extras->reply_to(reply_to);
  const proton::message_id correlation = in.correlation_id();
  if (correlation.type() != proton::NULL_TYPE && correlation.type() != proton::BINARY) {
    extras->correlation_id(correlation);  // so that it goes back typed
  }
  if (!in.content_encoding().empty()) extras->content_encoding(in.content_encoding());
  if (in.expiry_time().milliseconds() != 0) extras->expiry_time(in.expiry_time());
  if (in.creation_time().milliseconds() != 0) extras->creation_time(in.creation_time());
  if (!in.group_id().empty()) extras->group_id(in.group_id());
  if (in.group_sequence() != 0) extras->group_sequence(in.group_sequence());
  if (!in.reply_to_group_id().empty()) extras->reply_to_group_id(in.reply_to_group_id());
  if (!in.delivery_annotations().empty()) {
    extras->delivery_annotations() = in.delivery_annotations();
  }
}

// User properties from application-properties, or from the annotation when
// it agrees with them. Returns true when the way back rebuilds the
// application-properties exactly (else they travel in the extras).
bool MapUserProperties(const PropertyMap& application, const AnnotationMap& annotations,
                       std::vector<UserProperty>& out) {
  if (auto listed = annotations::ReadUserProperties(annotations)) {
    if (annotations::ApplicationProperties(*listed) == application) {
      out = std::move(*listed);
      return true;
    }
  }
  for (const auto& [key, value] : application) {
    if (value.type() != proton::STRING) continue;
    std::string text = proton::get<std::string>(value);
    if (IsValidMqttUtf8(key) && IsValidMqttUtf8(text)) out.push_back({key, std::move(text)});
  }
  return out.size() == application.size();
}

struct MappedBody {
  bool encoded = false;       // the marker is then the last user property
  bool value_binary = false;  // a plain payload from an amqp-value binary
};

// Sets the payload and payload format.
Expected<MappedBody, MappingError> MapBody(const proton::message& in,
                                           std::optional<uint8_t> format_annotation, Message& message) {
  auto& user_properties = message.properties.user_properties;
  std::optional<body::Plain> plain = body::AsPlain(in, format_annotation);
  if (!body::TakesEncodedPath(plain, user_properties)) {
    message.payload = MakePayload(std::move(plain->payload));
    message.properties.payload_format = plain->payload_format;
    return MappedBody{false, plain->value_binary};
  }
  std::string encoded = body::Encode(in);
  user_properties.push_back({std::string(kAmqpBodyUserProperty), std::string(body::Kind(in))});
  // A body Proton decodes but cannot write back as it read it (malformed
  // described values, for one) would not survive the way back.
  if (!body::RestoresEncodedBody(encoded, format_annotation, user_properties, nullptr)) {
    return MakeError(MappingError{"amqp:decode-error", "the message body cannot be re-encoded"});
  }
  message.payload = MakePayload(std::move(encoded));
  message.properties.payload_format = format_annotation;
  return MappedBody{true, false};
}

// What FromModel sends as an amqp-value string.
bool IsStringBody(const Message& message, bool encoded, bool extras_hold_format) {
  return !encoded && !extras_hold_format && message.properties.payload_format == 1 &&
         IsValidMqttUtf8(message.payload ? std::string_view(*message.payload) : "");
}

// Drops a sender's MQTT-detail annotations where they say what the model
// implies anyway; the others stay, to go back to AMQP as they came.
void DropImpliedAnnotations(const Message& message, bool encoded, AnnotationMap& annotations) {
  if (annotations.empty()) return;
  std::span<const UserProperty> user_properties = message.properties.user_properties;
  if (encoded) user_properties = user_properties.first(user_properties.size() - 1);
  const AnnotationMap implied = annotations::MqttAnnotations(
      message, user_properties, {message.retain, IsStringBody(message, encoded, false)});
  for (std::string_view name : annotations::kMqttDetailKeys) {
    auto found = annotations.find(Key(name));
    auto expected = implied.find(Key(name));
    if (found != annotations.end() && expected != implied.end() &&
        found->second == expected->second) {
      annotations.erase(found);
    }
  }
}

// Message::amqp_extras: what remains, as one encoded message (null when
// nothing does).
Payload EncodeExtras(const proton::message& in, std::string_view topic,
                     const AnnotationMap& annotations, bool application_mapped) {
  LazyMessage extras;
  CopyUnmappedFields(in, topic, extras);
  if (!annotations.empty()) extras->message_annotations() = annotations;
  if (!application_mapped) extras->properties() = in.properties();
  if (extras.empty()) return nullptr;  // nothing set: it would encode as the empty message
  std::vector<char> bytes = extras->encode();
  if (std::string_view(bytes.data(), bytes.size()) == body::EmptyMessageEncoding()) return nullptr;
  return MakePayload(std::string(bytes.begin(), bytes.end()));
}

Expected<Message, MappingError> Translate(const proton::message& in,
                                          const InboundContext& context) {
  Message message;
  message.topic = std::string(context.topic);
  message.qos = context.settled ? QoS::kAtMostOnce : QoS::kAtLeastOnce;
  message.durable = in.durable();
  message.origin = Origin{Protocol::kAmqp, std::string(context.container_id), context.node};

  AnnotationMap annotations = ReadAnnotations(in.message_annotations());
  if (!annotations::AllWellFormed(annotations) ||
      !annotations::AllWellFormed(ReadAnnotations(in.delivery_annotations()))) {
    return MakeError(MappingError{"amqp:decode-error", "malformed value in annotations"});
  }
  if (!annotations.empty()) {
    for (std::string_view key : annotations::kBrokerKeys) annotations.erase(Key(key));
  }
  message.retain = annotations::ReadBool(annotations, kRetainAnnotation).value_or(false);
  MapProperties(in, annotations, context.now_ms, message);
  const bool application_mapped = MapUserProperties(ReadProperties(in.properties()), annotations,
                                                    message.properties.user_properties);
  auto mapped_body = MapBody(in, annotations::ReadPayloadFormat(annotations), message);
  if (!mapped_body) return MakeError(std::move(mapped_body.error()));
  DropImpliedAnnotations(message, mapped_body->encoded, annotations);
  if (mapped_body->value_binary) {
    annotations[Key(kAmqpValueBinaryAnnotation)] = true;
  }
  message.amqp_extras = EncodeExtras(in, context.topic, annotations, application_mapped);
  return message;
}

void SetExpiry(const Message& message, int64_t now_ms, proton::message& out) {
  const auto& at = message.properties.expiry_at_ms;
  if (!at) return;
  const int64_t absolute = out.expiry_time().milliseconds();
  if (absolute != 0 && absolute == *at) return;  // the sender's own deadline, kept as given
  const int64_t remaining = *at - now_ms;
  if (remaining > int64_t{std::numeric_limits<uint32_t>::max()}) {
    // Beyond what ttl (a uint in milliseconds) can say.
    if (absolute == 0) out.expiry_time(proton::timestamp(*at));
    return;
  }
  out.ttl(proton::duration(std::max<int64_t>(remaining, 1)));
}

void SetProperties(const Message& message, proton::message& out) {
  const MessageProperties& properties = message.properties;
  if (out.to().empty()) out.to(message.topic);
  if (properties.content_type) out.content_type(*properties.content_type);
  if (properties.response_topic) out.reply_to(*properties.response_topic);
  const proton::message_id kept = out.correlation_id();
  if (kept.type() != proton::NULL_TYPE && CorrelationBytes(kept) == properties.correlation_data) {
    return;  // the sender's typed correlation-id
  }
  if (properties.correlation_data) {
    out.correlation_id(proton::binary(*properties.correlation_data));
  } else if (kept.type() != proton::NULL_TYPE) {
    out.correlation_id(proton::message_id());
  }
}

struct BodyHints {
  bool extras_hold_format = false;  // a sender's payload-format annotation was kept
  bool value_binary = false;        // the sender's bytes were an amqp-value binary
};

// Sets the body; returns the user properties that remain once an encoded
// body's marker is taken off, and whether the body is a string.
std::span<const UserProperty> SetBody(const Message& message, const BodyHints& hints,
                                      proton::message& out, bool& string_body) {
  std::span<const UserProperty> user_properties = message.properties.user_properties;
  const std::string_view payload = message.payload ? std::string_view(*message.payload) : "";
  const auto& format = message.properties.payload_format;
  string_body = false;
  if (body::RestoresEncodedBody(payload, format, user_properties, &out)) {
    return user_properties.first(user_properties.size() - 1);
  }
  if (IsStringBody(message, false, hints.extras_hold_format)) {
    out.body(std::string(payload));
    out.inferred(false);
    string_body = true;
  } else {
    out.body(proton::binary(std::string(payload)));
    out.inferred(!hints.value_binary);
  }
  return user_properties;
}

}  // namespace

std::string_view TopicOfAddress(std::string_view address) {
  for (std::string_view scheme : {std::string_view("amqp://"), std::string_view("amqps://")}) {
    if (address.substr(0, scheme.size()) != scheme) continue;
    const std::string_view rest = address.substr(scheme.size());
    const size_t slash = rest.find('/');
    return slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  }
  return address;
}

Expected<Message, MappingError> ToModel(const proton::message& in, const InboundContext& context) {
  if (auto valid = ValidateTopicName(context.topic); !valid) {
    return MakeError(MappingError{"amqp:invalid-field",
                                  std::string("address is not a valid topic name: ") +
                                      ToString(valid.error())});
  }
  try {
    return Translate(in, context);
  } catch (const proton::error& error) {
    return MakeError(MappingError{"amqp:decode-error", error.what()});
  }
}

void FromModel(const core::Delivery& delivery, int64_t now_ms, proton::message& out) {
  out.clear();
  const Message& message = *delivery.message;
  if (message.amqp_extras) {
    try {
      out.decode(std::vector<char>(message.amqp_extras->begin(), message.amqp_extras->end()));
    } catch (const proton::error&) {
      out.clear();  // written by Translate: cannot happen
    }
  }
  AnnotationMap annotations = ReadAnnotations(out.message_annotations());
  BodyHints hints;
  hints.extras_hold_format = annotations::ReadPayloadFormat(annotations).has_value();
  hints.value_binary = !annotations.empty() && annotations.erase(Key(kAmqpValueBinaryAnnotation)) > 0;
  out.durable(message.durable);
  SetExpiry(message, now_ms, out);
  SetProperties(message, out);
  bool string_body = false;
  const std::span<const UserProperty> user_properties =
      SetBody(message, hints, out, string_body);
  if (out.properties().empty() && !user_properties.empty()) {
    out.properties() = annotations::ApplicationProperties(user_properties);
  }
  for (auto& [key, value] :
       annotations::MqttAnnotations(message, user_properties, {delivery.retain, string_body})) {
    annotations.insert_or_assign(key, value);
  }
  annotations::AddDeliveryAnnotations(message, delivery.subscription_ids, annotations);
  out.message_annotations() = annotations;
}

}  // namespace estuary::amqp
