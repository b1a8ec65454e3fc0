// MqttConnection driven through in-memory streams on simulated time: exact
// packets in, exact packets out. Test names carry the normative statement
// they check where there is one. The client id claim tests are in
// connection_claim_test.cc.
#include "frontends/mqtt/session/connection.h"

#include <gtest/gtest.h>

#include "frontends/mqtt/codec/encoder.h"
#include "frontends/mqtt/session/connection_test_support.h"

namespace estuary::mqtt {
namespace {

using test_support::Client;
using test_support::ConnectionTest;

TEST_F(ConnectionTest, ConnackAcceptsV311_MQTT_3_2_2_1) {
  Client client(*broker_, ProtocolVersion::kV311);
  client.Connect("c1");
  auto connack = client.Expect<ConnackPacket>();
  EXPECT_EQ(connack.reason, ReasonCode::kSuccess);
  EXPECT_FALSE(connack.session_present);
}

TEST_F(ConnectionTest, FirstPacketMustBeConnect_MQTT_3_1_0_1) {
  Client client(*broker_, ProtocolVersion::kV311);
  client.Send(PingreqPacket{});
  EXPECT_TRUE(client.closed());
  EXPECT_TRUE(client.Received().empty());
}

TEST_F(ConnectionTest, SecondConnectIsAProtocolError_MQTT_3_1_0_2) {
  auto client = Connected("c1");
  client->Connect("c1");
  auto disconnect = client->Expect<DisconnectPacket>();
  EXPECT_EQ(disconnect.reason, ReasonCode::kProtocolError);
  EXPECT_TRUE(client->closed());
}

TEST_F(ConnectionTest, UnsupportedProtocolLevelGetsReturnCode1_MQTT_3_1_2_2) {
  Client client(*broker_, ProtocolVersion::kV311);
  // CONNECT with protocol name MQTT and level 2.
  const char bytes[] = {0x10, 0x0d, 0x00, 0x04, 'M', 'Q', 'T', 'T', 0x02, 0x02, 0x00, 0x3c, 0x00, 0x01, 'x'};
  client.SendRaw(std::string_view(bytes, sizeof(bytes)));
  EXPECT_TRUE(client.closed());
  EXPECT_EQ(client.stream().written, std::string("\x20\x02\x00\x01", 4));
}

TEST_F(ConnectionTest, ProtocolLevelAboveFiveGetsV5Reason0x84) {
  Client client(*broker_, ProtocolVersion::kV5);
  const char bytes[] = {0x10, 0x0d, 0x00, 0x04, 'M', 'Q', 'T', 'T', 0x09, 0x02, 0x00, 0x3c, 0x00, 0x01, 'x'};
  client.SendRaw(std::string_view(bytes, sizeof(bytes)));
  EXPECT_TRUE(client.closed());
  EXPECT_EQ(client.Expect<ConnackPacket>().reason, ReasonCode::kUnsupportedProtocolVersion);
}

TEST_F(ConnectionTest, NotMqttAtAllIsClosedWithoutConnack) {
  Client client(*broker_, ProtocolVersion::kV311);
  client.SendRaw("GET / HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(client.closed());
  EXPECT_TRUE(client.stream().written.empty());
}

TEST_F(ConnectionTest, EmptyClientIdWithoutCleanSessionIsRejected_MQTT_3_1_3_8) {
  Client client(*broker_, ProtocolVersion::kV311);
  client.Connect("", false);
  EXPECT_EQ(client.Expect<ConnackPacket>().reason, ReasonCode::kClientIdentifierNotValid);
  EXPECT_TRUE(client.closed());
}

TEST_F(ConnectionTest, V5EmptyClientIdGetsAnAssignedIdentifier_MQTT_3_2_2_16) {
  Client client(*broker_, ProtocolVersion::kV5);
  client.Connect("");
  auto connack = client.Expect<ConnackPacket>();
  ASSERT_TRUE(connack.properties.assigned_client_identifier.has_value());
  EXPECT_FALSE(connack.properties.assigned_client_identifier->empty());
  EXPECT_EQ(client.connection().client_id(), *connack.properties.assigned_client_identifier);
}

TEST_F(ConnectionTest, Qos1PublishIsAcknowledgedAndDelivered_MQTT_4_3_2_2) {
  auto subscriber = Connected("sub");
  subscriber->Subscribe("a/+", 1);
  auto suback = subscriber->Expect<SubackPacket>();
  EXPECT_EQ(suback.reasons, std::vector<ReasonCode>{ReasonCode::kGrantedQos1});
  auto publisher = Connected("pub");
  publisher->Publish("a/b", "hello", 1, 7);
  EXPECT_EQ(publisher->Expect<AckPacket>().packet_id, 7);
  Settle();
  auto delivered = subscriber->Expect<PublishPacket>();
  EXPECT_EQ(delivered.topic, "a/b");
  EXPECT_EQ(delivered.payload, "hello");
  EXPECT_EQ(delivered.qos, 1);
  EXPECT_NE(delivered.packet_id, 0);
}

TEST_F(ConnectionTest, Qos2InboundIsDeliveredOnceDespiteRetries_MQTT_4_3_3_9) {
  auto subscriber = Connected("sub");
  subscriber->Subscribe("t", 2);
  subscriber->Received();
  auto publisher = Connected("pub");
  publisher->Publish("t", "once", 2, 5);
  EXPECT_EQ(publisher->Expect<AckPacket>().type, PacketType::kPubrec);
  publisher->Publish("t", "once", 2, 5);  // retry before PUBREL
  EXPECT_EQ(publisher->Expect<AckPacket>().type, PacketType::kPubrec);
  publisher->Ack(PacketType::kPubrel, 5);
  auto pubcomp = publisher->Expect<AckPacket>();
  EXPECT_EQ(pubcomp.type, PacketType::kPubcomp);
  EXPECT_EQ(pubcomp.reason, ReasonCode::kSuccess);
  Settle();
  EXPECT_EQ(subscriber->Received().size(), 1u);
}

TEST_F(ConnectionTest, Qos2OutboundFollowsPubrecPubrelPubcomp_MQTT_4_3_3_3) {
  auto subscriber = Connected("sub");
  subscriber->Subscribe("t", 2);
  subscriber->Received();
  auto publisher = Connected("pub");
  publisher->Publish("t", "x", 2, 1);
  Settle();
  auto delivered = subscriber->Expect<PublishPacket>();
  subscriber->Ack(PacketType::kPubrec, delivered.packet_id);
  auto pubrel = subscriber->Expect<AckPacket>();
  EXPECT_EQ(pubrel.type, PacketType::kPubrel);
  EXPECT_EQ(pubrel.packet_id, delivered.packet_id);
  subscriber->Ack(PacketType::kPubcomp, delivered.packet_id);
  EXPECT_EQ(metrics_.inflight_messages.load(), 0u);
}

TEST_F(ConnectionTest, ReceiveMaximumLimitsUnacknowledgedDeliveries_MQTT_3_3_4_9) {
  Properties properties;
  properties.receive_maximum = 2;
  auto subscriber = Connected("sub", ProtocolVersion::kV5, true, properties);
  subscriber->Subscribe("t", 1);
  subscriber->Received();
  auto publisher = Connected("pub");
  for (uint16_t i = 1; i <= 5; ++i) publisher->Publish("t", std::to_string(i), 1, i);
  Settle();
  auto first = subscriber->Received();
  ASSERT_EQ(first.size(), 2u);
  subscriber->Ack(PacketType::kPuback, std::get<PublishPacket>(first[0]).packet_id);
  Settle();
  auto next = subscriber->Received();
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(std::get<PublishPacket>(next[0]).payload, "3");
}

TEST_F(ConnectionTest, UnacknowledgedMessagesAreResentWithDupOnResume_MQTT_4_4_0_1) {
  auto subscriber = std::make_unique<Client>(*broker_, ProtocolVersion::kV311);
  subscriber->Connect("sub", false);
  subscriber->Received();
  subscriber->Subscribe("t", 1);
  subscriber->Received();
  auto publisher = Connected("pub");
  publisher->Publish("t", "important", 1, 1);
  Settle();
  auto first = subscriber->Expect<PublishPacket>();
  EXPECT_FALSE(first.dup);
  subscriber->DropNetwork();

  auto resumed = std::make_unique<Client>(*broker_, ProtocolVersion::kV311);
  resumed->Connect("sub", false);
  auto packets = resumed->Received();
  ASSERT_EQ(packets.size(), 2u);
  EXPECT_TRUE(std::get<ConnackPacket>(packets[0]).session_present);
  const auto& again = std::get<PublishPacket>(packets[1]);
  EXPECT_TRUE(again.dup);
  EXPECT_EQ(again.packet_id, first.packet_id);
  EXPECT_EQ(again.payload, "important");
}

TEST_F(ConnectionTest, MessagesQueuedWhileOfflineArriveOnResume) {
  auto subscriber = std::make_unique<Client>(*broker_, ProtocolVersion::kV311);
  subscriber->Connect("sub", false);
  subscriber->Subscribe("t", 1);
  subscriber->DropNetwork();
  auto publisher = Connected("pub");
  publisher->Publish("t", "while-away", 1, 1);
  auto resumed = std::make_unique<Client>(*broker_, ProtocolVersion::kV311);
  resumed->Connect("sub", false);
  Settle();
  auto packets = resumed->Received();
  ASSERT_EQ(packets.size(), 2u);
  EXPECT_EQ(std::get<PublishPacket>(packets[1]).payload, "while-away");
}

TEST_F(ConnectionTest, KeepAliveDisconnectsAfterOneAndAHalfPeriods_MQTT_3_1_2_24) {
  auto client = std::make_unique<Client>(*broker_, ProtocolVersion::kV5);
  client->Connect("c", true, {}, 10);
  client->Received();
  loop_.AdvanceBy(14'000);
  EXPECT_FALSE(client->closed());
  client->Send(PingreqPacket{});
  EXPECT_TRUE(std::holds_alternative<PingrespPacket>(client->Received().at(0)));
  loop_.AdvanceBy(14'999);
  EXPECT_FALSE(client->closed());
  loop_.AdvanceBy(1);
  EXPECT_TRUE(client->closed());
  EXPECT_EQ(client->Expect<DisconnectPacket>().reason, ReasonCode::kKeepAliveTimeout);
}

TEST_F(ConnectionTest, TakeoverClosesTheFirstConnection_MQTT_3_1_4_2) {
  auto first = Connected("same");
  auto second = Connected("same");
  EXPECT_EQ(first->Expect<DisconnectPacket>().reason, ReasonCode::kSessionTakenOver);
  EXPECT_TRUE(first->closed());
  EXPECT_FALSE(second->closed());
}

TEST_F(ConnectionTest, WillIsPublishedOnNetworkLossButNotAfterDisconnect_MQTT_3_1_2_8) {
  auto watcher = Connected("watcher");
  watcher->Subscribe("will/#", 0);
  watcher->Received();
  for (bool graceful : {true, false}) {
    Client client(*broker_, ProtocolVersion::kV5);
    Will will;
    will.topic = graceful ? "will/graceful" : "will/lost";
    will.payload = "bye";
    client.Connect(graceful ? "g" : "l", true, {}, 0, will);
    client.Received();
    if (graceful) {
      client.Send(DisconnectPacket{});
    } else {
      client.DropNetwork();
    }
  }
  Settle();
  auto delivered = watcher->Expect<PublishPacket>();
  EXPECT_EQ(delivered.topic, "will/lost");
}

TEST_F(ConnectionTest, TopicAliasesResolveAndInvalidAliasDisconnects_MQTT_3_3_2_12) {
  auto subscriber = Connected("sub");
  subscriber->Subscribe("long/topic/name", 0);
  subscriber->Received();
  auto publisher = Connected("pub");
  Properties with_alias;
  with_alias.topic_alias = 1;
  publisher->Publish("long/topic/name", "first", 0, 0, false, with_alias);
  publisher->Publish("", "second", 0, 0, false, with_alias);
  Settle();
  EXPECT_EQ(subscriber->Received().size(), 2u);
  Properties bad;
  bad.topic_alias = 60000;
  publisher->Publish("x", "y", 0, 0, false, bad);
  EXPECT_EQ(publisher->Expect<DisconnectPacket>().reason, ReasonCode::kTopicAliasInvalid);
}

TEST_F(ConnectionTest, WildcardInPublishTopicDisconnects_MQTT_3_3_2_2) {
  auto publisher = Connected("pub");
  publisher->Publish("a/+", "x");
  EXPECT_EQ(publisher->Expect<DisconnectPacket>().reason, ReasonCode::kTopicNameInvalid);
  EXPECT_TRUE(publisher->closed());
}

TEST_F(ConnectionTest, MessageExpiryIsDecrementedOnDelivery_MQTT_3_3_2_6) {
  auto subscriber = std::make_unique<Client>(*broker_, ProtocolVersion::kV5);
  Properties session;
  session.session_expiry_interval = 600;
  subscriber->Connect("sub", false, session);
  subscriber->Subscribe("t", 1);
  subscriber->DropNetwork();
  auto publisher = Connected("pub");
  Properties expiring;
  expiring.message_expiry_interval = 60;
  publisher->Publish("t", "x", 1, 1, false, expiring);
  clock_.Advance(20'000);
  auto resumed = std::make_unique<Client>(*broker_, ProtocolVersion::kV5);
  resumed->Connect("sub", false, session);
  Settle();
  auto packets = resumed->Received();
  ASSERT_EQ(packets.size(), 2u);
  EXPECT_EQ(std::get<PublishPacket>(packets[1]).properties.message_expiry_interval, 40u);
}

TEST_F(ConnectionTest, SubscriptionIdentifiersAndUserPropertiesAreDelivered_MQTT_3_3_4_3) {
  Properties with_id;
  with_id.subscription_identifiers = {42};
  auto subscriber = Connected("sub");
  subscriber->Subscribe("t/#", 1, 1, with_id);
  subscriber->Received();
  auto publisher = Connected("pub");
  Properties user;
  user.user_properties = {{"k", "v1"}, {"k", "v2"}, {"a", "b"}};
  user.content_type = "text/plain";
  publisher->Publish("t/x", "x", 1, 1, false, user);
  Settle();
  auto delivered = subscriber->Expect<PublishPacket>();
  EXPECT_EQ(delivered.properties.subscription_identifiers, std::vector<uint32_t>{42});
  EXPECT_EQ(delivered.properties.user_properties, user.user_properties);
  EXPECT_EQ(delivered.properties.content_type, "text/plain");
}

TEST_F(ConnectionTest, RetainedMessageIsSentAfterSuback_MQTT_3_3_1_6) {
  auto publisher = Connected("pub");
  publisher->Publish("r", "kept", 1, 1, true);
  publisher->Received();
  auto subscriber = Connected("sub");
  subscriber->Subscribe("r", 1);
  Settle();
  auto packets = subscriber->Received();
  ASSERT_EQ(packets.size(), 2u);
  EXPECT_TRUE(std::holds_alternative<SubackPacket>(packets[0]));
  EXPECT_TRUE(std::get<PublishPacket>(packets[1]).retain);
}

TEST_F(ConnectionTest, InvalidFilterGetsFailureCodeInSuback_MQTT_3_8_4_6) {
  auto client = Connected("c", ProtocolVersion::kV311);
  SubscribePacket subscribe;
  subscribe.packet_id = 3;
  subscribe.subscriptions = {{"ok/+", {}}, {"bad/#/x", {}}};
  client->Send(subscribe);
  auto suback = client->Expect<SubackPacket>();
  EXPECT_EQ(suback.reasons, (std::vector<ReasonCode>{ReasonCode::kSuccess, ReasonCode::kUnspecifiedError}));
}

TEST_F(ConnectionTest, UnsubscribeReportsMissingSubscription_MQTT_3_11_3_1) {
  auto client = Connected("c");
  client->Subscribe("t", 0);
  client->Received();
  UnsubscribePacket unsubscribe;
  unsubscribe.packet_id = 4;
  unsubscribe.filters = {"t", "never"};
  client->Send(unsubscribe);
  auto unsuback = client->Expect<UnsubackPacket>();
  EXPECT_EQ(unsuback.reasons,
            (std::vector<ReasonCode>{ReasonCode::kSuccess, ReasonCode::kNoSubscriptionExisted}));
}

TEST_F(ConnectionTest, SessionExpiryAtDisconnectAfterZeroIsAProtocolError_MQTT_3_14_2_2) {
  auto client = Connected("c");
  DisconnectPacket disconnect;
  disconnect.properties.session_expiry_interval = 30;
  client->Send(disconnect);
  EXPECT_EQ(client->Expect<DisconnectPacket>().reason, ReasonCode::kProtocolError);
}

TEST_F(ConnectionTest, MalformedPacketIsAnsweredWith0x81AndClose) {
  auto client = Connected("c");
  client->SendRaw(std::string("\x82\x02\x00\x01", 4));  // SUBSCRIBE without any filter
  EXPECT_TRUE(IsError(client->Expect<DisconnectPacket>().reason));
  EXPECT_TRUE(client->closed());
}

class LimitedConnectionTest : public ConnectionTest {
 protected:
  static core::BrokerLimits Limits() {
    core::BrokerLimits limits;
    limits.max_packet_size = 100;
    return limits;
  }
  LimitedConnectionTest() : ConnectionTest(Limits()) {}
};

TEST_F(LimitedConnectionTest, PacketOverMaximumSizeDisconnects_MQTT_3_2_2_15) {
  auto client = Connected("c");
  client->Publish("t", std::string(200, 'x'));
  EXPECT_EQ(client->Expect<DisconnectPacket>().reason, ReasonCode::kPacketTooLarge);
  EXPECT_TRUE(client->closed());
}

TEST_F(ConnectionTest, MessagesOverTheClientsMaximumPacketSizeAreDropped_MQTT_3_1_2_25) {
  Properties small;
  small.maximum_packet_size = 64;
  auto subscriber = Connected("sub", ProtocolVersion::kV5, true, small);
  subscriber->Subscribe("t", 0);
  subscriber->Received();
  auto publisher = Connected("pub");
  publisher->Publish("t", std::string(100, 'x'));
  publisher->Publish("t", "small");
  Settle();
  EXPECT_EQ(subscriber->Expect<PublishPacket>().payload, "small");
}

TEST_F(ConnectionTest, SlowSubscriberPausesReadingFromItsPublisherInsteadOfDropping) {
  auto subscriber = Connected("slow");
  subscriber->Subscribe("t", 1);
  subscriber->Received();
  subscriber->stream().backlog = 2 * 1024 * 1024;  // its socket is full
  auto publisher = Connected("fast");
  const size_t half = core::SessionLimits{}.max_queued_messages / 2;
  for (uint16_t i = 1; i <= half; ++i) publisher->Publish("t", "m", 1, i);
  EXPECT_FALSE(publisher->stream().reading);
  EXPECT_EQ(metrics_.messages_dropped.load(), 0u);
  subscriber->stream().backlog = 0;  // the subscriber catches up
  subscriber->connection().OnWritable();
  Settle();
  EXPECT_TRUE(publisher->stream().reading);
  EXPECT_EQ(subscriber->Received().size(), half);
}

TEST_F(ConnectionTest, PausedPublisherHoldsUnreadPacketsAndProcessesThemOnResume) {
  auto subscriber = Connected("slow");
  subscriber->Subscribe("t", 1);
  subscriber->Received();
  subscriber->stream().backlog = 2 * 1024 * 1024;
  auto publisher = Connected("fast");
  const size_t total = core::SessionLimits{}.max_queued_messages * 2;
  std::string burst;  // one read's worth of packets, more than the queue holds
  for (size_t i = 1; i <= total; ++i) {
    PublishPacket publish;
    publish.topic = "t";
    publish.payload = "m";
    publish.qos = 1;
    publish.packet_id = static_cast<uint16_t>(i);
    EncodePacket(publish, ProtocolVersion::kV5, burst);
  }
  publisher->SendRaw(burst);
  EXPECT_FALSE(publisher->stream().reading);
  subscriber->stream().backlog = 0;
  for (int round = 0; round < 10 && subscriber->Received().size() < total; ++round) {
    subscriber->connection().OnWritable();
    Settle();
  }
  EXPECT_EQ(metrics_.messages_dropped.load(), 0u);
  EXPECT_EQ(metrics_.messages_out.load(), total);
}

// Issue 21 point 6: --connect-timeout closes a socket that sent no (or
// half a) CONNECT, and reports it once; a connected client is not touched.
TEST_F(ConnectionTest, Issue21ConnectTimeoutClosesAHalfConnectAndReportsIt) {
  int timeouts = 0;
  ConnectionSettings settings;
  settings.connect_timeout_ms = 500;
  settings.connect_timed_out = [&timeouts] { ++timeouts; };
  Client silent(*broker_, ProtocolVersion::kV311, settings);
  silent.SendRaw(std::string("\x10\x20\x00\x04MQ", 6));  // a CONNECT cut short
  Client connected(*broker_, ProtocolVersion::kV311, settings);
  connected.Connect("c1");
  EXPECT_EQ(connected.Expect<ConnackPacket>().reason, ReasonCode::kSuccess);
  loop_.AdvanceBy(499);
  EXPECT_FALSE(silent.closed());
  loop_.AdvanceBy(1);
  EXPECT_TRUE(silent.closed());
  EXPECT_FALSE(connected.closed());
  EXPECT_EQ(timeouts, 1);
}

}  // namespace
}  // namespace estuary::mqtt
