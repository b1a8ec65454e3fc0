// The QoS 1 and 2 exchanges on the wire, both directions: packet ids, DUP,
// redelivery on resume, duplicates, acknowledgements with reason codes,
// SUBACK/UNSUBACK and topic filter rules.
#include <gtest/gtest.h>

#include <set>

#include "conformance/mqtt/raw_fixture.h"

namespace estuary::conformance {
namespace {

using mqtt::AckPacket;
using mqtt::PacketType;

void SendAck(RawClient& client, PacketType type, uint16_t packet_id, ReasonCode reason = ReasonCode::kSuccess) {
  AckPacket ack;
  ack.type = type;
  ack.packet_id = packet_id;
  ack.reason = reason;
  client.Send(ack);
}

std::optional<AckPacket> ExpectAck(RawClient& client, PacketType type, uint16_t packet_id) {
  auto ack = client.ReceiveAs<AckPacket>();
  if (!ack) {
    ADD_FAILURE() << "no " << mqtt::ToString(type);
    return std::nullopt;
  }
  EXPECT_EQ(ack->type, type) << mqtt::ToString(ack->type);
  EXPECT_EQ(ack->packet_id, packet_id);
  return ack;
}

mqtt::Properties SessionExpiry(uint32_t seconds) {
  mqtt::Properties properties;
  properties.session_expiry_interval = seconds;
  return properties;
}

class Delivery : public RawFixture {
 protected:
  using RawFixture::RawFixture;
  // A persistent session in either version (3.1.1 clean session 0, 5.0 with
  // a session expiry interval).
  std::unique_ptr<RawClient> Persistent(const std::string& id) {
    return Connect(id, false, version() == ProtocolVersion::kV5 ? SessionExpiry(300) : mqtt::Properties{});
  }

  // The server's packet ids: non-zero, distinct while in flight, DUP 0 on
  // the first delivery, no id on QoS 0.
  void CheckServerPacketIds() {
    const std::string topic = Unique("ids/");
    auto subscriber = Subscriber(topic, 2);
    RawPublish(topic, "q1", 1);
    RawPublish(topic, "q2", 2);
    RawPublish(topic, "q1 again", 1);
    RawPublish(topic, "q0", 0);
    std::set<uint16_t> ids;
    for (const char* payload : {"q1", "q2", "q1 again", "q0"}) {
      auto publish = ReceivePublish(*subscriber, seconds(5), /*ack=*/false);
      ASSERT_TRUE(publish.has_value());
      EXPECT_EQ(publish->payload, payload) << "a packet id leaked into the payload";
      EXPECT_FALSE(publish->dup);
      if (publish->qos == 0) {
        EXPECT_EQ(publish->packet_id, 0);
        continue;
      }
      EXPECT_NE(publish->packet_id, 0);
      EXPECT_TRUE(ids.insert(publish->packet_id).second) << "packet id reused while in flight";
    }
  }

  // Acknowledgements carry the id of what they acknowledge.
  void CheckAckPacketIds() {
    auto client = Connect(Unique("acks"));
    const std::string topic = Unique("acks/");
    client->Send(MakePublish(topic, "one", 1, 4242));
    ExpectAck(*client, PacketType::kPuback, 4242);
    client->Send(MakePublish(topic, "two", 2, 777));
    ExpectAck(*client, PacketType::kPubrec, 777);
    SendAck(*client, PacketType::kPubrel, 777);
    ExpectAck(*client, PacketType::kPubcomp, 777);
    mqtt::SubscribeOptions options;
    options.qos = 1;
    auto suback = Subscribe(*client, topic, options, 3131);
    ASSERT_TRUE(suback.has_value());
    EXPECT_EQ(suback->packet_id, 3131);
    mqtt::UnsubscribePacket unsubscribe;
    unsubscribe.packet_id = 999;
    unsubscribe.filters = {topic, Unique("never/")};
    client->Send(unsubscribe);
    auto unsuback = client->ReceiveAs<mqtt::UnsubackPacket>();
    ASSERT_TRUE(unsuback.has_value()) << "no UNSUBACK (one filter matched nothing)";
    EXPECT_EQ(unsuback->packet_id, 999);
  }

