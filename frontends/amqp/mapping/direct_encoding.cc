// FromModel's common case written straight to bytes: no proton::message,
// no proton::value maps. The bytes are those Proton 0.37 writes for the
// message FromModel builds (direct_encoding_test.cc compares them over the
// round-trip tests' generator); anything this file does not know how Proton
// writes is left to FromModel.
#include <algorithm>
#include <limits>
#include <vector>

#include "base/bytes.h"
#include "frontends/amqp/mapping/annotations.h"
#include "frontends/amqp/mapping/mapping.h"
#include "model/topic.h"

namespace estuary::amqp {
namespace {

// AMQP 1.0 part 1.6 type codes, as Proton writes them.
enum Code : uint8_t {
  kDescriptor = 0x00,
  kSmallUlong = 0x53,
  kNull = 0x40,
  kTrue = 0x41,
  kUint0 = 0x43,
  kList0 = 0x45,
  kUbyte = 0x50,
  kSmallUint = 0x52,
  kUint = 0x70,
  kTimestamp = 0x83,
  kVbin8 = 0xa0,
  kStr8 = 0xa1,
  kSym8 = 0xa3,
  kVbin32 = 0xb0,
  kStr32 = 0xb1,
  kSym32 = 0xb3,
  kList8 = 0xc0,
  kList32 = 0xd0,
  kMap32 = 0xd1,
};

// Section descriptors (part 3.2).
constexpr uint8_t kHeader = 0x70;
constexpr uint8_t kMessageAnnotations = 0x72;
constexpr uint8_t kProperties = 0x73;
constexpr uint8_t kApplicationProperties = 0x74;
constexpr uint8_t kData = 0x75;
constexpr uint8_t kAmqpValue = 0x77;

// A variable-width value: the 8-bit form up to 255 bytes, else the 32-bit one.
void PutVariable(std::string& out, uint8_t code8, uint8_t code32, std::string_view bytes) {
  if (bytes.size() <= 0xff) {
    out.push_back(static_cast<char>(code8));
    out.push_back(static_cast<char>(bytes.size()));
  } else {
    out.push_back(static_cast<char>(code32));
    base::AppendBig<uint32_t>(out, static_cast<uint32_t>(bytes.size()));
  }
  out.append(bytes);
}

void PutString(std::string& out, std::string_view text) { PutVariable(out, kStr8, kStr32, text); }
void PutSymbol(std::string& out, std::string_view text) { PutVariable(out, kSym8, kSym32, text); }
void PutBinary(std::string& out, std::string_view bytes) { PutVariable(out, kVbin8, kVbin32, bytes); }

void PutUint(std::string& out, uint32_t value) {
  if (value == 0) {
    out.push_back(static_cast<char>(kUint0));
  } else if (value <= 0xff) {
    out.push_back(static_cast<char>(kSmallUint));
    out.push_back(static_cast<char>(value));
  } else {
    out.push_back(static_cast<char>(kUint));
    base::AppendBig<uint32_t>(out, value);
  }
}

void PutSection(std::string& out, uint8_t descriptor) {
  const char bytes[3] = {static_cast<char>(kDescriptor), static_cast<char>(kSmallUlong),
                         static_cast<char>(descriptor)};
  out.append(bytes, 3);
}

// A compound whose size is known only once its elements are written.
class Compound {
 public:
  // Proton writes maps and the lists inside values with 32-bit sizes.
  Compound(std::string& out, uint8_t code) : out_(out), start_(out.size()) {
    out_.push_back(static_cast<char>(code));
    out_.append(8, '\0');  // size and count, set by End
  }
  void Count(uint32_t n = 1) { count_ += n; }
  void End() {
    base::StoreBig<uint32_t>(out_.data() + start_ + 1,
                             static_cast<uint32_t>(out_.size() - start_ - 5));  // count + elements
    base::StoreBig<uint32_t>(out_.data() + start_ + 5, count_);
  }

