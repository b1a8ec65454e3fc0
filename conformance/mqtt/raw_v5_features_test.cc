// MQTT 5.0 features on the wire: topic aliases both ways, flow control by
// receive maximum, the client's maximum packet size, reason strings,
// message expiry in flight, shared subscription edge cases.
#include <gtest/gtest.h>

#include <map>

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

mqtt::SubscribeOptions Qos(uint8_t qos) {
  mqtt::SubscribeOptions options;
  options.qos = qos;
  return options;
}

// ------------------------------------------------------- topic aliases ----

TEST_F(RawV5, MQTT_3_1_2_26_MQTT_3_3_2_11_ServerAliasesStayWithinTheClientsMaximum) {
  const std::string base = Unique("alias");
  mqtt::Properties properties;
  properties.topic_alias_maximum = 2;
  auto client = Connect(Unique("aliased"), true, properties);
  ASSERT_TRUE(Subscribe(*client, base + "/#", Qos(1)).has_value());
  const std::vector<std::string> topics = {base + "/a", base + "/b", base + "/c",
                                           base + "/a", base + "/b", base + "/c"};
  for (const auto& topic : topics) RawPublish(topic, topic, 1);
  std::map<uint16_t, std::string> aliases;
  int aliased = 0;
  for (const auto& expected : topics) {
    auto publish = ReceivePublish(*client);
    ASSERT_TRUE(publish.has_value());
    std::string topic = publish->topic;
    if (auto alias = publish->properties.topic_alias) {
      EXPECT_GE(*alias, 1);
      EXPECT_LE(*alias, 2) << "alias above the client's Topic Alias Maximum";
      if (topic.empty()) {
        ASSERT_TRUE(aliases.count(*alias)) << "an alias used before it was set";
        topic = aliases[*alias];
        ++aliased;
      } else {
        aliases[*alias] = topic;
      }
    }
    EXPECT_EQ(topic, expected);
    EXPECT_EQ(publish->payload, expected);
  }
  EXPECT_GT(aliased, 0) << "the server never used an alias";
}

TEST_F(RawV5, MQTT_3_1_2_27_NoAliasesWithoutClientMaximum) {
  const std::string topic = Unique("plain/");
  auto client = Subscriber(topic, 1);
  for (int i = 0; i < 3; ++i) RawPublish(topic, "same topic", 1);
  for (int i = 0; i < 3; ++i) {
    auto publish = ReceivePublish(*client);
    ASSERT_TRUE(publish.has_value());
    EXPECT_FALSE(publish->properties.topic_alias.has_value());
    EXPECT_EQ(publish->topic, topic);
  }
}

TEST_F(RawV5, MQTT_3_3_2_7_ServerAliasesDoNotCarryOverToANewConnection) {
  const std::string id = Unique("again");
  const std::string topic = Unique("carry/");
  mqtt::Properties properties;
  properties.topic_alias_maximum = 5;
  properties.session_expiry_interval = 300;
  auto client = Connect(id, false, properties);
  ASSERT_TRUE(Subscribe(*client, topic, Qos(1)).has_value());
  RawPublish(topic, "first", 1);
  auto first = ReceivePublish(*client);
  ASSERT_TRUE(first.has_value());
  client->Close();
  auto again = Connect(id, false, properties);
  RawPublish(topic, "second", 1);
  auto second = ReceivePublish(*again);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->topic, topic) << "the server relied on an alias of the old connection";
}

TEST_F(RawV5, MQTT_3_3_2_12_ServerAcceptsAliasesUpToItsMaximum) {
  auto client = Open();
  auto connack = client->Connect(MakeConnect(Unique("aliaser"), ProtocolVersion::kV5));
  ASSERT_TRUE(connack && connack->properties.topic_alias_maximum);
  const uint16_t maximum = *connack->properties.topic_alias_maximum;
  ASSERT_GT(maximum, 0);
  const std::string topic = Unique("inbound/");
  auto subscriber = Subscriber(topic, 1);
  auto set = MakePublish(topic, "sets the alias", 1, 1);
  set.properties.topic_alias = maximum;
  ASSERT_TRUE(PublishAndAck(*client, set));
  auto use = MakePublish("", "uses the alias", 1, 2);
  use.properties.topic_alias = maximum;
  ASSERT_TRUE(PublishAndAck(*client, use));
  for (const char* payload : {"sets the alias", "uses the alias"}) {
    auto got = ReceivePublish(*subscriber);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->topic, topic);
    EXPECT_EQ(got->payload, payload);
  }
}

