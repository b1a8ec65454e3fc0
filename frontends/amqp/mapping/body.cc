#include "frontends/amqp/mapping/body.h"

#include <optional>
#include <vector>

#include <proton/binary.hpp>
#include <proton/codec.h>
#include <proton/codec/decoder.hpp>
#include <proton/error.hpp>
#include <proton/value.hpp>

#include "frontends/amqp/mapping/mapping.h"
#include "model/topic.h"

namespace estuary::amqp::body {

// A body-only message encodes as these bytes followed by its body sections.
const std::string& EmptyMessageEncoding() {
  static const std::string prefix = [] {
    std::vector<char> bytes = proton::message().encode();
    return std::string(bytes.begin(), bytes.end());
  }();
  return prefix;
}

namespace {

bool IsMarker(std::span<const UserProperty> user_properties) {
  return !user_properties.empty() && user_properties.back().key == kAmqpBodyUserProperty;
}

bool IsKnownKind(std::string_view kind) {
  return kind == "data" || kind == "amqp-sequence" || kind == "amqp-value" || kind == "none";
}

// The bytes of a binary value, copied once. proton::get<binary> and a
// string made from its iterators copy byte by byte (about ten
// instructions a byte, most of ToModel's cost for a 4 KiB body); the
// value's pn_data holds the bytes, and a decoder subclass may read them.
std::string BinaryBytes(const proton::value& value) {
  struct Reader : proton::codec::decoder {
    explicit Reader(const proton::value& v) : decoder(v) {}
    std::optional<std::string> Bytes() const {
      pn_data_t* encoded = pn_object();
      pn_data_rewind(encoded);
      if (!pn_data_next(encoded) || pn_data_type(encoded) != PN_BINARY) return std::nullopt;
      const pn_bytes_t bytes = pn_data_get_binary(encoded);
      return std::string(bytes.start, bytes.size);
    }
  };
  if (auto bytes = Reader(value).Bytes()) return std::move(*bytes);
  auto bytes = proton::get<proton::binary>(value);  // not reached: callers check the type
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

}  // namespace

std::string_view Kind(const proton::message& message) {
  const proton::value& value = message.body();
  if (value.empty() || value.type() == proton::NULL_TYPE) return "none";
  if (message.inferred() && value.type() == proton::BINARY) return "data";
  if (message.inferred() && value.type() == proton::LIST) return "amqp-sequence";
  return "amqp-value";
}

std::string Encode(const proton::message& message) {
  proton::message body_only;
  body_only.body(message.body());
  body_only.inferred(message.inferred());
  std::vector<char> bytes = body_only.encode();
  const std::string& prefix = EmptyMessageEncoding();
  std::string encoded(bytes.begin(), bytes.end());
  // Proton always writes the empty prefix first; strip it so the payload
  // holds the body sections and nothing else.
  if (encoded.compare(0, prefix.size(), prefix) == 0) encoded.erase(0, prefix.size());
  return encoded;
}

std::optional<Plain> AsPlain(const proton::message& message,
                             std::optional<uint8_t> payload_format_annotation) {
  std::string_view kind = Kind(message);
  // One data section, or an amqp-value binary (what Proton and many other
  // clients send for a bytes body unless told otherwise): bytes either way.
  if (kind == "data" || (kind == "amqp-value" && message.body().type() == proton::BINARY)) {
    return Plain{BinaryBytes(message.body()), payload_format_annotation, kind != "data"};
  }
  if (kind == "amqp-value" && message.body().type() == proton::STRING &&
      !payload_format_annotation) {
    auto text = proton::get<std::string>(message.body());
    if (IsValidMqttUtf8(text)) return Plain{std::move(text), uint8_t{1}};
  }
  return std::nullopt;
}

bool TakesEncodedPath(const proton::message& message,
                      std::optional<uint8_t> payload_format_annotation,
                      std::span<const UserProperty> user_properties) {
  return TakesEncodedPath(AsPlain(message, payload_format_annotation), user_properties);
}

bool TakesEncodedPath(const std::optional<Plain>& plain, std::span<const UserProperty> user_properties) {
  if (!plain) return true;
  if (!IsMarker(user_properties)) return false;
  // A plain body whose user properties end with something that looks like
  // the marker: encode it when the way back would read the plain payload
  // as an encoded body, so that the marker is never misread.
  return RestoresEncodedBody(plain->payload, plain->payload_format, user_properties, nullptr);
}

bool RestoresEncodedBody(std::string_view payload, std::optional<uint8_t> payload_format,
                         std::span<const UserProperty> user_properties, proton::message* out) {
  if (!IsMarker(user_properties)) return false;
  const std::string& kind = user_properties.back().value;
  if (!IsKnownKind(kind)) return false;
  proton::message decoded;
  try {
    if (!payload.empty()) decoded.decode(std::vector<char>(payload.begin(), payload.end()));
  } catch (const proton::error&) {
    return false;
  }
  // Only the exact encoding counts: anything else in the payload (another
  // section, trailing bytes, a non-canonical form) would not come back.
  if (Encode(decoded) != payload || Kind(decoded) != kind) return false;
  if (!TakesEncodedPath(decoded, payload_format, user_properties.first(user_properties.size() - 1))) {
    return false;
  }
  if (out != nullptr) {
    out->body(decoded.body());
    out->inferred(decoded.inferred());
  }
  return true;
}

}  // namespace estuary::amqp::body
