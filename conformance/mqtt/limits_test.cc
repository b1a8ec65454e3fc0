// estuaryd's configurable limits, each enforced and advertised as the
// protocol asks: connections per node, packet size, queued messages and
// bytes per session, receive maximum, maximum QoS, retain availability.
#include <gtest/gtest.h>

#include <functional>

#include "conformance/mqtt/raw_fixture.h"

namespace estuary::conformance {
namespace {

using mqtt::AckPacket;
using mqtt::PacketType;

class LimitsV5 : public RawV5 {};
class LimitsV311 : public RawV311 {};

mqtt::SubscribeOptions Qos(uint8_t qos) {
  mqtt::SubscribeOptions options;
  options.qos = qos;
  return options;
}

// Opens connections until one is accepted (the server counts a closed one
// off only once it has seen the close); each try waits for the server.
std::unique_ptr<RawClient> ConnectOnceCountedOff(const std::function<std::unique_ptr<RawClient>()>& open,
                                                 ProtocolVersion version) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto client = open();
    auto connack = client->Connect(MakeConnect("", version, true));
    if (connack && connack->reason == ReasonCode::kSuccess) return client;
  }
  return nullptr;
}

TEST_F(LimitsV5, MaxConnectionsRefusesTheNextWithQuotaExceeded) {
  RestartBroker({"--max-connections", "2"});
  auto first = Connect(Unique("one"));
  auto second = Connect(Unique("two"));
  auto third = Open();
  auto refused = third->Connect(MakeConnect(Unique("three"), ProtocolVersion::kV5));
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->reason, ReasonCode::kQuotaExceeded);
  EXPECT_FALSE(refused->session_present);
  EXPECT_TRUE(third->WaitClosed());
  third->Close();  // the server counts a connection until both sides closed it
  // The first two still work, and a freed place can be taken again.
  first->Send(mqtt::PingreqPacket{});
  EXPECT_TRUE(first->ReceiveAs<mqtt::PingrespPacket>().has_value());
  second->Close();
  EXPECT_NE(ConnectOnceCountedOff([&] { return Open(); }, ProtocolVersion::kV5), nullptr)
      << "a closed connection was never counted off";
}

TEST_F(LimitsV311, MaxConnectionsRefusesTheNextWithServerUnavailable) {
  RestartBroker({"--max-connections", "2"});
  auto first = Connect(Unique("one"));
  auto second = Connect(Unique("two"));
  auto third = Open();
  auto refused = third->Connect(MakeConnect(Unique("three"), ProtocolVersion::kV311));
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->reason, ReasonCode::kServerUnavailable);  // return code 3
  EXPECT_TRUE(third->WaitClosed());
}

TEST_F(LimitsV5, MQTT_3_2_2_15_PacketOverTheServersMaximumGetsDisconnect0x95) {
  RestartBroker({"--max-packet-size", "1024"});
  auto client = Open();
  auto connack = client->Connect(MakeConnect(Unique("big"), ProtocolVersion::kV5));
  ASSERT_TRUE(connack.has_value());
  EXPECT_EQ(connack->properties.maximum_packet_size, 1024u);
  const std::string topic = Unique("size/");
  auto fits = MakePublish(topic, std::string(900, 'x'), 1, 1);
  ASSERT_LE(mqtt::EncodedSize(fits, ProtocolVersion::kV5), 1024u);
  EXPECT_TRUE(PublishAndAck(*client, fits)) << "a packet within the limit was refused";
  client->Send(MakePublish(topic, std::string(2000, 'x'), 1, 2));
  EXPECT_EQ(ExpectDisconnected(*client), ReasonCode::kPacketTooLarge);
  ExpectBrokerServes();
}

TEST_F(LimitsV311, PacketOverTheServersMaximumCloses) {
  RestartBroker({"--max-packet-size", "1024"});
  auto client = Connect(Unique("big"));
  client->Send(MakePublish(Unique("size/"), std::string(2000, 'x'), 1, 2));
  EXPECT_FALSE(ExpectDisconnected(*client).has_value());
  ExpectBrokerServes();
}