TEST_F(RawV5, MQTT_3_2_2_17_MQTT_3_3_2_9_AliasAboveTheServersMaximumIsInvalid) {
  RestartBroker({"--topic-alias-maximum", "3"});
  auto publish = MakePublish("a/b", "x");
  publish.properties.topic_alias = 4;
  ExpectRejected(Encode(publish, ProtocolVersion::kV5), {ReasonCode::kTopicAliasInvalid});
}

TEST_F(RawV5, MQTT_3_3_2_7_ClientAliasesDoNotCarryOverToANewConnection) {
  const std::string id = Unique("forgetful");
  {
    auto client = Connect(id);
    auto set = MakePublish(Unique("t/"), "sets alias 1", 1, 1);
    set.properties.topic_alias = 1;
    ASSERT_TRUE(PublishAndAck(*client, set));
  }
  auto client = Connect(id);
  auto use = MakePublish("", "alias of the old connection", 1, 2);
  use.properties.topic_alias = 1;
  client->Send(use);
  EXPECT_EQ(ExpectDisconnected(*client), ReasonCode::kProtocolError);
}

// -------------------------------------------------------- flow control ----

TEST_F(RawV5, MQTT_3_3_4_9_MQTT_3_3_4_10_MQTT_4_9_0_1_MQTT_4_9_0_2_MQTT_4_9_0_3_ServerHonoursClientReceiveMaximum) {
  RestartBroker({"--shards", "1"});  // everything published is queued before the checks
  const std::string topic = Unique("window/");
  mqtt::Properties properties;
  properties.receive_maximum = 2;
  auto client = Connect(Unique("slow"), true, properties);
  ASSERT_TRUE(Subscribe(*client, topic, Qos(1)).has_value());
  for (int i = 0; i < 5; ++i) RawPublish(topic, std::to_string(i), 1);
  std::vector<uint16_t> unacked;
  for (int i = 0; i < 2; ++i) {
    auto publish = ReceivePublish(*client, seconds(5), false);
    ASSERT_TRUE(publish.has_value());
    EXPECT_EQ(publish->payload, std::to_string(i));
    unacked.push_back(publish->packet_id);
  }
  // Window full: PINGREQ is still answered, no third PUBLISH comes.
  auto held = DrainUntilPong(*client, false);
  ASSERT_TRUE(held.has_value()) << "PINGRESP delayed while the send quota is zero";
  EXPECT_TRUE(held->empty()) << "more QoS 1 messages in flight than Receive Maximum";
  SendAck(*client, PacketType::kPuback, unacked[0]);
  auto third = ReceivePublish(*client, seconds(5), false);
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(third->payload, "2");
  auto still_held = DrainUntilPong(*client, false);
  ASSERT_TRUE(still_held.has_value());
  EXPECT_TRUE(still_held->empty());
  SendAck(*client, PacketType::kPuback, unacked[1]);
  SendAck(*client, PacketType::kPuback, third->packet_id);
  for (const char* payload : {"3", "4"}) {
    auto rest = ReceivePublish(*client);
    ASSERT_TRUE(rest.has_value());
    EXPECT_EQ(rest->payload, payload);
  }
}

TEST_F(RawV5, MQTT_3_1_2_24_MQTT_3_1_2_25_PacketsOverTheClientsMaximumAreDroppedAsSent) {
  const std::string topic = Unique("big/");
  mqtt::Properties properties;
  properties.maximum_packet_size = 200;
  properties.receive_maximum = 1;  // a big message stuck in flight would block the rest
  auto client = Connect(Unique("small"), true, properties);
  ASSERT_TRUE(Subscribe(*client, topic, Qos(1)).has_value());
  RawPublish(topic, std::string(500, 'x'), 1);
  RawPublish(topic, "small one", 1);
  RawPublish(topic, "small two", 1);
  for (const char* payload : {"small one", "small two"}) {
    auto got = ReceivePublish(*client);
    ASSERT_TRUE(got.has_value()) << "the dropped packet kept its place in the window";
    EXPECT_EQ(got->payload, payload);
    EXPECT_LE(mqtt::EncodedSize(*got, ProtocolVersion::kV5), 200u);
  }
}

// ------------------------------------------------------- reason strings ----

TEST_F(RawV5, MQTT_3_1_2_24_ConnackFitsTheClientsMaximumPacketSize) {
  auto client = Open();
  auto connect = MakeConnect(Unique("tiny"), ProtocolVersion::kV5);
  connect.properties.maximum_packet_size = 16;
  auto connack = client->Connect(connect);
  ASSERT_TRUE(connack.has_value());
  EXPECT_LE(mqtt::EncodedSize(*connack, ProtocolVersion::kV5), 16u)
      << "the CONNACK is larger than the client's Maximum Packet Size";
}