  // Unacknowledged deliveries come again on resume: same ids, same order, DUP 1.
  void CheckResendOnResume() {
    const std::string id = Unique("resume");
    const std::string topic = Unique("resend/");
    auto client = Persistent(id);
    mqtt::SubscribeOptions options;
    options.qos = 1;
    ASSERT_TRUE(Subscribe(*client, topic, options).has_value());
    for (const char* payload : {"a", "b", "c"}) RawPublish(topic, payload, 1);
    std::vector<uint16_t> first_ids;
    for (int i = 0; i < 3; ++i) {
      auto publish = ReceivePublish(*client, seconds(5), /*ack=*/false);
      ASSERT_TRUE(publish.has_value());
      first_ids.push_back(publish->packet_id);
    }
    client->Close();
    auto again = Persistent(id);
    std::vector<std::string> payloads;
    for (int i = 0; i < 3; ++i) {
      auto publish = ReceivePublish(*again);
      ASSERT_TRUE(publish.has_value()) << "delivery " << i << " was not resent";
      EXPECT_TRUE(publish->dup) << "a resend without DUP";
      EXPECT_EQ(publish->packet_id, first_ids[static_cast<size_t>(i)]) << "a resend under a new packet id";
      payloads.push_back(publish->payload);
    }
    EXPECT_EQ(payloads, (std::vector<std::string>{"a", "b", "c"}));
  }

  // After PUBREC the server resends PUBREL, never the PUBLISH.
  void CheckPubrelResentNotPublish() {
    const std::string id = Unique("release");
    const std::string topic = Unique("q2/");
    auto client = Persistent(id);
    mqtt::SubscribeOptions options;
    options.qos = 2;
    ASSERT_TRUE(Subscribe(*client, topic, options).has_value());
    RawPublish(topic, "exactly once", 2);
    auto publish = ReceivePublish(*client, seconds(5), /*ack=*/false);
    ASSERT_TRUE(publish.has_value());
    SendAck(*client, PacketType::kPubrec, publish->packet_id);
    ExpectAck(*client, PacketType::kPubrel, publish->packet_id);
    client->Close();  // without PUBCOMP
    auto again = Persistent(id);
    auto resent = again->Receive();
    ASSERT_TRUE(resent.has_value());
    auto* release = std::get_if<AckPacket>(&*resent);
    ASSERT_NE(release, nullptr) << "got " << mqtt::ToString(mqtt::TypeOf(*resent)) << " instead of PUBREL";
    EXPECT_EQ(release->type, PacketType::kPubrel);
    EXPECT_EQ(release->packet_id, publish->packet_id);
    SendAck(*again, PacketType::kPubcomp, release->packet_id);
    auto rest = DrainUntilPong(*again);
    ASSERT_TRUE(rest.has_value());
    EXPECT_TRUE(rest->empty()) << "the PUBLISH came again after PUBREL";
  }

  // The DUP a subscriber sees is not the DUP the publisher sent.
  void CheckOutgoingDupIndependent() {
    const std::string topic = Unique("dup/");
    auto subscriber = Subscriber(topic, 1);
    auto publisher = Connect(Unique("pub"));
    auto publish = MakePublish(topic, "sent twice", 1, 12);
    publish.dup = true;
    ASSERT_TRUE(PublishAndAck(*publisher, publish));
    auto got = ReceivePublish(*subscriber);
    ASSERT_TRUE(got.has_value());
    EXPECT_FALSE(got->dup);
  }

  // QoS 2 receiver: until PUBREL a repeated id is acknowledged but not
  // forwarded again; after PUBCOMP the id is free for a new message.
  void CheckQos2NoDuplicates() {
    const std::string topic = Unique("once/");
    auto subscriber = Subscriber(topic, 2);
    auto publisher = Connect(Unique("pub"));
    publisher->Send(MakePublish(topic, "first", 2, 5));
    ExpectAck(*publisher, PacketType::kPubrec, 5);
    auto retry = MakePublish(topic, "first", 2, 5);
    retry.dup = true;
    publisher->Send(retry);
    ExpectAck(*publisher, PacketType::kPubrec, 5);
    SendAck(*publisher, PacketType::kPubrel, 5);
    ExpectAck(*publisher, PacketType::kPubcomp, 5);
    ASSERT_TRUE(PublishAndAck(*publisher, MakePublish(topic, "second", 2, 5)));  // id 5 again: new
    auto one = ReceivePublish(*subscriber);
    auto two = ReceivePublish(*subscriber);
    ASSERT_TRUE(one && two);
    EXPECT_EQ(one->payload, "first");
    EXPECT_EQ(two->payload, "second") << "the retried QoS 2 message was forwarded twice";
  }

