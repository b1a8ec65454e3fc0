#include "cluster-core/store/record_codec.h"

#include <gtest/gtest.h>

namespace estuary::core::store {
namespace {

MessagePtr FullMessage() {
  auto m = std::make_shared<Message>();
  m->id = MessageId{3, 0x0102030405060708ull, 0x0a0b0c0d};
  m->topic = "a/b";
  m->payload = MakePayload(std::string("pay\0load", 8));
  m->qos = QoS::kExactlyOnce;
  m->retain = true;
  m->durable = true;
  m->properties.content_type = "text/plain";
  m->properties.response_topic = "reply";
  m->properties.correlation_data = std::string("\x00\x01", 2);
  m->properties.payload_format = 1;
  m->properties.expiry_at_ms = 1'700'000'123'456;
  m->properties.user_properties = {{"k", "v"}, {"k", "w"}};
  m->origin = Origin{Protocol::kMqtt, "client", 3};
  m->amqp_extras = MakePayload("extras");
  return m;
}

void ExpectSameMessage(const Message& a, const Message& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.topic, b.topic);
  ASSERT_EQ(a.payload != nullptr, b.payload != nullptr);
  if (a.payload) {
    EXPECT_EQ(*a.payload, *b.payload);
  }
  EXPECT_EQ(a.qos, b.qos);
  EXPECT_EQ(a.retain, b.retain);
  EXPECT_EQ(a.durable, b.durable);
  EXPECT_EQ(a.properties, b.properties);
  EXPECT_EQ(a.origin.protocol, b.origin.protocol);
  EXPECT_EQ(a.origin.client_id, b.origin.client_id);
  EXPECT_EQ(a.origin.node, b.origin.node);
  ASSERT_EQ(a.amqp_extras != nullptr, b.amqp_extras != nullptr);
  if (a.amqp_extras) {
    EXPECT_EQ(*a.amqp_extras, *b.amqp_extras);
  }
}

TEST(RecordCodecTest, MessageRoundTripsEveryField) {
  auto original = FullMessage();
  auto decoded = DecodeMessage(EncodeMessage(*original));
  ASSERT_TRUE(decoded);
  ExpectSameMessage(*original, **decoded);
}

TEST(RecordCodecTest, TruncatedOrTrailingBytesAreRejected) {
  const std::string bytes = EncodeMessage(*FullMessage());
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_FALSE(DecodeMessage(bytes.substr(0, n))) << "prefix of " << n << " bytes";
  }
  EXPECT_FALSE(DecodeMessage(bytes + "x"));
}

TEST(RecordCodecTest, SessionRecordWithWillRoundTrips) {
  SessionRecord record;
  record.expiry_interval = 3600;
  record.disconnected_at_ms = 1'700'000'000'000;
  WillMessage will;
  will.message = FullMessage();
  will.delay_seconds = 30;
  will.expiry_interval = 60;
  record.will = will;
  auto decoded = DecodeSession(EncodeSession(record));
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->expiry_interval, 3600u);
  EXPECT_EQ(decoded->disconnected_at_ms, record.disconnected_at_ms);
  ASSERT_TRUE(decoded->will);
  EXPECT_EQ(decoded->will->delay_seconds, 30u);
  EXPECT_EQ(decoded->will->expiry_interval, 60u);
  ExpectSameMessage(*will.message, *decoded->will->message);
}

TEST(RecordCodecTest, OptionsDeliveryAndInflightRoundTrip) {
  SubscriptionOptions options{QoS::kAtLeastOnce, true, true, 2, 77};
  EXPECT_EQ(DecodeOptions(EncodeOptions(options)), options);

  Delivery delivery{FullMessage(), QoS::kAtLeastOnce, true, {1, 2}};
  auto decoded = DecodeDelivery(EncodeDelivery(delivery));
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->qos, QoS::kAtLeastOnce);
  EXPECT_TRUE(decoded->retain);
  EXPECT_EQ(decoded->subscription_ids, (std::vector<uint32_t>{1, 2}));

  InflightDelivery released{Delivery{nullptr, QoS::kExactlyOnce, false, {}}, InflightPhase::kAwaitingPubcomp, 9};
  auto inflight = DecodeInflight(EncodeInflight(released));
  ASSERT_TRUE(inflight);
  EXPECT_EQ(inflight->phase, InflightPhase::kAwaitingPubcomp);
  EXPECT_EQ(inflight->sent_order, 9u);
  EXPECT_EQ(inflight->delivery.message, nullptr);
  // Before PUBREC the message is required.
  released.phase = InflightPhase::kAwaitingPubrec;
  EXPECT_FALSE(DecodeInflight(EncodeInflight(released)));
}

TEST(RecordCodecTest, QueueKeysSortInSequenceOrderAndSessionsDoNotCollide) {
  EXPECT_LT(QueuedKey("c", 255), QueuedKey("c", 256));
  EXPECT_LT(QueuedKey("c", 1), QueuedKey("c", uint64_t{1} << 40));
  // "ab" is not a prefix match for "a": the length comes first.
  const std::string prefix = SessionPrefix(kQueuedTag, "a");
  EXPECT_NE(QueuedKey("ab", 1).compare(0, prefix.size(), prefix), 0);
  auto parsed = ParseSessionKey(InflightKey("client", 0x1234));
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->tag, kInflightTag);
  EXPECT_EQ(parsed->client_id, "client");
  EXPECT_EQ(DecodeBigEndian(parsed->rest), 0x1234u);
  EXPECT_FALSE(ParseSessionKey(std::string("q\x00\x09short", 8)));
}

}  // namespace
}  // namespace estuary::core::store
