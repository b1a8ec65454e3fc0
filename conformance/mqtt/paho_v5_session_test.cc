// MQTT 5.0 with Eclipse Paho MQTT C++: CONNECT/CONNACK, sessions and their
// expiry, wills and will delay, keep alive, takeover, $SYS.
#include <gtest/gtest.h>

#include <map>

#include "conformance/mqtt/paho_fixture.h"

namespace estuary::conformance {
namespace {

using paho::property;
using Clock = std::chrono::steady_clock;

PahoClient::ConnectOptions WithExpiry(uint32_t seconds, bool clean = false) {
  PahoClient::ConnectOptions options;
  options.clean = clean;
  options.properties = Props({property(property::SESSION_EXPIRY_INTERVAL, static_cast<int32_t>(seconds))});
  return options;
}

template <typename T>
std::optional<T> Get(const paho::properties& properties, property::code code) {
  if (!properties.contains(code)) return std::nullopt;
  return paho::get<T>(properties, code, 0);
}

TEST_F(PahoV5, MQTT_3_1_4_5_MQTT_3_2_0_1_MQTT_3_2_2_2_MQTT_4_12_0_6_ConnackAcceptsAndAdvertises) {
  auto client = Client(Unique("hello"));
  const auto connack = client->Connect();
  EXPECT_FALSE(connack.is_session_present());
  EXPECT_EQ(connack.get_mqtt_version(), MQTTVERSION_5);
  const auto& p = connack.get_properties();
  EXPECT_EQ(Get<uint16_t>(p, property::RECEIVE_MAXIMUM), 1024);
  EXPECT_TRUE(p.contains(property::MAXIMUM_PACKET_SIZE));
  EXPECT_TRUE(p.contains(property::TOPIC_ALIAS_MAXIMUM));
  EXPECT_FALSE(p.contains(property::MAXIMUM_QOS)) << "QoS 2 is supported: no Maximum QoS";
  EXPECT_FALSE(p.contains(property::AUTHENTICATION_METHOD));
  EXPECT_FALSE(p.contains(property::ASSIGNED_CLIENT_IDENTIFER)) << "the client chose its id";
}

TEST_F(PahoV5, MQTT_3_1_2_28_NoResponseInformationUnlessRequested) {
  auto client = Client(Unique("quiet"));
  EXPECT_FALSE(client->Connect().get_properties().contains(property::RESPONSE_INFORMATION));
}

TEST_F(PahoV5, MQTT_3_1_3_6_MQTT_3_1_3_7_MQTT_3_2_2_16_EmptyClientIdGetsAssignedIdentifier) {
  auto first = Client("");
  auto second = Client("");
  auto first_token = first->StartConnect({});
  auto second_token = second->StartConnect({});
  const auto first_id = Get<std::string>(PahoClient::FinishConnect(first_token).get_properties(),
                                         property::ASSIGNED_CLIENT_IDENTIFER);
  const auto second_id = Get<std::string>(PahoClient::FinishConnect(second_token).get_properties(),
                                          property::ASSIGNED_CLIENT_IDENTIFER);
  ASSERT_TRUE(first_id && second_id);
  EXPECT_FALSE(first_id->empty());
  EXPECT_NE(*first_id, *second_id);
}

TEST_F(PahoV5, MQTT_3_1_2_4_MQTT_3_1_4_4_CleanStartDiscardsTheSession) {
  const std::string id = Unique("restart");
  const std::string topic = Unique("old/");
  const std::string marker = Unique("marker/");
  {
    auto client = Client(id);
    client->Connect(WithExpiry(60));
    client->Subscribe(topic, 1);
    client->Disconnect();
  }
  auto client = Client(id);
  EXPECT_FALSE(client->Connect(WithExpiry(60, true)).is_session_present());
  client->Subscribe(marker, 1);
  RawPublish(topic, "to the discarded subscription", 1);
  RawPublish(marker, "marker", 1);
  auto first = client->Next();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->get_topic(), marker);
}

TEST_F(PahoV5, MQTT_3_1_2_5_MQTT_3_1_2_23_MQTT_3_1_3_2_MQTT_3_2_2_3_MQTT_4_5_0_1_SessionResumesWithQueuedMessages) {
  const std::string id = Unique("resume");
  const std::string topic = Unique("queued/");
  {
    auto client = Client(id);
    EXPECT_FALSE(client->Connect(WithExpiry(60)).is_session_present());
    client->Subscribe(topic, 2);
    client->Disconnect();
  }
  TakeOffline(id, mqtt::ProtocolVersion::kV5, 60);
  RawPublish(topic, "one", 1);
  RawPublish(topic, "two", 2);
  auto client = Client(id);
  EXPECT_TRUE(client->Connect(WithExpiry(60)).is_session_present());
  auto messages = client->Take(2);
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[0]->get_payload_str(), "one");
  EXPECT_EQ(messages[1]->get_payload_str(), "two");
  EXPECT_EQ(messages[1]->get_qos(), 2);
}

