// Issue 27, point 3: --queue-overflow reject as MQTT publishers see it. A
// v5 QoS 1/2 publisher whose message a matching session's full queue
// refused is answered 0x97 (Quota exceeded); a QoS 2 exchange ends there and
// its packet id is free for a new message; a 3.1.1 publisher, which has no
// negative acknowledgement, is acknowledged and counted.
#include <gtest/gtest.h>

#include "frontends/mqtt/session/connection_test_support.h"

namespace estuary::mqtt {
namespace {

using test_support::Client;

core::BrokerLimits RejectWhenOneIsQueued() {
  core::BrokerLimits limits;
  limits.session.max_queued_messages = 1;
  limits.session.queue_overflow = core::QueueOverflow::kReject;
  return limits;
}

class Issue27RejectTest : public test_support::ConnectionTest {
 protected:
  Issue27RejectTest() : ConnectionTest(RejectWhenOneIsQueued()) {}
  // A persistent v5 subscriber to "t" that went away (its queue holds one).
  void OfflineSubscriber() {
    Properties properties;
    properties.session_expiry_interval = 300;
    auto subscriber = Connected("away", ProtocolVersion::kV5, false, properties);
    subscriber->Subscribe("t", 1);
    (void)subscriber->Expect<SubackPacket>();
    subscriber->Send(DisconnectPacket{});
    Settle();
  }
  AckPacket PublishAndAnswer(Client& publisher, uint8_t qos, uint16_t packet_id) {
    publisher.Publish("t", "m" + std::to_string(packet_id), qos, packet_id);
    Settle();
    return publisher.Expect<AckPacket>();
  }
};

TEST_F(Issue27RejectTest, Issue27V5Qos1PublisherIsToldQuotaExceeded) {
  OfflineSubscriber();
  auto publisher = Connected("pub");
  const AckPacket first = PublishAndAnswer(*publisher, 1, 1);
  EXPECT_EQ(first.type, PacketType::kPuback);
  EXPECT_EQ(first.reason, ReasonCode::kSuccess);
  const AckPacket second = PublishAndAnswer(*publisher, 1, 2);
  EXPECT_EQ(second.type, PacketType::kPuback);
  EXPECT_EQ(second.reason, ReasonCode::kQuotaExceeded);
  EXPECT_EQ(metrics_.publishes_rejected_queue_full.load(), 1u);
  EXPECT_EQ(metrics_.queue_full_dropped.load(), 1u);
  EXPECT_FALSE(publisher->closed());
}

TEST_F(Issue27RejectTest, Issue27V5Qos2ExchangeEndsAtTheRefusedPubrec) {
  OfflineSubscriber();
  auto publisher = Connected("pub");
  EXPECT_EQ(PublishAndAnswer(*publisher, 2, 5).reason, ReasonCode::kSuccess);
  publisher->Ack(PacketType::kPubrel, 5);
  Settle();
  EXPECT_EQ(publisher->Expect<AckPacket>().type, PacketType::kPubcomp);
  const AckPacket refused = PublishAndAnswer(*publisher, 2, 6);
  EXPECT_EQ(refused.type, PacketType::kPubrec);
  EXPECT_EQ(refused.reason, ReasonCode::kQuotaExceeded);
  // Id 6 is free again: the same id is a new message (routed and refused
  // again), not a retry answered without routing.
  const AckPacket again = PublishAndAnswer(*publisher, 2, 6);
  EXPECT_EQ(again.reason, ReasonCode::kQuotaExceeded);
  EXPECT_EQ(metrics_.queue_full_dropped.load(), 2u);
  EXPECT_EQ(metrics_.publishes_rejected_queue_full.load(), 2u);
}

TEST_F(Issue27RejectTest, Issue27V311PublisherIsAcknowledgedAndCounted) {
  OfflineSubscriber();
  auto publisher = Connected("pub311", ProtocolVersion::kV311);
  EXPECT_EQ(PublishAndAnswer(*publisher, 1, 1).type, PacketType::kPuback);
  const AckPacket second = PublishAndAnswer(*publisher, 1, 2);
  EXPECT_EQ(second.type, PacketType::kPuback);
  EXPECT_EQ(second.packet_id, 2);
  EXPECT_EQ(metrics_.publishes_acknowledged_queue_full.load(), 1u);
  EXPECT_EQ(metrics_.publishes_rejected_queue_full.load(), 0u);
  EXPECT_EQ(metrics_.queue_full_dropped.load(), 1u);
}

TEST_F(Issue27RejectTest, Issue27NoMatchingFullSessionIsAcknowledged) {
  OfflineSubscriber();
  auto publisher = Connected("pub");
  publisher->Publish("other", "x", 1, 9);
  Settle();
  EXPECT_EQ(publisher->Expect<AckPacket>().reason, ReasonCode::kSuccess);
}

}  // namespace
}  // namespace estuary::mqtt
