#include "frontends/amqp/mapping/round_trip_check.h"

#include <memory>
#include <sstream>

#include <proton/error.hpp>
#include <proton/message_id.hpp>

#include "frontends/amqp/mapping/annotations.h"

namespace estuary::amqp::check {

namespace {

void CopyStrings(const proton::message& from, proton::message& to) {
  if (!from.user().empty()) to.user(from.user());
  if (!from.to().empty()) to.to(from.to());
  if (!from.subject().empty()) to.subject(from.subject());
  if (!from.reply_to().empty()) to.reply_to(from.reply_to());
  if (!from.content_type().empty()) to.content_type(from.content_type());
  if (!from.content_encoding().empty()) to.content_encoding(from.content_encoding());
  if (!from.group_id().empty()) to.group_id(from.group_id());
  if (!from.reply_to_group_id().empty()) to.reply_to_group_id(from.reply_to_group_id());
}

std::string Escaped(std::string_view bytes) {
  std::string text = "\"";
  for (unsigned char c : bytes) {
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"') {
      text += static_cast<char>(c);
    } else {
      static const char kHex[] = "0123456789abcdef";
      text += "\\x";
      text += kHex[c >> 4];
      text += kHex[c & 15];
    }
  }
  return text + "\"";
}

std::string EscapedOptional(const std::optional<std::string>& text) {
  return text ? Escaped(*text) : "(absent)";
}

std::string DescribeModel(const Message& message) {
  const MessageProperties& properties = message.properties;
  std::ostringstream text;
  text << "topic=" << Escaped(message.topic)
       << " payload=" << Escaped(message.payload ? *message.payload : "") << " retain=" << message.retain
       << " durable=" << message.durable << " qos=" << int(message.qos)
       << " content_type=" << EscapedOptional(properties.content_type)
       << " response_topic=" << EscapedOptional(properties.response_topic)
       << " correlation=" << EscapedOptional(properties.correlation_data) << " format="
       << (properties.payload_format ? int(*properties.payload_format) : -1)
       << " expiry=" << properties.expiry_at_ms.value_or(-1) << " user_properties=[";
  for (const UserProperty& property : properties.user_properties) {
    text << Escaped(property.key) << ":" << Escaped(property.value) << " ";
  }
  text << "] extras=" << Escaped(message.amqp_extras ? *message.amqp_extras : "");
  return text.str();
}

// What a model must keep through model -> AMQP -> model.
std::string CompareModels(const Message& expected, const Message& actual, bool compare_extras) {
  auto bytes = [](const Payload& payload) { return payload ? *payload : std::string(); };
  bool same = expected.topic == actual.topic && bytes(expected.payload) == bytes(actual.payload) &&
              expected.properties == actual.properties && expected.retain == actual.retain &&
              expected.durable == actual.durable && expected.qos == actual.qos;
  if (compare_extras) same = same && bytes(expected.amqp_extras) == bytes(actual.amqp_extras);
  if (same) return "";
  return "model differs:\n  expected " + DescribeModel(expected) + "\n  actual   " +
         DescribeModel(actual);
}

core::Delivery DeliveryOf(const Message& message) {
  core::Delivery delivery;
  delivery.message = std::make_shared<const Message>(message);
  delivery.qos = message.qos;
  delivery.retain = message.retain;
  return delivery;
}

// `in` as the round trip should give it back.
proton::message Expected(const proton::message& in, const InboundContext& context) {
  proton::message expected = Normalized(in);
  if (expected.to().empty()) expected.to(std::string(context.topic));
  const int64_t ttl = in.ttl().milliseconds();
  const int64_t absolute = in.expiry_time().milliseconds();
  if (ttl > 0 && absolute != 0 && absolute <= context.now_ms + ttl) expected.ttl(proton::duration(0));
  auto annotations = expected.message_annotations();
  for (std::string_view key : annotations::kBrokerKeys) annotations.erase(annotations::Key(key));
  if (!context.container_id.empty()) {
    annotations.put(annotations::Key(kOriginClientIdAnnotation), std::string(context.container_id));
  }
  annotations.put(annotations::Key(kOriginProtocolAnnotation), proton::symbol("amqp"));
  expected.message_annotations() = annotations;
  return Normalized(expected);
}

}  // namespace

proton::message Normalized(const proton::message& message) {
  proton::message result;
  result.durable(message.durable());
  result.priority(message.priority());
  result.ttl(message.ttl());
  result.first_acquirer(message.first_acquirer());
  result.delivery_count(message.delivery_count());
  result.id(message.id());
  result.correlation_id(message.correlation_id());
  CopyStrings(message, result);
  result.expiry_time(message.expiry_time());
  result.creation_time(message.creation_time());
  result.group_sequence(message.group_sequence());
  result.properties() = message.properties();
  result.message_annotations() = message.message_annotations();
  result.delivery_annotations() = message.delivery_annotations();
  result.body(message.body());
  const proton::type_id type = message.body().type();
  result.inferred(message.inferred() && (type == proton::BINARY || type == proton::LIST));
  return result;
}

proton::message OverWire(const proton::message& message) {
  proton::message decoded;
  decoded.decode(message.encode());
  return decoded;
}

std::string Compare(const proton::message& expected, const proton::message& actual) {
  if (Normalized(expected).encode() == Normalized(actual).encode()) return "";
  std::ostringstream text;
  text << "AMQP message differs:\n  expected " << expected << "\n  actual   " << actual;
  return text.str();
}

std::string AmqpRoundTrip(const proton::message& in, const InboundContext& context) {
  auto model = ToModel(in, context);
  if (!model) return "";
  proton::message out;
  FromModel(DeliveryOf(*model), context.now_ms, out);
  proton::message received = OverWire(out);
  if (std::string difference = Compare(Expected(in, context), received); !difference.empty()) {
    return difference;
  }
  auto again = ToModel(received, context);
  if (!again) return "the round trip's result is rejected: " + again.error().description;
  return CompareModels(*model, *again, /*compare_extras=*/true);
}

std::string ModelRoundTrip(const Message& message, int64_t now_ms) {
  proton::message out;
  FromModel(DeliveryOf(message), now_ms, out);
  proton::message received = OverWire(out);
  InboundContext context;
  context.topic = message.topic;
  context.container_id = message.origin.client_id;
  context.node = message.origin.node;
  context.settled = message.qos == QoS::kAtMostOnce;
  context.now_ms = now_ms;
  auto back = ToModel(received, context);
  if (!back) return "rejected: " + back.error().description;
  Message expected = message;
  if (expected.qos == QoS::kExactlyOnce) expected.qos = QoS::kAtLeastOnce;  // no AMQP twin
  return CompareModels(expected, *back, /*compare_extras=*/false);
}

}  // namespace estuary::amqp::check