  // QoS 1 receiver: after PUBACK the same id is a new message.
  void CheckQos1IdReusable() {
    const std::string topic = Unique("again/");
    auto subscriber = Subscriber(topic, 1);
    auto publisher = Connect(Unique("pub"));
    ASSERT_TRUE(PublishAndAck(*publisher, MakePublish(topic, "one", 1, 9)));
    ASSERT_TRUE(PublishAndAck(*publisher, MakePublish(topic, "two", 1, 9)));
    auto one = ReceivePublish(*subscriber);
    auto two = ReceivePublish(*subscriber);
    ASSERT_TRUE(one && two);
    EXPECT_EQ(one->payload, "one");
    EXPECT_EQ(two->payload, "two");
  }

  // UNSUBSCRIBE stops new messages but finishes a QoS 2 delivery underway.
  void CheckUnsubscribeCompletesInflight() {
    const std::string topic = Unique("finish/");
    auto client = Connect(Unique("sub"));
    mqtt::SubscribeOptions options;
    options.qos = 2;
    ASSERT_TRUE(Subscribe(*client, topic, options).has_value());
    RawPublish(topic, "underway", 2);
    auto publish = ReceivePublish(*client, seconds(5), /*ack=*/false);
    ASSERT_TRUE(publish.has_value());
    mqtt::UnsubscribePacket unsubscribe;
    unsubscribe.packet_id = 2;
    unsubscribe.filters = {topic};
    client->Send(unsubscribe);
    ASSERT_TRUE(client->ReceiveAs<mqtt::UnsubackPacket>().has_value());
    SendAck(*client, PacketType::kPubrec, publish->packet_id);
    ExpectAck(*client, PacketType::kPubrel, publish->packet_id);
    SendAck(*client, PacketType::kPubcomp, publish->packet_id);
    RawPublish(topic, "after", 1);
    auto rest = DrainUntilPong(*client);
    ASSERT_TRUE(rest.has_value());
    EXPECT_TRUE(rest->empty()) << "a message came after UNSUBSCRIBE";
  }