// An offline persistent session keeps the first messages that fit and
// drops the rest; the marker, published after the reconnect, shows where
// the queue ended.
void ExpectOfflineQueueKeepsFirst(const std::vector<std::string>& payloads, size_t kept,
                                  const std::function<void(const std::string&, const std::string&)>& publish,
                                  const std::function<std::unique_ptr<RawClient>(const std::string&)>& connect) {
  const std::string id = BrokerFixture::Unique("offline");
  const std::string topic = BrokerFixture::Unique("queued/");
  {
    auto client = connect(id);
    ASSERT_TRUE(Subscribe(*client, topic, Qos(1)).has_value());
    DisconnectAndWait(*client);  // offline for certain before the publishing starts
  }
  for (const auto& payload : payloads) publish(topic, payload);
  auto client = connect(id);
  publish(topic, "marker");
  std::vector<std::string> got;
  for (;;) {
    auto message = ReceivePublish(*client);
    ASSERT_TRUE(message.has_value()) << "the marker never came";
    if (message->payload == "marker") break;
    got.push_back(message->payload.substr(0, 8));  // short enough to print
  }
  std::vector<std::string> expected;
  for (size_t i = 0; i < kept; ++i) expected.push_back(payloads[i].substr(0, 8));
  EXPECT_EQ(got, expected);
}

TEST_F(LimitsV5, MaxQueuedMessagesKeepsTheFirstN) {
  RestartBroker({"--max-queued-messages", "3"});
  mqtt::Properties session;
  session.session_expiry_interval = 300;
  ExpectOfflineQueueKeepsFirst(
      {"1", "2", "3", "4", "5", "6"}, 3,
      [&](const std::string& topic, const std::string& payload) { RawPublish(topic, payload, 1); },
      [&](const std::string& id) { return Connect(id, false, session); });
}

TEST_F(LimitsV311, MaxQueuedMessagesKeepsTheFirstN) {
  RestartBroker({"--max-queued-messages", "2"});
  ExpectOfflineQueueKeepsFirst(
      {"1", "2", "3", "4"}, 2,
      [&](const std::string& topic, const std::string& payload) { RawPublish(topic, payload, 1); },
      [&](const std::string& id) { return Connect(id, false); });
}

TEST_F(LimitsV5, MaxQueuedBytesKeepsWhatFits) {
  // Each message costs its 10000-byte payload plus some bookkeeping.
  RestartBroker({"--max-queued-bytes", "35000"});
  mqtt::Properties session;
  session.session_expiry_interval = 300;
  std::vector<std::string> payloads;
  for (char c : std::string("abcde")) payloads.push_back(std::string(10000, c));
  ExpectOfflineQueueKeepsFirst(
      payloads, 3,
      [&](const std::string& topic, const std::string& payload) { RawPublish(topic, payload, 1); },
      [&](const std::string& id) { return Connect(id, false, session); });
}

TEST_F(LimitsV5, QueueQos0OfflineKeepsQos0ForOfflineSessions) {
  RestartBroker({"--queue-qos0-offline", "true"});
  const std::string id = Unique("offline");
  const std::string topic = Unique("qos0/");
  mqtt::Properties session;
  session.session_expiry_interval = 300;
  {
    auto client = Connect(id, false, session);
    ASSERT_TRUE(Subscribe(*client, topic, Qos(1)).has_value());
    DisconnectAndWait(*client);
  }
  RawPublish(topic, "at most once", 0);
  auto client = Connect(id, false, session);
  auto message = ReceivePublish(*client);
  ASSERT_TRUE(message.has_value()) << "the QoS 0 message was not kept for the offline session";
  EXPECT_EQ(message->qos, 0);
}

