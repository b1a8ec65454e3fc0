#pragma once
// The mapping tests' seeded generator: MQTT-shaped models and random AMQP
// messages. ESTUARY_SEED=N replays one run; the seed in use is printed.
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <proton/annotation_key.hpp>
#include <proton/binary.hpp>
#include <proton/codec/vector.hpp>
#include <proton/message.hpp>
#include <proton/message_id.hpp>
#include <proton/symbol.hpp>
#include <proton/uuid.hpp>

#include "frontends/amqp/mapping/body.h"
#include "frontends/amqp/mapping/test_util.h"

namespace estuary::amqp::testing {

inline uint64_t Seed() {
  const char* text = std::getenv("ESTUARY_SEED");
  uint64_t seed = text ? std::strtoull(text, nullptr, 10) : 20261129;
  std::cout << "seed " << seed << " (ESTUARY_SEED to replay)\n";
  return seed;
}

class Generator {
 public:
  explicit Generator(uint64_t seed) : random_(seed) {}

  int Int(int low, int high) { return std::uniform_int_distribution<int>(low, high)(random_); }
  bool OneIn(int n) { return Int(1, n) == 1; }

  std::string Bytes(int max) {
    std::string text(Int(0, max), '\0');
    for (char& c : text) c = static_cast<char>(Int(0, 255));
    return text;
  }
  std::string Text(int max) {
    static const std::string kPieces[] = {"a", "b", "z", "/", ".", "é", "€", "x-amqp-body", " "};
    std::string text;
    for (int n = Int(0, max); n > 0; --n) text += kPieces[Int(0, 8)];
    return text;
  }
  std::string Topic() {
    std::string topic = Text(6);
    return topic.empty() ? "t" : topic;
  }

  proton::value Value(int depth = 0) {
    switch (Int(0, depth > 1 ? 7 : 9)) {
      case 0: return proton::value(Int(-5, 5));
      case 1: return proton::value(Text(4));
      case 2: return proton::value(proton::binary(Bytes(6)));
      case 3: return proton::value(proton::symbol(Text(3)));
      case 4: return proton::value(OneIn(2));
      case 5: return proton::value(uint64_t(Int(0, 1 << 20)));
      case 6: return proton::value(2.5);
      case 7: return proton::value(uint8_t(Int(0, 2)));
      case 8: {
        std::vector<proton::value> list;
        for (int n = Int(0, 3); n > 0; --n) list.push_back(Value(depth + 1));
        return proton::value(list);
      }
      default: {
        std::vector<proton::value> strings;  // maybe a user-properties list
        for (int n = Int(0, 2) * 2; n > 0; --n) strings.emplace_back(Text(2));
        return proton::value(strings);
      }
    }
  }

  Message MqttModel() {
    Message message = testing::MqttMessage(Topic(), OneIn(2) ? Bytes(20) : Text(8));
    message.qos = static_cast<QoS>(Int(0, 2));
    message.retain = OneIn(3);
    message.durable = OneIn(2);
    auto& properties = message.properties;
    if (OneIn(2)) properties.payload_format = uint8_t(Int(0, 1));
    if (OneIn(2)) properties.content_type = Text(3);
    if (OneIn(3)) properties.response_topic = Topic();
    if (OneIn(2)) properties.correlation_data = Bytes(5);
    if (OneIn(2)) properties.expiry_at_ms = kNow + (OneIn(8) ? (int64_t{1} << 42) : Int(1, 1 << 30));
    for (int n = Int(0, 5); n > 0; --n) properties.user_properties.push_back({Text(2), Text(2)});
    if (OneIn(4)) MakeEncodedBody(message);
    return message;
  }

  proton::message AmqpMessage() {
    proton::message message;
    SetBody(message);
    if (OneIn(2)) message.durable(true);
    if (OneIn(3)) message.priority(uint8_t(Int(0, 9)));
    if (OneIn(3)) message.ttl(proton::duration(Int(1, 1 << 30)));
    if (OneIn(3)) message.expiry_time(proton::timestamp(kNow + Int(-1000, 1 << 30)));
    if (OneIn(4)) message.first_acquirer(true);
    if (OneIn(4)) message.delivery_count(Int(1, 9));
    if (OneIn(2)) message.id(proton::message_id(uint64_t(Int(0, 1000))));
    if (OneIn(2)) message.correlation_id(CorrelationId());
    if (OneIn(2)) message.content_type(Text(3));
    if (OneIn(3)) message.reply_to(OneIn(4) ? Topic() + "/#" : Topic());
    if (OneIn(3)) message.subject(Text(3));
    if (OneIn(4)) message.to(OneIn(2) ? "t" : Text(3));
    if (OneIn(4)) message.group_id(Text(2));
    if (OneIn(4)) message.creation_time(proton::timestamp(kNow - Int(0, 1000)));
    for (int n = Int(0, 4); n > 0; --n) {
      if (OneIn(3)) message.properties().put(Text(2), proton::scalar(Int(0, 9)));
      else if (OneIn(6)) message.properties().put(Bytes(2), Bytes(2));  // maybe not UTF-8
      else message.properties().put(Text(2), Text(2));
    }
    static const char* kKeys[] = {"x-opt-retain", "x-opt-mqtt-user-properties",
                                  "x-opt-mqtt-payload-format", "x-opt-mqtt-empty-content-type",
                                  "x-opt-origin-client-id", "x-opt-subscription-ids", "x-foreign"};
    for (int n = Int(0, 3); n > 0; --n) {
      message.message_annotations().put(proton::symbol(kKeys[Int(0, 6)]), Value());
    }
    if (OneIn(4)) message.delivery_annotations().put(proton::symbol("x-d"), Value());
    return message;
  }

 private:
  proton::message_id CorrelationId() {
    switch (Int(0, 3)) {
      case 0: return proton::message_id(proton::binary(Bytes(4)));
      case 1: return proton::message_id(Text(3));
      case 2: return proton::message_id(uint64_t(Int(0, 99)));
      default: return proton::message_id(proton::uuid::random());
    }
  }

  void SetBody(proton::message& message) {
    switch (Int(0, 4)) {
      case 0: message.body(proton::binary(Bytes(10))); message.inferred(true); break;
      case 1: message.body(OneIn(4) ? Bytes(6) : Text(6)); break;
      case 2: message.body(Value()); message.inferred(OneIn(2)); break;
      case 3: break;  // no body
      default: message.body(proton::binary(Bytes(10))); break;  // amqp-value binary
    }
  }

  void MakeEncodedBody(Message& message) {
    proton::message body_message;
    SetBody(body_message);
    message.payload = MakePayload(body::Encode(body_message));
    message.properties.user_properties.push_back(
        {std::string(kAmqpBodyUserProperty), std::string(body::Kind(body_message))});
  }

  std::mt19937_64 random_;
};

}  // namespace estuary::amqp::testing