TEST_F(RawV5, MQTT_3_2_2_19_RefusingConnackFitsTheClientsMaximumPacketSize) {
  auto client = Open();
  auto connect = MakeConnect(Unique("tiny"), ProtocolVersion::kV5);
  connect.properties.maximum_packet_size = 16;
  connect.properties.authentication_method = "unknown";
  auto connack = client->Connect(connect);
  ASSERT_TRUE(connack.has_value());
  EXPECT_EQ(connack->reason, ReasonCode::kBadAuthenticationMethod);
  EXPECT_LE(mqtt::EncodedSize(*connack, ProtocolVersion::kV5), 16u)
      << "Reason String '" << connack->properties.reason_string.value_or("") << "' overflows the client's maximum";
}

TEST_F(RawV5, MQTT_3_14_2_3_DisconnectFitsTheClientsMaximumPacketSize) {
  mqtt::Properties properties;
  properties.maximum_packet_size = 16;
  auto client = Connect(Unique("tiny"), true, properties);
  client->Send(MakePublish("bad/#", "wildcard"));
  auto packet = client->Receive();
  ASSERT_TRUE(packet.has_value());
  auto* disconnect = std::get_if<mqtt::DisconnectPacket>(&*packet);
  ASSERT_NE(disconnect, nullptr);
  EXPECT_EQ(disconnect->reason, ReasonCode::kTopicNameInvalid);
  EXPECT_LE(mqtt::EncodedSize(*disconnect, ProtocolVersion::kV5), 16u)
      << "Reason String '" << disconnect->properties.reason_string.value_or("")
      << "' overflows the client's maximum";
}

TEST_F(RawV5, MQTT_3_2_2_20_MQTT_3_14_2_4_NoUserPropertiesOnConnackOrDisconnect) {
  auto client = Open();
  auto connect = MakeConnect(Unique("bare"), ProtocolVersion::kV5);
  connect.properties.maximum_packet_size = 64;
  auto connack = client->Connect(connect);
  ASSERT_TRUE(connack.has_value());
  EXPECT_TRUE(connack->properties.user_properties.empty());
  client->Send(MakePublish("bad/+", "wildcard"));
  auto packet = client->Receive();
  ASSERT_TRUE(packet.has_value());
  auto* disconnect = std::get_if<mqtt::DisconnectPacket>(&*packet);
  ASSERT_NE(disconnect, nullptr);
  EXPECT_TRUE(disconnect->properties.user_properties.empty());
}

// The acknowledgements the server sends carry no Reason String or User
// Property, so none can overflow the client's maximum or break a request
// for no problem information.
void CheckAcksCarryNoReasonStrings(BrokerFixture& fixture, RawClient& client) {
  // A QoS 2 delivery to the client, for the server's PUBREL; small enough
  // for a 16-byte maximum (each test has a broker of its own).
  const std::string topic = "p/q";
  ASSERT_TRUE(Subscribe(client, topic, Qos(2)).has_value());
  fixture.RawPublish(topic, "x", 2);
  auto delivery = ReceivePublish(client, seconds(5), false);
  ASSERT_TRUE(delivery.has_value());
  SendAck(client, PacketType::kPubrec, delivery->packet_id);
  auto pubrel = client.ReceiveAs<AckPacket>();
  ASSERT_TRUE(pubrel && pubrel->type == PacketType::kPubrel);
  EXPECT_FALSE(pubrel->properties.reason_string.has_value());
  EXPECT_TRUE(pubrel->properties.user_properties.empty());
  SendAck(client, PacketType::kPubcomp, delivery->packet_id);

  auto bad = MakePublish("other", "\xff", 1, 1);
  bad.properties.payload_format_indicator = 1;
  client.Send(bad);  // PUBACK 0x99
  bad.qos = 2;
  bad.packet_id = 2;
  client.Send(bad);  // PUBREC 0x99
  SendAck(client, PacketType::kPubrel, 999);  // PUBCOMP 0x92
  mqtt::SubscribePacket subscribe;
  subscribe.packet_id = 3;
  subscribe.subscriptions = {{"a/#/b", {1, false, false, 0}}};  // SUBACK 0x8F
  client.Send(subscribe);
  mqtt::UnsubscribePacket unsubscribe;
  unsubscribe.packet_id = 4;
  unsubscribe.filters = {"never/subscribed"};  // UNSUBACK 0x11
  client.Send(unsubscribe);
  for (int i = 0; i < 5; ++i) {
    auto packet = client.Receive();
    ASSERT_TRUE(packet.has_value()) << "answer " << i;
    std::visit(
        [](const auto& p) {
          if constexpr (requires { p.properties; }) {
            EXPECT_FALSE(p.properties.reason_string.has_value()) << mqtt::ToString(mqtt::TypeOf(mqtt::Packet(p)));
            EXPECT_TRUE(p.properties.user_properties.empty());
          }
        },
        *packet);
  }
}