  // UNSUBSCRIBE compares filters as strings, not as topic matches.
  void CheckUnsubscribeComparesCharacters() {
    const std::string base = Unique("chars");
    auto client = Connect(Unique("sub"));
    mqtt::SubscribeOptions options;
    options.qos = 1;
    ASSERT_TRUE(Subscribe(*client, base + "/+/c", options).has_value());
    mqtt::UnsubscribePacket unsubscribe;
    unsubscribe.packet_id = 2;
    unsubscribe.filters = {base + "/b/c", base + "/+/C", base + "//c"};
    client->Send(unsubscribe);
    ASSERT_TRUE(client->ReceiveAs<mqtt::UnsubackPacket>().has_value());
    RawPublish(base + "/b/c", "still subscribed", 1);
    auto got = ReceivePublish(*client);
    ASSERT_TRUE(got.has_value()) << "a filter that only matches the subscription removed it";
    unsubscribe.packet_id = 3;
    unsubscribe.filters = {base + "/+/c"};
    client->Send(unsubscribe);
    ASSERT_TRUE(client->ReceiveAs<mqtt::UnsubackPacket>().has_value());
    RawPublish(base + "/b/c", "gone", 1);
    auto rest = DrainUntilPong(*client);
    ASSERT_TRUE(rest.has_value());
    EXPECT_TRUE(rest->empty());
  }
};

class DeliveryV311 : public Delivery {
 protected:
  DeliveryV311() : Delivery(ProtocolVersion::kV311) {}
};

class DeliveryV5 : public Delivery {
 protected:
  DeliveryV5() : Delivery(ProtocolVersion::kV5) {}
};

TEST_F(DeliveryV311, MQTT_2_3_1_4_MQTT_2_3_1_5_MQTT_4_3_1_1_MQTT_4_3_2_1_MQTT_4_3_3_1_ServerPacketIds) {
  CheckServerPacketIds();
}
TEST_F(DeliveryV5, MQTT_2_2_1_2_MQTT_2_2_1_4_MQTT_2_2_2_1_MQTT_4_3_1_1_MQTT_4_3_2_1_MQTT_4_3_2_2_MQTT_4_3_3_1_MQTT_4_3_3_2_ServerPacketIds) {
  CheckServerPacketIds();
}

TEST_F(DeliveryV311, MQTT_2_3_1_6_MQTT_2_3_1_7_MQTT_3_8_4_2_MQTT_3_10_4_4_MQTT_3_10_4_5_AcksCarryTheRequestPacketId) {
  CheckAckPacketIds();
}
TEST_F(DeliveryV5, MQTT_2_2_1_5_MQTT_2_2_1_6_MQTT_4_3_2_4_MQTT_4_3_3_8_MQTT_4_3_3_11_MQTT_3_8_4_2_MQTT_3_10_4_4_AcksCarryTheRequestPacketId) {
  CheckAckPacketIds();
}

TEST_F(DeliveryV311, MQTT_3_3_1_1_MQTT_4_4_0_1_MQTT_4_6_0_1_MQTT_3_1_2_4_UnacknowledgedResentWithDupOnResume) {
  CheckResendOnResume();
}
TEST_F(DeliveryV5, MQTT_3_3_1_1_MQTT_4_4_0_1_MQTT_4_3_2_3_UnacknowledgedResentWithDupOnResume) {
  CheckResendOnResume();
}

TEST_F(DeliveryV311, MQTT_4_3_3_1_MQTT_4_4_0_1_PubrelResentNotThePublish) { CheckPubrelResentNotPublish(); }
TEST_F(DeliveryV5, MQTT_4_3_3_3_MQTT_4_3_3_4_MQTT_4_3_3_5_MQTT_4_3_3_6_PubrelResentNotThePublish) {
  CheckPubrelResentNotPublish();
}

TEST_F(DeliveryV311, MQTT_3_3_1_3_OutgoingDupIndependentOfIncoming) { CheckOutgoingDupIndependent(); }
TEST_F(DeliveryV5, MQTT_3_3_1_3_OutgoingDupIndependentOfIncoming) { CheckOutgoingDupIndependent(); }

TEST_F(DeliveryV311, MQTT_4_3_3_2_Qos2RetryNotForwardedTwice) { CheckQos2NoDuplicates(); }
TEST_F(DeliveryV5, MQTT_4_3_3_10_MQTT_4_3_3_12_Qos2RetryNotForwardedTwice) { CheckQos2NoDuplicates(); }

TEST_F(DeliveryV311, MQTT_4_3_2_2_Qos1IdFreeAfterPuback) { CheckQos1IdReusable(); }
TEST_F(DeliveryV5, MQTT_4_3_2_5_Qos1IdFreeAfterPuback) { CheckQos1IdReusable(); }

TEST_F(DeliveryV311, MQTT_3_10_4_2_MQTT_3_10_4_3_UnsubscribeFinishesDeliveriesUnderway) {
  CheckUnsubscribeCompletesInflight();
}
TEST_F(DeliveryV5, MQTT_3_10_4_2_MQTT_3_10_4_3_UnsubscribeFinishesDeliveriesUnderway) {
  CheckUnsubscribeCompletesInflight();
}

TEST_F(DeliveryV311, MQTT_3_10_4_1_MQTT_4_7_3_4_UnsubscribeComparesCharacters) {
  CheckUnsubscribeComparesCharacters();
}
TEST_F(DeliveryV5, MQTT_3_10_4_1_MQTT_4_7_3_4_UnsubscribeComparesCharacters) {
  CheckUnsubscribeComparesCharacters();
}

TEST_F(DeliveryV311, MQTT_3_8_4_1_MQTT_3_8_4_4_MQTT_3_8_4_5_MQTT_3_9_3_1_MQTT_3_9_3_2_MQTT_4_7_1_2_MQTT_4_7_1_3_MQTT_4_7_3_1_SubackCodesInFilterOrder) {
  auto client = Connect(Unique("sub"));
  mqtt::SubscribePacket subscribe;
  subscribe.packet_id = 10;
  const std::string base = Unique("codes/");
  subscribe.subscriptions = {{base + "/two", {2, false, false, 0}}, {base + "/#/bad", {1, false, false, 0}},
                             {base + "/zero", {0, false, false, 0}}, {base + "/b+", {1, false, false, 0}},
                             {"", {1, false, false, 0}},             {base + "/one/+", {1, false, false, 0}}};
  client->Send(subscribe);
  auto suback = client->ReceiveAs<mqtt::SubackPacket>();
  ASSERT_TRUE(suback.has_value());
  EXPECT_EQ(suback->packet_id, 10);
  const std::vector<ReasonCode> expected = {ReasonCode::kGrantedQos2, ReasonCode::kUnspecifiedError,
                                            ReasonCode::kSuccess,     ReasonCode::kUnspecifiedError,
                                            ReasonCode::kUnspecifiedError, ReasonCode::kGrantedQos1};
  EXPECT_EQ(suback->reasons, expected);
  // The good filters of the packet work like separate SUBSCRIBEs.
  RawPublish(base + "/one/x", "granted", 1);
  EXPECT_TRUE(ReceivePublish(*client).has_value());
}

TEST_F(DeliveryV5, MQTT_3_8_4_1_MQTT_3_8_4_5_MQTT_3_8_4_6_MQTT_3_8_4_7_MQTT_3_9_3_1_MQTT_3_9_3_2_MQTT_4_7_1_1_MQTT_4_7_1_2_MQTT_4_7_3_1_SubackCodesInFilterOrder) {
  auto client = Connect(Unique("sub"));
  mqtt::SubscribePacket subscribe;
  subscribe.packet_id = 10;
  const std::string base = Unique("codes/");
  subscribe.subscriptions = {{base + "/two", {2, false, false, 0}}, {base + "/#/bad", {1, false, false, 0}},
                             {base + "/zero", {0, false, false, 0}}, {base + "/b+", {1, false, false, 0}},
                             {"", {1, false, false, 0}},             {base + "/one/+", {1, false, false, 0}}};
  client->Send(subscribe);
  auto suback = client->ReceiveAs<mqtt::SubackPacket>();
  ASSERT_TRUE(suback.has_value());
  EXPECT_EQ(suback->packet_id, 10);
  const std::vector<ReasonCode> expected = {ReasonCode::kGrantedQos2,        ReasonCode::kTopicFilterInvalid,
                                            ReasonCode::kSuccess,            ReasonCode::kTopicFilterInvalid,
                                            ReasonCode::kTopicFilterInvalid, ReasonCode::kGrantedQos1};
  EXPECT_EQ(suback->reasons, expected);
  RawPublish(base + "/one/x", "granted", 1);
  EXPECT_TRUE(ReceivePublish(*client).has_value());
}

TEST_F(DeliveryV311, MQTT_3_8_4_3_ResubscribeReplacesTheSubscription) {
  const std::string topic = Unique("again/");
  RawPublish(topic, "retained", 1, true);
  auto client = Connect(Unique("sub"));
  mqtt::SubscribeOptions options;
  options.qos = 0;
  ASSERT_TRUE(Subscribe(*client, topic, options, 1).has_value());
  auto first = ReceivePublish(*client);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->qos, 0);
  options.qos = 2;
  ASSERT_TRUE(Subscribe(*client, topic, options, 2).has_value());  // same filter: replaces
  auto resent = ReceivePublish(*client);
  ASSERT_TRUE(resent.has_value()) << "the retained message was not re-sent";
  EXPECT_TRUE(resent->retain);
  RawPublish(topic, "live", 2);
  auto live = ReceivePublish(*client);
  ASSERT_TRUE(live.has_value());
  EXPECT_EQ(live->qos, 2) << "the replacement's QoS was not used";
  auto rest = DrainUntilPong(*client);
  ASSERT_TRUE(rest.has_value());
  EXPECT_TRUE(rest->empty()) << "two subscriptions for one filter";
}

TEST_F(DeliveryV5, MQTT_3_10_4_6_MQTT_3_11_3_1_MQTT_3_11_3_2_UnsubackCodesInFilterOrder) {
  auto client = Connect(Unique("sub"));
  const std::string topic = Unique("u/");
  mqtt::SubscribeOptions options;
  options.qos = 1;
  ASSERT_TRUE(Subscribe(*client, topic, options).has_value());
  mqtt::UnsubscribePacket unsubscribe;
  unsubscribe.packet_id = 20;
  unsubscribe.filters = {Unique("never/"), topic, "a/#/b"};
  client->Send(unsubscribe);
  auto unsuback = client->ReceiveAs<mqtt::UnsubackPacket>();
  ASSERT_TRUE(unsuback.has_value());
  EXPECT_EQ(unsuback->packet_id, 20);
  const std::vector<ReasonCode> expected = {ReasonCode::kNoSubscriptionExisted, ReasonCode::kSuccess,
                                            ReasonCode::kTopicFilterInvalid};
  EXPECT_EQ(unsuback->reasons, expected);
}

TEST_F(DeliveryV5, MQTT_3_4_2_1_MQTT_3_5_2_1_MQTT_4_3_3_9_PayloadFormatInvalidRefusedAndIdFreed) {
  auto client = Connect(Unique("pub"));
  const std::string topic = Unique("pfi/");
  auto subscriber = Subscriber(topic, 2);
  auto bad = MakePublish(topic, "\xff\xfe not UTF-8", 1, 3);
  bad.properties.payload_format_indicator = 1;
  client->Send(bad);
  auto puback = ExpectAck(*client, PacketType::kPuback, 3);
  ASSERT_TRUE(puback.has_value());
  EXPECT_EQ(puback->reason, ReasonCode::kPayloadFormatInvalid);
  bad.qos = 2;
  bad.packet_id = 4;
  client->Send(bad);
  auto pubrec = ExpectAck(*client, PacketType::kPubrec, 4);
  ASSERT_TRUE(pubrec.has_value());
  EXPECT_EQ(pubrec->reason, ReasonCode::kPayloadFormatInvalid);
  // After a failing PUBREC the id starts a new message.
  ASSERT_TRUE(PublishAndAck(*client, MakePublish(topic, "valid now", 2, 4)));
  auto got = ReceivePublish(*subscriber);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->payload, "valid now") << "a refused message was forwarded";
}

