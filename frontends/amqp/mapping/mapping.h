#pragma once
// The AMQP 1.0 <-> model mapping: the one place where an AMQP message
// becomes a model Message and a Delivery becomes an AMQP message. The rules
// are written down in docs/mapping.md; this code enforces them and nothing
// else translates. Pure functions: no IO, no clock reads (`now_ms` is the
// caller's wall clock, for TTL <-> absolute expiry).
#include <cstdint>
#include <string>
#include <string_view>

#include <proton/message.hpp>

#include "base/expected.h"
#include "cluster-core/broker/session.h"
#include "model/message.h"

namespace estuary::amqp {

// Why an AMQP message cannot be taken; `condition` is the AMQP error
// condition to reject or detach with (e.g. "amqp:invalid-field",
// "amqp:decode-error"), `description` a human-readable reason.
struct MappingError {
  std::string condition;
  std::string description;
};

// What the receiving link knows about an incoming message.
struct InboundContext {
  // The topic: the link's target address, or the message's `to` when the
  // link is an anonymous relay (null target address).
  std::string_view topic;
  std::string_view container_id;  // the sending connection's container-id
  uint16_t node = 0;              // this node's id (Message::origin.node)
  bool settled = false;           // pre-settled = QoS 0, else QoS 1
  int64_t now_ms = 0;
};

// The topic (or filter) an AMQP address names. Addresses are topics taken
// literally, except that a leading `amqp://HOST[:PORT]/` or
// `amqps://HOST[:PORT]/` is dropped: some clients (uAMQP, the Azure SDKs)
// put their whole connection URL in link addresses and in `to`. A bare
// `amqp(s)://HOST` names no topic (empty). docs/mapping.md, "Addresses".
std::string_view TopicOfAddress(std::string_view address);

// AMQP -> model. Fills every Message field except `id` (the caller assigns
// it from the broker). The topic must be a valid MQTT topic name.
Expected<Message, MappingError> ToModel(const proton::message& in, const InboundContext& context);

// model -> AMQP, for one delivery to an AMQP receiver. `out` is cleared
// first, so one proton::message can be reused per link.
void FromModel(const core::Delivery& delivery, int64_t now_ms, proton::message& out);

// model -> AMQP bytes for the common case, without building a
// proton::message: the bytes Proton writes for FromModel's message (the
// same message, byte for byte). Returns false, with `out` unspecified, when
// the delivery needs FromModel (AMQP extras, an encoded body, empty
// string fields); `out` is cleared first and may be reused.
bool EncodeFromModel(const core::Delivery& delivery, int64_t now_ms, std::string& out);

// The names the mapping reads and writes (docs/mapping.md).
// Message annotations the broker sets on every message it sends to AMQP;
// the same keys on an incoming message are dropped (the broker's word, not
// the sender's), except x-opt-retain, which a sender sets to publish a
// retained message.
inline constexpr std::string_view kRetainAnnotation = "x-opt-retain";
inline constexpr std::string_view kSubscriptionIdsAnnotation = "x-opt-subscription-ids";
inline constexpr std::string_view kOriginClientIdAnnotation = "x-opt-origin-client-id";
inline constexpr std::string_view kOriginProtocolAnnotation = "x-opt-origin-protocol";
// MQTT 5 details AMQP has no field for, set only when needed.
inline constexpr std::string_view kUserPropertiesAnnotation = "x-opt-mqtt-user-properties";
inline constexpr std::string_view kPayloadFormatAnnotation = "x-opt-mqtt-payload-format";
inline constexpr std::string_view kEmptyContentTypeAnnotation = "x-opt-mqtt-empty-content-type";
// Kept in Message::amqp_extras only (never sent): the body was an
// amqp-value binary rather than a data section. A sender's value is dropped.
inline constexpr std::string_view kAmqpValueBinaryAnnotation = "x-opt-estuary-amqp-value-binary";
// The MQTT user property that marks a payload holding AMQP-encoded body
// sections (a body other than one data section or an amqp-value string);
// its value names the body: "amqp-value", "amqp-sequence" or "none".
inline constexpr std::string_view kAmqpBodyUserProperty = "x-amqp-body";

}  // namespace estuary::amqp