TEST_F(RawV5, MQTT_3_4_2_2_MQTT_3_4_2_3_MQTT_3_5_2_2_MQTT_3_5_2_3_MQTT_3_6_2_2_MQTT_3_6_2_3_MQTT_3_7_2_2_MQTT_3_7_2_3_MQTT_3_9_2_1_MQTT_3_9_2_2_MQTT_3_11_2_1_MQTT_3_11_2_2_AcksFitTheClientsMaximumPacketSize) {
  mqtt::Properties properties;
  properties.maximum_packet_size = 16;
  auto client = Connect(Unique("tiny"), true, properties);
  CheckAcksCarryNoReasonStrings(*this, *client);
}

TEST_F(RawV5, MQTT_3_1_2_29_NoReasonStringsWhenProblemInformationIsOff) {
  mqtt::Properties properties;
  properties.request_problem_information = 0;
  auto client = Connect(Unique("terse"), true, properties);
  CheckAcksCarryNoReasonStrings(*this, *client);
}

TEST_F(RawV5, MQTT_3_14_2_1_MQTT_3_14_2_2_MQTT_3_14_4_1_MQTT_3_14_4_2_ServerDisconnectEndsTheConnection) {
  auto client = Connect(Unique("twice"));
  client->Send(MakeConnect(Unique("twice"), ProtocolVersion::kV5));
  auto packet = client->Receive();
  ASSERT_TRUE(packet.has_value());
  auto* disconnect = std::get_if<mqtt::DisconnectPacket>(&*packet);
  ASSERT_NE(disconnect, nullptr);
  EXPECT_TRUE(mqtt::IsValidDisconnectReason(disconnect->reason));
  EXPECT_FALSE(disconnect->properties.session_expiry_interval.has_value());
  client->Send(mqtt::PingreqPacket{});
  EXPECT_FALSE(client->Receive().has_value()) << "a packet came after the server's DISCONNECT";
  EXPECT_TRUE(client->WaitClosed());
}

// ----------------------------------------------------- expiry in flight ----

TEST_F(RawV5, MQTT_4_3_3_7_SentQos2MessageIsNotExpired) {
  const std::string id = Unique("slow");
  const std::string topic = Unique("inflight/");
  mqtt::Properties session;
  session.session_expiry_interval = 300;
  auto client = Connect(id, false, session);
  ASSERT_TRUE(Subscribe(*client, topic, Qos(2)).has_value());
  mqtt::Properties expiring;
  expiring.message_expiry_interval = 1;
  RawPublish(topic, "sent before it expired", 2, false, expiring);
  auto first = ReceivePublish(*client, seconds(5), false);
  ASSERT_TRUE(first.has_value());
  client->Close();  // no PUBREC
  WaitBrokerSeconds(2);
  auto again = Connect(id, false, session);
  auto resent = ReceivePublish(*again, seconds(3), false);
  ASSERT_TRUE(resent.has_value()) << "the server expired a QoS 2 message it had already sent";
  EXPECT_TRUE(resent->dup);
  EXPECT_EQ(resent->packet_id, first->packet_id);
}

TEST_F(RawV5, MQTT_4_3_3_13_Qos2ExchangeCompletesAfterExpiry) {
  auto client = Connect(Unique("pub"));
  auto publish = MakePublish(Unique("expiring/"), "short lived", 2, 7);
  publish.properties.message_expiry_interval = 1;
  client->Send(publish);
  auto pubrec = client->ReceiveAs<AckPacket>();
  ASSERT_TRUE(pubrec && pubrec->type == PacketType::kPubrec);
  WaitBrokerSeconds(2);
  SendAck(*client, PacketType::kPubrel, 7);
  auto pubcomp = client->ReceiveAs<AckPacket>();
  ASSERT_TRUE(pubcomp.has_value());
  EXPECT_EQ(pubcomp->type, PacketType::kPubcomp);
  EXPECT_EQ(pubcomp->reason, ReasonCode::kSuccess);
}

// --------------------------------------------------- shared subscriptions ----

