#pragma once
// Helpers for the mapping tests: models as the MQTT front end makes them,
// and one-call ToModel/FromModel.
#include <cstdint>
#include <string>
#include <vector>

#include <proton/message.hpp>

#include "frontends/amqp/mapping/mapping.h"

namespace estuary::amqp::testing {

inline constexpr int64_t kNow = 1'800'000'000'000;  // a fixed wall clock, ms

Message MqttMessage(std::string topic, std::string payload);
InboundContext Context(std::string_view topic, bool settled = false);

// FromModel for a delivery of `message` (retain and subscription ids as
// delivered), passed over the wire.
proton::message ToAmqp(const Message& message, bool retain = false,
                       std::vector<uint32_t> subscription_ids = {}, int64_t now_ms = kNow);

// ToModel of `in` passed over the wire; fails the test when rejected.
Message ToModelOk(const proton::message& in, std::string_view topic, int64_t now_ms = kNow);

// The message annotation `name`, or a null value.
proton::value Annotation(const proton::message& message, std::string_view name);

}  // namespace estuary::amqp::testing
