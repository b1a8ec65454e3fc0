#include "frontends/amqp/mapping/test_util.h"

#include <gtest/gtest.h>

#include <memory>

#include "frontends/amqp/mapping/annotations.h"
#include "frontends/amqp/mapping/round_trip_check.h"

namespace estuary::amqp::testing {

Message MqttMessage(std::string topic, std::string payload) {
  Message message;
  message.topic = std::move(topic);
  message.payload = MakePayload(std::move(payload));
  message.qos = QoS::kAtLeastOnce;
  message.origin = Origin{Protocol::kMqtt, "mqtt-client", 1};
  return message;
}

InboundContext Context(std::string_view topic, bool settled) {
  InboundContext context;
  context.topic = topic;
  context.container_id = "amqp-container";
  context.node = 7;
  context.settled = settled;
  context.now_ms = kNow;
  return context;
}

proton::message ToAmqp(const Message& message, bool retain,
                       std::vector<uint32_t> subscription_ids, int64_t now_ms) {
  core::Delivery delivery;
  delivery.message = std::make_shared<const Message>(message);
  delivery.qos = message.qos;
  delivery.retain = retain;
  delivery.subscription_ids = std::move(subscription_ids);
  proton::message out;
  FromModel(delivery, now_ms, out);
  return check::OverWire(out);
}

Message ToModelOk(const proton::message& in, std::string_view topic, int64_t now_ms) {
  InboundContext context = Context(topic);
  context.now_ms = now_ms;
  auto model = ToModel(check::OverWire(in), context);
  EXPECT_TRUE(model.has_value()) << (model ? "" : model.error().description);
  return model ? *model : Message{};
}

proton::value Annotation(const proton::message& message, std::string_view name) {
  const auto& map = message.message_annotations();
  auto key = annotations::Key(name);
  return map.exists(key) ? map.get(key) : proton::value();
}

}  // namespace estuary::amqp::testing
