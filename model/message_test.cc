#include "model/message.h"

#include <gtest/gtest.h>

namespace estuary {
namespace {

TEST(MessageIdTest, ToStringIsFixedWidthHex) {
  const MessageId id{.node = 1, .timestamp = 0x1234, .sequence = 0xff};
  EXPECT_EQ(id.ToString(), "0001-0000000000001234-000000ff");
  const MessageId max{.node = 0xFFFF, .timestamp = ~uint64_t{0}, .sequence = 0xFFFFFFFF};
  EXPECT_EQ(max.ToString(), "ffff-ffffffffffffffff-ffffffff");
}

TEST(MessageIdTest, ToStringSortsLikeTheId) {
  const MessageId earlier{.node = 3, .timestamp = 0x0FFF, .sequence = 9};
  const MessageId later{.node = 3, .timestamp = 0x1000, .sequence = 1};
  EXPECT_LT(earlier.ToString(), later.ToString());
  EXPECT_NE(earlier, later);
  EXPECT_EQ(earlier, (MessageId{.node = 3, .timestamp = 0x0FFF, .sequence = 9}));
}

TEST(MessageTest, PayloadIsSharedNotCopied) {
  Message message;
  message.payload = MakePayload(std::string(1000, 'x'));
  const Message delivery = message;  // what a fan-out copies
  EXPECT_EQ(delivery.payload.get(), message.payload.get());
  EXPECT_EQ(message.payload.use_count(), 2);
  EXPECT_EQ(delivery.PayloadSize(), 1000u);
}

TEST(MessageTest, NoPayloadHasSizeZero) {
  const Message message;
  EXPECT_EQ(message.PayloadSize(), 0u);
  EXPECT_GE(message.ApproximateBytes(), sizeof(Message));
}

TEST(MessageTest, ApproximateBytesCountsPayloadAndProperties) {
  Message message;
  const size_t empty = message.ApproximateBytes();
  message.payload = MakePayload(std::string(10'000, 'p'));
  const size_t with_payload = message.ApproximateBytes();
  EXPECT_GE(with_payload, empty + 10'000);
  EXPECT_LT(with_payload, empty + 10'200);

  message.topic = std::string(300, 't');
  message.properties.correlation_data = std::string(500, 'c');
  message.properties.user_properties.push_back({std::string(200, 'k'), std::string(100, 'v')});
  EXPECT_GE(message.ApproximateBytes(), with_payload + 300 + 500 + 200 + 100);
}

TEST(MessageTest, MinQoS) {
  EXPECT_EQ(MinQoS(QoS::kExactlyOnce, QoS::kAtLeastOnce), QoS::kAtLeastOnce);
  EXPECT_EQ(MinQoS(QoS::kAtMostOnce, QoS::kExactlyOnce), QoS::kAtMostOnce);
  EXPECT_EQ(MinQoS(QoS::kExactlyOnce, QoS::kExactlyOnce), QoS::kExactlyOnce);
}

TEST(MessageTest, UserPropertiesKeepOrderAndDuplicates) {
  MessageProperties a;
  a.user_properties = {{"k", "1"}, {"k", "2"}};
  MessageProperties b;
  b.user_properties = {{"k", "2"}, {"k", "1"}};
  EXPECT_NE(a, b);
  b.user_properties = {{"k", "1"}, {"k", "2"}};
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace estuary
