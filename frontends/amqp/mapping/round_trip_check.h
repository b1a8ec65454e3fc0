#pragma once
// The round-trip promises of docs/mapping.md as checks, shared by the unit
// tests and the fuzzer (test support, not linked into the broker). Each
// returns an empty string when the promise holds, else what differs.
#include <cstdint>
#include <string>

#include <proton/message.hpp>

#include "frontends/amqp/mapping/mapping.h"

namespace estuary::amqp::check {

// The message as its C++ getters see it, rebuilt field by field, so that
// two messages compare by encoding without Proton's empty-versus-absent
// distinctions that the C++ API cannot read.
proton::message Normalized(const proton::message& message);

// Passes the message through the wire (encode, decode).
proton::message OverWire(const proton::message& message);

// AMQP -> model -> AMQP (over the wire) gives back `in` except for the
// documented changes (`to` filled with the topic, broker annotations,
// a ttl dropped behind an earlier absolute-expiry-time), and the result
// maps to the same model again. A message ToModel rejects passes.
std::string AmqpRoundTrip(const proton::message& in, const InboundContext& context);

// model -> AMQP (over the wire) -> model keeps topic, payload, QoS class,
// retain, durable and every MQTT 5 property exactly, for a message MQTT can
// carry: `expiry_at_ms` later than `now_ms`, a payload format of 0 or 1,
// MQTT UTF-8 strings (content type, user properties), a response topic
// that is a valid topic name.
std::string ModelRoundTrip(const Message& message, int64_t now_ms);

// "" when equal, else both messages in Proton's text form.
std::string Compare(const proton::message& expected, const proton::message& actual);

}  // namespace estuary::amqp::check