TEST_F(RawV5, MQTT_4_8_2_1_MQTT_4_8_2_2_InvalidShareNamesRefused) {
  auto client = Connect(Unique("sharer"));
  mqtt::SubscribePacket subscribe;
  subscribe.packet_id = 1;
  for (const char* filter : {"$share/g", "$share//t", "$share/g+/t", "$share/g#/t", "$share/", "$share/g/t"}) {
    subscribe.subscriptions.push_back({filter, {1, false, false, 0}});
  }
  client->Send(subscribe);
  auto suback = client->ReceiveAs<mqtt::SubackPacket>();
  ASSERT_TRUE(suback.has_value());
  const std::vector<ReasonCode> expected = {
      ReasonCode::kTopicFilterInvalid, ReasonCode::kTopicFilterInvalid, ReasonCode::kTopicFilterInvalid,
      ReasonCode::kTopicFilterInvalid, ReasonCode::kTopicFilterInvalid, ReasonCode::kGrantedQos1};
  EXPECT_EQ(suback->reasons, expected);
}

class SharedV5 : public RawV5 {
 protected:
  std::vector<std::string> SuiteFlags() const override { return {"--shards", "1"}; }
};

TEST_F(SharedV5, MQTT_4_8_2_4_UnfinishedSharedDeliveryCompletedOnReconnect) {
  const std::string id = Unique("member-a");
  const std::string filter = "$share/g/" + Unique("work/");
  const std::string topic = filter.substr(std::string("$share/g/").size());
  mqtt::Properties session;
  session.session_expiry_interval = 300;
  auto a = Connect(id, false, session);
  ASSERT_TRUE(Subscribe(*a, filter, Qos(1)).has_value());
  RawPublish(topic, "job 1", 1);
  auto job = ReceivePublish(*a, seconds(5), false);
  ASSERT_TRUE(job.has_value());
  a->Close();
  auto b = Connect(Unique("member-b"));
  ASSERT_TRUE(Subscribe(*b, filter, Qos(1)).has_value());
  auto again = Connect(id, false, session);
  auto resent = ReceivePublish(*again);
  ASSERT_TRUE(resent.has_value()) << "the unfinished delivery was not completed";
  EXPECT_EQ(resent->payload, "job 1");
  auto b_got = DrainUntilPong(*b);
  ASSERT_TRUE(b_got.has_value());
  EXPECT_TRUE(b_got->empty()) << "the message went to a second member too";
}

TEST_F(SharedV5, MQTT_4_8_2_5_MessageOfAnEndedSessionIsNotPassedOn) {
  const std::string filter = "$share/g/" + Unique("work/");
  const std::string topic = filter.substr(std::string("$share/g/").size());
  auto a = Connect(Unique("member-a"));  // session ends with the connection
  ASSERT_TRUE(Subscribe(*a, filter, Qos(1)).has_value());
  RawPublish(topic, "job 1", 1);
  ASSERT_TRUE(ReceivePublish(*a, seconds(5), false).has_value());
  DisconnectAndWait(*a);  // its session (expiry 0) ends here
  auto b = Connect(Unique("member-b"));
  ASSERT_TRUE(Subscribe(*b, filter, Qos(1)).has_value());
  RawPublish(topic, "job 2", 1);
  auto first = ReceivePublish(*b);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->payload, "job 2") << "the ended session's message went to another member";
}

TEST_F(SharedV5, MQTT_4_8_2_6_RefusedSharedMessageIsNotPassedOn) {
  const std::string filter = "$share/g/" + Unique("work/");
  const std::string topic = filter.substr(std::string("$share/g/").size());
  auto a = Connect(Unique("member-a"));
  ASSERT_TRUE(Subscribe(*a, filter, Qos(1)).has_value());
  RawPublish(topic, "job 1", 1);
  auto job = ReceivePublish(*a, seconds(5), false);
  ASSERT_TRUE(job.has_value());
  auto b = Connect(Unique("member-b"));
  ASSERT_TRUE(Subscribe(*b, filter, Qos(1)).has_value());
  SendAck(*a, PacketType::kPuback, job->packet_id, ReasonCode::kUnspecifiedError);
  mqtt::UnsubscribePacket unsubscribe;
  unsubscribe.packet_id = 5;
  unsubscribe.filters = {filter};
  a->Send(unsubscribe);
  ASSERT_TRUE(a->ReceiveAs<mqtt::UnsubackPacket>().has_value());
  RawPublish(topic, "job 2", 1);
  auto first = ReceivePublish(*b);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->payload, "job 2") << "a refused message was sent to another member";
}

}  // namespace
}  // namespace estuary::conformance