TEST_F(PahoV5, MQTT_3_1_2_6_CleanStartZeroWithoutSessionCreatesOne) {
  const std::string id = Unique("fresh");
  {
    auto client = Client(id);
    EXPECT_FALSE(client->Connect(WithExpiry(60)).is_session_present());
    client->Disconnect();
  }
  auto client = Client(id);
  EXPECT_TRUE(client->Connect(WithExpiry(60)).is_session_present()) << "the new session was not kept";
}

TEST_F(PahoV5, MQTT_3_1_2_23_ZeroExpiryEndsTheSessionWithTheConnection) {
  const std::string id = Unique("brief");
  {
    // Clean start 0 without a Session Expiry Interval: 0. A raw client, so
    // that the server has surely seen the DISCONNECT before Paho comes.
    auto raw = ConnectRaw(id, mqtt::ProtocolVersion::kV5, false);
    DisconnectAndWait(*raw);
  }
  auto client = Client(id);
  EXPECT_FALSE(client->Connect(WithExpiry(60)).is_session_present());
}

// Paho sends every DISCONNECT with reason 0x00 (its 1.2 disconnect options
// never reach the wire), so these wills are set off by failing the network
// under the client: it connects through a TcpRelay the test cuts.

TEST_F(PahoV5, MQTT_4_1_0_2_MQTT_3_1_2_8_SessionExpiresAndItsWillIsPublished) {
  const std::string id = Unique("expiring");
  const std::string will_topic = Unique("will/");
  auto watcher = SubscribeRaw(Unique("watch"), will_topic, 1);
  auto relay = Relay();
  {
    auto client = ClientVia(*relay, id);
    auto options = WithExpiry(1);
    // A will delay longer than the session: the will goes when the session ends.
    options.will = paho::will_options(will_topic, std::string("session over"), 1, false,
                                      Props({property(property::WILL_DELAY_INTERVAL, 600)}));
    client->Connect(options);
    relay->Cut();
    EXPECT_TRUE(client->WaitDisconnected());
  }
  auto will = ReceivePublish(*watcher, seconds(10));
  ASSERT_TRUE(will.has_value()) << "the session did not end after its 1 s expiry";
  EXPECT_EQ(will->payload, "session over");
  auto client = Client(id);
  EXPECT_FALSE(client->Connect(WithExpiry(60)).is_session_present()) << "the expired session was resumed";
}

TEST_F(PahoV5, MQTT_3_1_2_7_MQTT_3_1_2_14_MQTT_3_1_3_10_WillWithUserPropertiesInOrder) {
  const std::string will_topic = Unique("will/");
  auto watcher = SubscribeRaw(Unique("watch"), will_topic, 1);
  auto relay = Relay();
  auto client = ClientVia(*relay, Unique("leaving"));
  PahoClient::ConnectOptions options;
  options.will = paho::will_options(will_topic, std::string("gone"), 1, false,
                                    Props({property(property::USER_PROPERTY, "b", "2"),
                                           property(property::USER_PROPERTY, "a", "1"),
                                           property(property::USER_PROPERTY, "b", "3"),
                                           property(property::CONTENT_TYPE, "text/plain")}));
  client->Connect(options);
  relay->Cut();
  auto will = ReceivePublish(*watcher);
  ASSERT_TRUE(will.has_value()) << "no will after the network failed";
  EXPECT_EQ(will->payload, "gone");
  EXPECT_FALSE(will->retain);
  const std::vector<std::pair<std::string, std::string>> expected = {{"b", "2"}, {"a", "1"}, {"b", "3"}};
  EXPECT_EQ(will->properties.user_properties, expected);
  EXPECT_EQ(will->properties.content_type, "text/plain");
}

TEST_F(PahoV5, MQTT_3_1_2_15_RetainedWillIsRetained) {
  RestartBroker({"--shards", "1"});  // the later subscriber sees what the watcher saw
  const std::string will_topic = Unique("will/");
  auto watcher = SubscribeRaw(Unique("watch"), will_topic, 1);
  auto relay = Relay();
  auto client = ClientVia(*relay, Unique("leaving"));
  PahoClient::ConnectOptions options;
  options.will = paho::will_options(will_topic, std::string("last words"), 1, true);
  client->Connect(options);
  relay->Cut();
  ASSERT_TRUE(ReceivePublish(*watcher).has_value()) << "no will";
  // Published retained: a subscriber that comes later still gets it.
  auto later = SubscribeRaw(Unique("later"), will_topic, 1);
  auto will = ReceivePublish(*later);
  ASSERT_TRUE(will.has_value()) << "the will was not retained";
  EXPECT_TRUE(will->retain);
  EXPECT_EQ(will->payload, "last words");
}

TEST_F(PahoV5, MQTT_3_1_2_8_WillWaitsForTheWillDelay) {
  const std::string will_topic = Unique("will/");
  auto watcher = SubscribeRaw(Unique("watch"), will_topic, 1);
  auto relay = Relay();
  auto client = ClientVia(*relay, Unique("delayed"));
  auto options = WithExpiry(60);
  options.will = paho::will_options(will_topic, std::string("late"), 1, false,
                                    Props({property(property::WILL_DELAY_INTERVAL, 1)}));
  client->Connect(options);
  const auto cut_at = Clock::now();
  relay->Cut();
  auto will = ReceivePublish(*watcher, seconds(10));
  ASSERT_TRUE(will.has_value());
  EXPECT_GE(Clock::now() - cut_at, milliseconds(900)) << "the will came before its 1 s delay";
}