 private:
  std::string& out_;
  size_t start_;
  uint32_t count_ = 0;
};

// A section list (header, properties) as Proton's emitters write it:
// trailing nulls dropped, list0 when empty, list8 when it fits, else list32.
// Fields are written in place after room for the longest list header.
class SectionList {
 public:
  SectionList(std::string& out, uint8_t descriptor) : out_(out) {
    PutSection(out_, descriptor);
    start_ = out_.size();
    out_.append(kRoom, '\0');
  }
  void Skip() { ++pending_nulls_; }
  // The output, for the next field (after the nulls of skipped ones).
  std::string& Next() {
    out_.append(pending_nulls_, static_cast<char>(kNull));
    count_ += pending_nulls_ + 1;
    pending_nulls_ = 0;
    return out_;
  }
  void End() {
    const size_t fields = out_.size() - start_ - kRoom;
    if (count_ == 0) {
      out_.resize(start_);
      out_.push_back(static_cast<char>(kList0));
    } else if (fields + 1 <= 0xff) {
      out_[start_] = static_cast<char>(kList8);
      out_[start_ + 1] = static_cast<char>(fields + 1);
      out_[start_ + 2] = static_cast<char>(count_);
      out_.erase(start_ + 3, kRoom - 3);
    } else {
      out_[start_] = static_cast<char>(kList32);
      base::StoreBig<uint32_t>(out_.data() + start_ + 1, static_cast<uint32_t>(fields + 4));
      base::StoreBig<uint32_t>(out_.data() + start_ + 5, count_);
    }
  }

 private:
  static constexpr size_t kRoom = 9;  // list32: code, size, count
  std::string& out_;
  size_t start_ = 0;
  uint32_t count_ = 0;
  uint32_t pending_nulls_ = 0;
};

bool HasNul(std::string_view text) { return text.find('\0') != std::string_view::npos; }

// What Proton writes specially, or what only FromModel handles: left to it.
bool NeedsGeneralPath(const core::Delivery& delivery) {
  const Message& message = *delivery.message;
  if (message.amqp_extras) return true;
  const MessageProperties& properties = message.properties;
  const auto& user_properties = properties.user_properties;
  if (!user_properties.empty() && user_properties.back().key == kAmqpBodyUserProperty) return true;
  // Proton's string setters stop at a NUL, and an empty string is set, not absent.
  if (message.topic.empty() || HasNul(message.topic)) return true;
  if (properties.content_type && (properties.content_type->empty() || HasNul(*properties.content_type))) {
    return true;
  }
  if (properties.response_topic && (properties.response_topic->empty() || HasNul(*properties.response_topic))) {
    return true;
  }
  if (properties.correlation_data && properties.correlation_data->empty()) return true;
  return false;
}

void PutHeader(const Message& message, int64_t now_ms, std::string& out, std::optional<int64_t>& absolute) {
  SectionList fields(out, kHeader);
  if (message.durable) {
    fields.Next().push_back(static_cast<char>(kTrue));
  } else {
    fields.Skip();
  }
  fields.Skip();  // priority: the default
  if (const auto& at = message.properties.expiry_at_ms) {
    const int64_t remaining = *at - now_ms;
    if (remaining > int64_t{std::numeric_limits<uint32_t>::max()}) {
      absolute = *at;  // beyond what ttl (a uint) can say
    } else {
      PutUint(fields.Next(), static_cast<uint32_t>(std::max<int64_t>(remaining, 1)));
    }
  }
  fields.End();
}

void PutProperties(const Message& message, std::optional<int64_t> absolute, std::string& out) {
  const MessageProperties& properties = message.properties;
  SectionList fields(out, kProperties);
  fields.Skip();  // message-id
  fields.Skip();  // user-id
  PutString(fields.Next(), message.topic);
  fields.Skip();  // subject
  if (properties.response_topic) {
    PutString(fields.Next(), *properties.response_topic);
  } else {
    fields.Skip();
  }
  if (properties.correlation_data) {
    PutBinary(fields.Next(), *properties.correlation_data);
  } else {
    fields.Skip();
  }
  if (properties.content_type) {
    PutSymbol(fields.Next(), *properties.content_type);
  } else {
    fields.Skip();
  }
  fields.Skip();  // content-encoding
  if (absolute && *absolute != 0) {
    std::string& bytes = fields.Next();
    bytes.push_back(static_cast<char>(kTimestamp));
    base::AppendBig<uint64_t>(bytes, static_cast<uint64_t>(*absolute));
  }
  fields.End();
}

// application-properties: string values, the first of a repeated key, in
// key order (what annotations::ApplicationProperties gives Proton).
void PutApplicationProperties(std::span<const UserProperty> user_properties, std::string& out) {
  if (user_properties.empty()) return;
  std::vector<const UserProperty*> sorted;
  sorted.reserve(user_properties.size());
  for (const UserProperty& property : user_properties) sorted.push_back(&property);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const UserProperty* a, const UserProperty* b) { return a->key < b->key; });
  PutSection(out, kApplicationProperties);
  Compound map(out, kMap32);
  const std::string* previous = nullptr;
  for (const UserProperty* property : sorted) {
    if (previous != nullptr && *previous == property->key) continue;
    previous = &property->key;
    PutString(out, property->key);
    PutString(out, property->value);
    map.Count(2);
  }
  map.End();
}