TEST_F(DeliveryV5, MQTT_3_6_2_1_MQTT_3_7_2_1_PubrelForAnUnknownIdGetsPubcomp0x92) {
  auto client = Connect(Unique("confused"));
  SendAck(*client, PacketType::kPubrel, 4711);
  auto pubcomp = ExpectAck(*client, PacketType::kPubcomp, 4711);
  ASSERT_TRUE(pubcomp.has_value());
  EXPECT_EQ(pubcomp->reason, ReasonCode::kPacketIdentifierNotFound);
}

TEST_F(DeliveryV5, MQTT_4_4_0_2_FailingAcknowledgementEndsTheExchange) {
  const std::string id = Unique("refuser");
  const std::string topic = Unique("refused/");
  auto client = Persistent(id);
  mqtt::SubscribeOptions options;
  options.qos = 2;
  ASSERT_TRUE(Subscribe(*client, topic, options).has_value());
  RawPublish(topic, "qos 1", 1);
  RawPublish(topic, "qos 2", 2);
  auto one = ReceivePublish(*client, seconds(5), false);
  auto two = ReceivePublish(*client, seconds(5), false);
  ASSERT_TRUE(one && two);
  SendAck(*client, PacketType::kPuback, one->packet_id, ReasonCode::kUnspecifiedError);
  SendAck(*client, PacketType::kPubrec, two->packet_id, ReasonCode::kUnspecifiedError);
  auto quiet = DrainUntilPong(*client);
  ASSERT_TRUE(quiet.has_value()) << "the server answered a failing PUBREC with "
                                 << (client->last_unexpected ? mqtt::ToString(mqtt::TypeOf(*client->last_unexpected))
                                                             : "nothing");
  EXPECT_TRUE(quiet->empty());
  client->Close();
  auto again = Persistent(id);
  auto resent = DrainUntilPong(*again);
  ASSERT_TRUE(resent.has_value());
  EXPECT_TRUE(resent->empty()) << "an acknowledged (refused) message was sent again";
}

}  // namespace
}  // namespace estuary::conformance