TEST_F(PahoV5, MQTT_3_1_3_9_ReconnectWithinWillDelaySuppressesTheWill) {
  RestartBroker({"--shards", "1"});  // one clock and queue: the later tick orders the check
  const std::string id = Unique("back");
  const std::string will_topic = Unique("will/");
  auto watcher = SubscribeRaw(Unique("watch"), will_topic, 1);
  auto relay = Relay();
  {
    auto client = ClientVia(*relay, id);
    auto options = WithExpiry(60);
    options.will = paho::will_options(will_topic, std::string("should not come"), 1, false,
                                      Props({property(property::WILL_DELAY_INTERVAL, 1)}));
    client->Connect(options);
    relay->Cut();
    ASSERT_TRUE(client->WaitDisconnected());
  }
  auto client = Client(id);
  EXPECT_TRUE(client->Connect(WithExpiry(60)).is_session_present());
  WaitBrokerSeconds(2);  // past the will delay
  auto before_pong = DrainUntilPong(*watcher);
  ASSERT_TRUE(before_pong.has_value());
  EXPECT_TRUE(before_pong->empty()) << "the will was published although the client came back";
}

TEST_F(PahoV5, MQTT_3_1_4_3_SameClientIdGetsSessionTakenOver) {
  const std::string id = Unique("twin");
  auto first = Connected(id);
  auto second = ConnectRaw(id);
  ASSERT_TRUE(first->WaitDisconnected());
  EXPECT_EQ(first->server_disconnect_reason(), static_cast<int>(paho::ReasonCode::SESSION_TAKEN_OVER));
}

TEST_F(PahoV5, MQTT_3_1_2_22_PingingClientStaysConnected) {
  auto client = Client(Unique("pinger"));
  PahoClient::ConnectOptions options;
  options.keep_alive_s = 1;  // Paho pings every second
  client->Connect(options);
  WaitBrokerSeconds(3);  // twice the 1.5 s the server allows an idle client
  EXPECT_FALSE(client->WaitDisconnected(milliseconds(0))) << "a client that pings was disconnected";
  const std::string topic = Unique("alive/");
  client->Subscribe(topic, 1);
  client->Publish(topic, "still here", 1);
  EXPECT_NE(client->Next(), nullptr);
}

TEST_F(PahoV5, MQTT_3_2_2_22_ClientKeepAliveUsedWhenAcceptable) {
  auto client = Client(Unique("alive"));
  PahoClient::ConnectOptions options;
  options.keep_alive_s = 30;
  EXPECT_FALSE(client->Connect(options).get_properties().contains(property::SERVER_KEEP_ALIVE));
}

TEST_F(PahoV5, ServerKeepAliveCapsTheClientsKeepAlive) {
  RestartBroker({"--max-keep-alive", "5"});
  auto client = Client(Unique("alive"));
  PahoClient::ConnectOptions options;
  options.keep_alive_s = 60;
  EXPECT_EQ(Get<uint16_t>(client->Connect(options).get_properties(), property::SERVER_KEEP_ALIVE), 5);
}

TEST_F(PahoV5, MaxSessionExpiryCapsTheRequestedInterval) {
  RestartBroker({"--max-session-expiry", "30"});
  auto client = Client(Unique("capped"));
  EXPECT_EQ(Get<uint32_t>(client->Connect(WithExpiry(3600)).get_properties(), property::SESSION_EXPIRY_INTERVAL),
            30u);
}

TEST_F(PahoV5, SysTopicsReportTheBroker) {
  RestartBroker({"--sys-interval", "1"});
  auto client = Connected(Unique("sys"));
  client->Subscribe("$SYS/broker/#", 0);
  std::map<std::string, std::string> seen;
  const auto deadline = Clock::now() + seconds(5);
  const char* wanted[] = {"$SYS/broker/version", "$SYS/broker/uptime", "$SYS/broker/clients/connected"};
  auto all_seen = [&] {
    for (const char* topic : wanted) {
      if (!seen.count(topic)) return false;
    }
    return true;
  };
  while (Clock::now() < deadline && !all_seen()) {
    if (auto message = client->Next(milliseconds(500))) seen[message->get_topic()] = message->get_payload_str();
  }
  ASSERT_TRUE(seen.count("$SYS/broker/version"));
  EXPECT_EQ(seen["$SYS/broker/version"].rfind("estuary", 0), 0u);
  ASSERT_TRUE(seen.count("$SYS/broker/uptime"));
  EXPECT_NE(seen["$SYS/broker/uptime"].find("seconds"), std::string::npos);
  ASSERT_TRUE(seen.count("$SYS/broker/clients/connected"));
  EXPECT_GE(std::stoi(seen["$SYS/broker/clients/connected"]), 0);
}

}  // namespace
}  // namespace estuary::conformance