TEST_F(LimitsV5, MQTT_3_3_4_7_ReceiveMaximumExceededGetsDisconnect0x93) {
  RestartBroker({"--receive-maximum", "2"});
  auto client = Open();
  auto connack = client->Connect(MakeConnect(Unique("eager"), ProtocolVersion::kV5));
  ASSERT_TRUE(connack.has_value());
  EXPECT_EQ(connack->properties.receive_maximum, 2);
  const std::string topic = Unique("flood/");
  for (uint16_t id = 1; id <= 2; ++id) {
    client->Send(MakePublish(topic, "unreleased", 2, id));
    auto pubrec = client->ReceiveAs<AckPacket>();
    ASSERT_TRUE(pubrec && pubrec->type == PacketType::kPubrec);
  }
  client->Send(MakePublish(topic, "one too many", 2, 3));
  EXPECT_EQ(ExpectDisconnected(*client), ReasonCode::kReceiveMaximumExceeded);
  ExpectBrokerServes();
}

TEST_F(LimitsV5, MQTT_3_2_2_9_MQTT_3_2_2_10_MaximumQosAdvertisedSubscriptionsStillAccepted) {
  RestartBroker({"--maximum-qos", "1"});
  auto client = Open();
  auto connack = client->Connect(MakeConnect(Unique("modest"), ProtocolVersion::kV5));
  ASSERT_TRUE(connack.has_value());
  EXPECT_EQ(connack->properties.maximum_qos, 1);
  auto suback = Subscribe(*client, Unique("q/"), Qos(2));
  ASSERT_TRUE(suback.has_value());
  EXPECT_EQ(suback->reasons, std::vector<ReasonCode>{ReasonCode::kGrantedQos1});
}

TEST_F(LimitsV5, MQTT_3_2_2_11_PublishAboveMaximumQosGetsDisconnect0x9B) {
  RestartBroker({"--maximum-qos", "1"});
  ExpectRejected(Encode(MakePublish(Unique("q/"), "too much", 2, 1), ProtocolVersion::kV5),
                 {ReasonCode::kQosNotSupported});
}

TEST_F(LimitsV311, PublishAboveMaximumQosCloses) {
  RestartBroker({"--maximum-qos", "1"});
  ExpectRejected(Encode(MakePublish(Unique("q/"), "too much", 2, 1), ProtocolVersion::kV311), {});
}

TEST_F(LimitsV5, MQTT_3_2_2_12_MQTT_3_1_4_2_WillQosAboveMaximumRefused0x9B) {
  RestartBroker({"--maximum-qos", "0"});
  auto connect = MakeConnect(Unique("willing"), ProtocolVersion::kV5);
  connect.will = mqtt::Will{"w/t", "bye", 1, false, {}};
  ExpectConnectRefused(Encode(connect, ProtocolVersion::kV5), ReasonCode::kQosNotSupported);
}

TEST_F(LimitsV5, MQTT_3_2_2_14_RetainUnavailableAdvertisedAndRetainedPublishRefused0x9A) {
  RestartBroker({"--retain-available", "false"});
  auto client = Open();
  auto connack = client->Connect(MakeConnect(Unique("keeper"), ProtocolVersion::kV5));
  ASSERT_TRUE(connack.has_value());
  EXPECT_EQ(connack->properties.retain_available, 0);
  client->Send(MakePublish(Unique("r/"), "keep me", 1, 1, true));
  EXPECT_EQ(ExpectDisconnected(*client), ReasonCode::kRetainNotSupported);
  ExpectBrokerServes();
}

TEST_F(LimitsV5, MQTT_3_2_2_13_RetainedWillRefusedWhenRetainUnavailable) {
  RestartBroker({"--retain-available", "false"});
  auto connect = MakeConnect(Unique("willing"), ProtocolVersion::kV5);
  connect.will = mqtt::Will{"w/t", "bye", 0, true, {}};
  ExpectConnectRefused(Encode(connect, ProtocolVersion::kV5), ReasonCode::kRetainNotSupported);
}

}  // namespace
}  // namespace estuary::conformance
