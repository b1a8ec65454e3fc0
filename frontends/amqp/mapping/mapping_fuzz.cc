// libFuzzer target over the AMQP <-> model mapping. It checks the round
// trips docs/mapping.md promises, not only the absence of crashes:
//   first byte even: the rest is an AMQP message encoding; decode it, then
//     AMQP -> model -> AMQP must give it back (check::AmqpRoundTrip), and
//     the result must map to the same model again;
//   first byte odd: the rest builds an MQTT-shaped model; model -> AMQP ->
//     model must keep every MQTT field (check::ModelRoundTrip).
// In both, wherever the fast path (EncodeFromModel, what the broker sends
// with) takes a delivery, its bytes must equal Proton's encoding of
// FromModel's message, the reference, for deliveries of every shape
// (retain, subscription ids, an encoding clock around ttl's limits) and,
// from the model path, every origin protocol.
// A broken promise aborts with the difference printed.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <proton/error.hpp>

#include "frontends/amqp/mapping/body.h"
#include "frontends/amqp/mapping/mapping.h"
#include "frontends/amqp/mapping/round_trip_check.h"
#include "model/topic.h"

namespace {

using estuary::amqp::InboundContext;
namespace check = estuary::amqp::check;

constexpr int64_t kNow = 1'800'000'000'000;

void Fail(const std::string& difference) {
  std::fprintf(stderr, "round trip broken:\n%s\n", difference.c_str());
  std::abort();
}

// How the delivery of a fuzzed message looks: what EncodeFromModel reads
// besides the message (retain flag, subscription ids, the clock).
struct DeliveryShape {
  bool retain = false;
  std::vector<uint32_t> subscription_ids;
  int64_t now_ms = kNow;
};

// From one byte: retain, one of four id lists (sizes and values across the
// encodings of uint: uint0, smalluint, uint), and the encoding clock
// against the expiry (the same instant, earlier, later, or past the point
// where the time left no longer fits ttl's uint).
DeliveryShape ShapeFrom(uint8_t bits, std::optional<int64_t> expiry_at_ms) {
  static const std::vector<uint32_t> kIdLists[] = {
      {}, {1, 268435455}, {0, 255, 256, 65536}, std::vector<uint32_t>(70, 7)};
  DeliveryShape shape;
  shape.retain = bits & 1;
  shape.subscription_ids = kIdLists[(bits >> 1) & 3];
  const int64_t uint_max = std::numeric_limits<uint32_t>::max();
  switch ((bits >> 3) & 7) {
    case 1: shape.now_ms = kNow + 1; break;
    case 2: shape.now_ms = kNow - 1'000; break;
    case 3: shape.now_ms = kNow + 86'400'000; break;  // expired: ttl 1
    case 4:  // the time left is exactly the largest uint, then one more
    case 5:
      if (expiry_at_ms) shape.now_ms = *expiry_at_ms - uint_max - ((bits >> 3) & 1);
      break;
    default: break;
  }
  return shape;
}

std::string Hex(std::string_view bytes) {
  std::string out;
  char digits[4];
  for (unsigned char c : bytes) {
    std::snprintf(digits, sizeof digits, "%02x ", c);
    out += digits;
  }
  return out;
}

// Wherever EncodeFromModel takes a delivery, its bytes must be exactly
// Proton's encoding of FromModel's message (the broker's sending path uses
// the former, every other path and the tests the latter).
void CheckFastEncoding(const estuary::Message& message, const DeliveryShape& shape) {
  estuary::core::Delivery delivery;
  delivery.message = std::make_shared<const estuary::Message>(message);
  delivery.qos = message.qos;
  delivery.retain = shape.retain;
  delivery.subscription_ids = shape.subscription_ids;
  std::string fast;
  if (!estuary::amqp::EncodeFromModel(delivery, shape.now_ms, fast)) return;
  proton::message reference;
  estuary::amqp::FromModel(delivery, shape.now_ms, reference);
  const std::vector<char> bytes = reference.encode();
  const std::string expected(bytes.begin(), bytes.end());
  if (fast == expected) return;
  std::string difference = "EncodeFromModel differs from the encoding of FromModel's message\n";
  difference += "FromModel:       " + Hex(expected) + "\nEncodeFromModel: " + Hex(fast) + "\n";
  try {
    proton::message decoded;
    decoded.decode(std::vector<char>(fast.begin(), fast.end()));
    difference += check::Compare(reference, decoded);
  } catch (const proton::error& error) {
    difference += std::string("EncodeFromModel's bytes do not decode: ") + error.what();
  }
  Fail(difference);
}

void FuzzAmqp(const uint8_t* data, size_t size, bool settled, uint8_t shape_bits) {
  proton::message in;
  try {
    in.decode(std::vector<char>(data, data + size));
    // Proton's decoder accepts some malformed compound values (a list whose
    // count exceeds its contents) and writes them back differently each
    // time; the mapping cannot keep what Proton itself does not, so only
    // messages Proton re-encodes stably are checked.
    in = check::OverWire(in);
    if (in.encode() != check::OverWire(in).encode()) return;
  } catch (const proton::error&) {
    return;  // not a message: the connection layer rejects it with decode-error
  }
  InboundContext context;
  const std::string to = in.to();
  context.topic = estuary::ValidateTopicName(to) ? std::string_view(to) : "fuzz/topic";
  context.container_id = "fuzz-container";
  context.node = 3;
  context.settled = settled;
  context.now_ms = kNow;
  if (std::string difference = check::AmqpRoundTrip(in, context); !difference.empty()) {
    Fail(difference);
  }
  if (auto model = estuary::amqp::ToModel(in, context)) {
    CheckFastEncoding(*model, ShapeFrom(shape_bits, model->properties.expiry_at_ms));
  }
}

std::optional<std::string> MaybeString(FuzzedDataProvider& input, size_t max) {
  if (!input.ConsumeBool()) return std::nullopt;
  return input.ConsumeRandomLengthString(max);
}

// What an MQTT client can send: MQTT UTF-8 strings [MQTT-1.5.4-1, -2].
std::optional<std::string> MaybeMqttString(FuzzedDataProvider& input, size_t max) {
  auto text = MaybeString(input, max);
  if (text && !estuary::IsValidMqttUtf8(*text)) text.reset();
  return text;
}

void FuzzModel(const uint8_t* data, size_t size) {
  FuzzedDataProvider input(data, size);
  estuary::Message message;
  message.topic = input.ConsumeRandomLengthString(32);
  if (!estuary::ValidateTopicName(message.topic)) message.topic = "fuzz/topic";
  message.qos = static_cast<estuary::QoS>(input.ConsumeIntegralInRange(0, 2));
  message.retain = input.ConsumeBool();
  message.durable = input.ConsumeBool();
  message.origin = {estuary::Protocol::kMqtt, input.ConsumeRandomLengthString(16), 1};
  static const estuary::Protocol kProtocols[] = {estuary::Protocol::kMqtt, estuary::Protocol::kAmqp,
                                                 estuary::Protocol::kInternal};
  const estuary::Protocol fast_path_protocol = kProtocols[input.ConsumeIntegralInRange(0, 2)];
  auto& properties = message.properties;
  if (input.ConsumeBool()) properties.payload_format = input.ConsumeIntegralInRange(0, 1);
  properties.content_type = MaybeMqttString(input, 16);
  properties.response_topic = MaybeMqttString(input, 16);
  if (properties.response_topic && !estuary::ValidateTopicName(*properties.response_topic)) {
    properties.response_topic.reset();  // MQTT: a topic name [MQTT-3.3.2-13, -14]
  }
  properties.correlation_data = MaybeString(input, 16);
  if (input.ConsumeBool()) {
    properties.expiry_at_ms = kNow + input.ConsumeIntegralInRange<int64_t>(1, int64_t{1} << 42);
  }
  const uint8_t shape_bits = input.ConsumeIntegral<uint8_t>();
  for (int n = input.ConsumeIntegralInRange(0, 6); n > 0; --n) {
    std::string key = input.ConsumeRandomLengthString(8);
    std::string value = input.ConsumeRandomLengthString(8);
    if (estuary::IsValidMqttUtf8(key) && estuary::IsValidMqttUtf8(value)) {
      properties.user_properties.push_back({std::move(key), std::move(value)});
    }
  }
  const bool marked = input.ConsumeBool();
  const bool encode = input.ConsumeBool();
  static const char* kKinds[] = {"amqp-value", "amqp-sequence", "none", "data"};
  std::string kind = kKinds[input.ConsumeIntegralInRange(0, 3)];
  std::string payload = input.ConsumeRemainingBytesAsString();
  if (marked && encode) {
    // Make the payload a real encoded body more often than chance would.
    proton::message body_message;
    try {
      body_message.decode(std::vector<char>(payload.begin(), payload.end()));
      payload = estuary::amqp::body::Encode(body_message);
      kind = estuary::amqp::body::Kind(body_message);
    } catch (const proton::error&) {
    }
  }
  message.payload = estuary::MakePayload(std::move(payload));
  if (marked) properties.user_properties.push_back({"x-amqp-body", kind});
  if (std::string difference = check::ModelRoundTrip(message, kNow); !difference.empty()) {
    Fail(difference);
  }
  // Messages the round trip cannot promise (origins other than MQTT) still
  // have to be encoded alike by both paths.
  message.origin.protocol = fast_path_protocol;
  CheckFastEncoding(message, ShapeFrom(shape_bits, properties.expiry_at_ms));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0) {
    FuzzAmqp(data + 1, size - 1, data[0] & 2, data[0] >> 2);
  } else {
    FuzzModel(data + 1, size - 1);
  }
  return 0;
}
