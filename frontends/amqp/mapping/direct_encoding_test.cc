// EncodeFromModel against its reference: wherever it takes a delivery, its
// bytes are exactly what Proton writes for FromModel's message.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include <proton/binary.hpp>
#include <proton/message.hpp>
#include <proton/symbol.hpp>

#include "frontends/amqp/mapping/mapping.h"
#include "frontends/amqp/mapping/round_trip_check.h"
#include "frontends/amqp/mapping/test_generator.h"
#include "frontends/amqp/mapping/test_util.h"

namespace estuary::amqp {
namespace {

using testing::Generator;
using testing::kNow;
using testing::Seed;

std::string ReferenceBytes(const core::Delivery& delivery, int64_t now_ms) {
  proton::message out;
  FromModel(delivery, now_ms, out);
  std::vector<char> bytes = out.encode();
  return std::string(bytes.begin(), bytes.end());
}

core::Delivery RandomDelivery(Generator& generator, Message message) {
  static const Protocol kProtocols[] = {Protocol::kMqtt, Protocol::kAmqp, Protocol::kInternal};
  message.origin.protocol = kProtocols[generator.Int(0, 2)];
  if (generator.OneIn(5)) message.origin.client_id.clear();
  if (generator.OneIn(6)) message.origin.client_id = std::string(generator.Int(250, 300), 'c');
  core::Delivery delivery;
  delivery.message = std::make_shared<const Message>(std::move(message));
  delivery.retain = generator.OneIn(3);
  for (int n = generator.OneIn(2) ? generator.Int(1, 3) : 0; n > 0; --n) {
    static const uint32_t kIds[] = {0, 1, 255, 256, 70000};
    delivery.subscription_ids.push_back(kIds[generator.Int(0, 4)]);
  }
  return delivery;
}

// Sizes around the 8-bit/32-bit boundaries of strings, lists and maps.
void Enlarge(Generator& generator, Message& message) {
  if (generator.OneIn(4)) message.topic = std::string(generator.Int(230, 300), 't');
  if (generator.OneIn(4)) message.payload = MakePayload(std::string(generator.Int(250, 300), 'p'));
  if (generator.OneIn(6)) message.properties.content_type = std::string(generator.Int(250, 300), 'x');
  if (generator.OneIn(6)) message.properties.response_topic = std::string(generator.Int(200, 300), 'r');
  if (generator.OneIn(6)) message.properties.correlation_data = std::string(generator.Int(250, 300), 'd');
  if (generator.OneIn(6)) message.properties.user_properties.push_back({"k", std::string(300, 'v')});
}

TEST(DirectEncodingTest, EqualsProtonEncodingOfFromModel) {
  Generator generator(Seed() + 2);
  int direct = 0;
  for (int i = 0; i < 4000; ++i) {
    Message message = generator.MqttModel();
    if (generator.OneIn(2)) Enlarge(generator, message);
    const core::Delivery delivery = RandomDelivery(generator, std::move(message));
    const int64_t now = kNow + generator.Int(-5, 5);
    std::string bytes;
    if (!EncodeFromModel(delivery, now, bytes)) continue;
    ++direct;
    ASSERT_EQ(bytes, ReferenceBytes(delivery, now)) << "case " << i;
  }
  EXPECT_GE(direct, 2000);  // the common case is the direct one
}

// What a plain AMQP sender sends: bytes or text, a few common fields.
proton::message PlainAmqpMessage(Generator& generator) {
  proton::message message;
  if (generator.OneIn(2)) {
    message.body(proton::binary(generator.Bytes(30)));
    message.inferred(true);
  } else {
    message.body(generator.Text(10));
  }
  if (generator.OneIn(2)) message.durable(true);
  if (generator.OneIn(3)) message.ttl(proton::duration(generator.Int(1, 1 << 20)));
  if (generator.OneIn(3)) message.content_type("text/plain");
  if (generator.OneIn(3)) message.reply_to("replies/" + generator.Topic());
  if (generator.OneIn(3)) message.correlation_id(proton::binary(generator.Bytes(4) + "c"));
  for (int n = generator.Int(0, 3); n > 0; --n) {
    message.properties().put(generator.Text(2), generator.Text(3));
  }
  if (generator.OneIn(4)) message.message_annotations().put(proton::symbol("x-opt-retain"), true);
  return message;
}

TEST(DirectEncodingTest, EqualsFromModelForMessagesFromAmqpSenders) {
  Generator generator(Seed() + 3);
  int direct = 0;
  for (int i = 0; i < 3000; ++i) {
    proton::message in = generator.OneIn(2) ? PlainAmqpMessage(generator) : generator.AmqpMessage();
    auto model = ToModel(check::OverWire(in), testing::Context("t/x", generator.OneIn(2)));
    if (!model) continue;
    const core::Delivery delivery = RandomDelivery(generator, std::move(*model));
    std::string bytes;
    if (!EncodeFromModel(delivery, kNow, bytes)) continue;
    ++direct;
    ASSERT_EQ(bytes, ReferenceBytes(delivery, kNow)) << "case " << i;
  }
  EXPECT_GE(direct, 1000);
}

TEST(DirectEncodingTest, LeavesExtrasEncodedBodiesAndEmptyFieldsToFromModel) {
  core::Delivery delivery;
  Message message = testing::MqttMessage("a/b", "x");
  message.amqp_extras = MakePayload("\x00\x53\x70\x45");
  delivery.message = std::make_shared<const Message>(message);
  std::string bytes;
  EXPECT_FALSE(EncodeFromModel(delivery, kNow, bytes));
  message.amqp_extras = nullptr;
  message.properties.content_type = "";
  delivery.message = std::make_shared<const Message>(message);
  EXPECT_FALSE(EncodeFromModel(delivery, kNow, bytes));
  message.properties.content_type = std::nullopt;
  message.properties.user_properties.push_back({std::string(kAmqpBodyUserProperty), "none"});
  delivery.message = std::make_shared<const Message>(message);
  EXPECT_FALSE(EncodeFromModel(delivery, kNow, bytes));
  message.properties.user_properties.clear();
  delivery.message = std::make_shared<const Message>(message);
  ASSERT_TRUE(EncodeFromModel(delivery, kNow, bytes));
  EXPECT_EQ(bytes, ReferenceBytes(delivery, kNow));
}

}  // namespace
}  // namespace estuary::amqp
