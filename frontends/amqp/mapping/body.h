#pragma once
// Bodies, inside the mapping only (docs/mapping.md, "Payload"). One `data`
// section and an amqp-value string become plain MQTT payloads; every other
// body travels as its own AMQP encoding, marked by the last user property
// (kAmqpBodyUserProperty). Which way a message goes is decided by two
// predicates that refer to each other, so that both round trips are exact:
// TakesEncodedPath (AMQP -> model) and RestoresEncodedBody (model -> AMQP).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <proton/message.hpp>

#include "model/message.h"

namespace estuary::amqp::body {

// What Proton writes for a message with nothing set (an empty header and
// an empty properties section).
const std::string& EmptyMessageEncoding();

// "data", "amqp-sequence", "amqp-value" or "none" (no body, or null).
std::string_view Kind(const proton::message& message);

// The AMQP encoding of the message's body sections alone.
std::string Encode(const proton::message& message);

// The bytes of a body that maps to a plain MQTT payload, with the payload
// format it implies: one data section or an amqp-value binary (format as
// annotated), or an amqp-value string of well-formed MQTT UTF-8 that
// carries no payload format annotation (format 1). Nullopt for every other
// body.
struct Plain {
  std::string payload;
  std::optional<uint8_t> payload_format;
  bool value_binary = false;  // an amqp-value binary, not a data section
};
std::optional<Plain> AsPlain(const proton::message& message,
                             std::optional<uint8_t> payload_format_annotation);

// AMQP -> model: true when the body must travel encoded, i.e. it is not
// plain, or it is plain but the user properties end with a marker that
// the way back would otherwise mistake for an encoded body.
bool TakesEncodedPath(const proton::message& message,
                      std::optional<uint8_t> payload_format_annotation,
                      std::span<const UserProperty> user_properties);
// The same, given the message's AsPlain.
bool TakesEncodedPath(const std::optional<Plain>& plain, std::span<const UserProperty> user_properties);

// model -> AMQP: true when the last user property is the marker, the
// payload is exactly the encoding of a body of the kind it names, and that
// body would take the encoded path again. Sets `out`'s body (and inferred
// flag) when `out` is not null.
bool RestoresEncodedBody(std::string_view payload, std::optional<uint8_t> payload_format,
                         std::span<const UserProperty> user_properties, proton::message* out);

}  // namespace estuary::amqp::body