// Message annotations, in the byte order of their keys (a std::map of
// annotation keys, as FromModel hands them to Proton).
void PutAnnotations(const core::Delivery& delivery, std::span<const UserProperty> user_properties,
                    bool string_body, std::string& out) {
  const Message& message = *delivery.message;
  PutSection(out, kMessageAnnotations);
  Compound map(out, kMap32);
  const auto key = [&](std::string_view name) {
    PutSymbol(out, name);
    map.Count(2);
  };
  const auto& format = message.properties.payload_format;
  if (format && !string_body) {
    key(kPayloadFormatAnnotation);
    out.push_back(static_cast<char>(kUbyte));
    out.push_back(static_cast<char>(*format));
  }
  if (annotations::NeedsUserPropertiesAnnotation(user_properties)) {
    key(kUserPropertiesAnnotation);
    Compound list(out, kList32);
    for (const UserProperty& property : user_properties) {
      PutString(out, property.key);
      PutString(out, property.value);
      list.Count(2);
    }
    list.End();
  }
  if (!message.origin.client_id.empty()) {
    key(kOriginClientIdAnnotation);
    PutString(out, message.origin.client_id);
  }
  key(kOriginProtocolAnnotation);
  PutSymbol(out, message.origin.protocol == Protocol::kMqtt   ? "mqtt"
                 : message.origin.protocol == Protocol::kAmqp ? "amqp"
                                                              : "internal");
  if (delivery.retain) {
    key(kRetainAnnotation);
    out.push_back(static_cast<char>(kTrue));
  }
  if (!delivery.subscription_ids.empty()) {
    key(kSubscriptionIdsAnnotation);
    Compound list(out, kList32);
    for (uint32_t id : delivery.subscription_ids) {
      PutUint(out, id);
      list.Count();
    }
    list.End();
  }
  map.End();
}

}  // namespace

bool EncodeFromModel(const core::Delivery& delivery, int64_t now_ms, std::string& out) {
  out.clear();
  if (NeedsGeneralPath(delivery)) return false;
  const Message& message = *delivery.message;
  const std::string_view payload = message.payload ? std::string_view(*message.payload) : "";
  const bool string_body = message.properties.payload_format == 1 && IsValidMqttUtf8(payload);
  out.reserve(payload.size() + 256);
  std::optional<int64_t> absolute;
  PutHeader(message, now_ms, out, absolute);
  PutAnnotations(delivery, message.properties.user_properties, string_body, out);
  PutProperties(message, absolute, out);
  PutApplicationProperties(message.properties.user_properties, out);
  if (string_body) {
    PutSection(out, kAmqpValue);
    PutString(out, payload);
  } else {
    PutSection(out, kData);
    PutBinary(out, payload);
  }
  return true;
}

}  // namespace estuary::amqp
