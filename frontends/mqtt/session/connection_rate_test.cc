// Issue 21, point 6: --max-publish-rate and --max-publish-bytes-rate as an
// MQTT publisher sees them, on simulated time: beyond its budget the
// connection stops reading (backpressure) and goes on once the budget
// refilled; it is never disconnected, and nothing it sent is lost.
#include <gtest/gtest.h>

#include "frontends/mqtt/session/connection_test_support.h"

namespace estuary::mqtt {
namespace {

using test_support::Client;

core::BrokerLimits PublishRate(uint32_t messages, uint64_t bytes) {
  core::BrokerLimits limits;
  limits.max_publish_rate = messages;
  limits.max_publish_bytes_rate = bytes;
  limits.session.max_queued_messages = 100'000;
  return limits;
}

std::string Burst(size_t count, size_t payload) {
  std::string bytes;
  for (size_t i = 0; i < count; ++i) {
    PublishPacket publish;
    publish.topic = "t";
    publish.payload = std::string(payload, 'x');
    EncodePacket(publish, ProtocolVersion::kV5, bytes);
  }
  return bytes;
}

class Issue21PublishRateTest : public test_support::ConnectionTest {
 protected:
  explicit Issue21PublishRateTest(core::BrokerLimits limits = PublishRate(100, 0)) : ConnectionTest(limits) {}
  // Receives for `ms` of simulated time, in 10 ms steps.
  size_t ReceivedWithin(Client& subscriber, int64_t ms) {
    size_t received = 0;
    for (int64_t t = 0; t < ms; t += 10) {
      loop_.AdvanceBy(10);
      Settle();
      received += subscriber.Received().size();
    }
    return received;
  }
};

TEST_F(Issue21PublishRateTest, TenTimesTheRateIsHeldToTheRateWithoutADisconnect) {
  auto subscriber = Connected("sub");
  subscriber->Subscribe("t", 0);
  subscriber->Received();
  auto publisher = Connected("pub");
  // Ten seconds' worth of the limit (100/s) in one read.
  publisher->SendRaw(Burst(1000, 10));
  Settle();
  // The first second's burst goes at once, then reading stops.
  EXPECT_EQ(subscriber->Received().size(), 100u);
  EXPECT_FALSE(publisher->stream().reading);
  EXPECT_GE(metrics_.publish_throttled.load(), 1u);
  // Then 100 per second: 500 in 5 s (give or take the step).
  const size_t in_five_seconds = ReceivedWithin(*subscriber, 5000);
  EXPECT_GE(in_five_seconds, 495u);
  EXPECT_LE(in_five_seconds, 501u);
  // Everything arrives in the end, and the publisher is still connected.
  const size_t rest = ReceivedWithin(*subscriber, 5000);
  EXPECT_EQ(100u + in_five_seconds + rest, 1000u);
  EXPECT_FALSE(publisher->closed());
  EXPECT_EQ(publisher->connection().state(), MqttConnection::State::kConnected);
  EXPECT_TRUE(publisher->stream().reading);  // the budget refilled: reading again
  EXPECT_EQ(metrics_.messages_dropped.load(), 0u);
}

TEST_F(Issue21PublishRateTest, PingsAndAcksBehindAThrottledPublishWaitToo) {
  auto publisher = Connected("pub");
  std::string bytes = Burst(101, 1);
  EncodePacket(PingreqPacket{}, ProtocolVersion::kV5, bytes);
  publisher->SendRaw(bytes);
  // The 101st PUBLISH waits for budget; the PINGREQ behind it is not read out of order.
  EXPECT_TRUE(publisher->Received().empty());
  loop_.AdvanceBy(10);
  Settle();
  auto packets = publisher->Received();
  ASSERT_EQ(packets.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<PingrespPacket>(packets[0]));
}

class Issue21PublishBytesRateTest : public Issue21PublishRateTest {
 protected:
  Issue21PublishBytesRateTest() : Issue21PublishRateTest(PublishRate(0, 10'000)) {}
};

TEST_F(Issue21PublishBytesRateTest, BytesPerSecondAreHeldToTheRate) {
  auto subscriber = Connected("sub");
  subscriber->Subscribe("t", 0);
  subscriber->Received();
  auto publisher = Connected("pub");
  publisher->SendRaw(Burst(100, 997));  // 1,002-byte packets: ~100 KB, ten seconds' worth
  Settle();
  const size_t first = subscriber->Received().size();
  EXPECT_GE(first, 10u);
  EXPECT_LE(first, 11u);
  const size_t in_four_seconds = ReceivedWithin(*subscriber, 4000);
  EXPECT_GE(in_four_seconds, 38u);
  EXPECT_LE(in_four_seconds, 41u);
  EXPECT_FALSE(publisher->closed());
}

TEST_F(Issue21PublishBytesRateTest, APublishLargerThanOneSecondsBytesStillGoesThrough) {
  auto subscriber = Connected("sub");
  subscriber->Subscribe("t", 0);
  subscriber->Received();
  auto publisher = Connected("pub");
  publisher->SendRaw(Burst(2, 50'000));  // five seconds' worth each
  Settle();
  EXPECT_EQ(subscriber->Received().size(), 1u);  // the first at once, as a debt
  // 40,000 bytes over the second's 10,000: the second waits 4 s.
  EXPECT_EQ(ReceivedWithin(*subscriber, 3900), 0u);
  EXPECT_EQ(ReceivedWithin(*subscriber, 200), 1u);
  EXPECT_FALSE(publisher->closed());
}

TEST_F(Issue21PublishBytesRateTest, AThrottledPublisherIsNotTimedOutByKeepAlive) {
  auto publisher = std::make_unique<Client>(*broker_, ProtocolVersion::kV5);
  publisher->Connect("pub", true, {}, /*keep_alive=*/2);  // idle after 3 s
  ASSERT_EQ(publisher->Expect<ConnackPacket>().reason, ReasonCode::kSuccess);
  publisher->SendRaw(Burst(2, 50'000));  // the second waits 4 s for its budget
  for (int i = 0; i < 50; ++i) {
    loop_.AdvanceBy(100);
    Settle();
  }
  EXPECT_FALSE(publisher->closed());
  EXPECT_EQ(metrics_.messages_in.load(), 2u);
}

class Issue21NoPublishLimitTest : public test_support::ConnectionTest {};

TEST_F(Issue21NoPublishLimitTest, WithoutALimitNothingIsHeld) {
  auto subscriber = Connected("sub");
  subscriber->Subscribe("t", 0);
  subscriber->Received();
  auto publisher = Connected("pub");
  publisher->SendRaw(Burst(500, 10));
  Settle();
  EXPECT_EQ(subscriber->Received().size(), 500u);
  EXPECT_EQ(metrics_.publish_throttled.load(), 0u);
}

}  // namespace
}  // namespace estuary::mqtt
