// CONNECT, CONNACK, keep alive, DISCONNECT and wills on the wire, in
// MQTT 3.1.1 and 5.0: the packets a client library will not send wrong.
#include <gtest/gtest.h>

#include "conformance/mqtt/raw_fixture.h"

namespace estuary::conformance {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint8_t kClean = 0x02;
constexpr uint8_t kWill = 0x04;
constexpr uint8_t kWillQos1 = 0x08;
constexpr uint8_t kWillQos3 = 0x18;
constexpr uint8_t kWillRetain = 0x20;
constexpr uint8_t kPassword = 0x40;
constexpr uint8_t kUserName = 0x80;

std::string V311Connect(uint8_t flags, const std::string& payload) {
  return Frame(0x10, ConnectBody(ProtocolVersion::kV311, flags, payload));
}

std::string V5Connect(uint8_t flags, const std::string& payload) {
  return Frame(0x10, ConnectBody(ProtocolVersion::kV5, flags, payload));
}

// A CONNECT with a will, for the given version.
mqtt::ConnectPacket WillConnect(const std::string& id, ProtocolVersion version, const std::string& topic,
                                const std::string& payload) {
  auto connect = MakeConnect(id, version);
  connect.will = mqtt::Will{topic, payload, 1, false, {}};
  return connect;
}

// ---------------------------------------------------------------- 3.1.1 ----

TEST_F(RawV311, MQTT_3_1_0_1_MQTT_4_8_0_1_PacketBeforeConnectCloses) {
  ExpectConnectRefused(Bytes({0xC0, 0x00}));  // PINGREQ first
}

TEST_F(RawV311, MQTT_3_1_0_2_SecondConnectCloses) {
  ExpectRejected(Encode(MakeConnect(Unique("again"), ProtocolVersion::kV311), ProtocolVersion::kV311), {});
}

TEST_F(RawV311, MQTT_3_1_2_1_UnknownProtocolNameClosesWithoutConnack) {
  ExpectConnectRefused(Frame(0x10, ConnectBody(ProtocolVersion::kV311, kClean, Str("id"), 60, "MQTX")));
}

TEST_F(RawV311, MQTT_3_1_2_2_MQTT_3_2_2_4_MQTT_3_2_2_5_UnsupportedLevelGetsReturnCode1) {
  ExpectConnectRefused(Frame(0x10, ConnectBody(ProtocolVersion::kV311, kClean, Str("id"), 60, "MQTT", 2)),
                       ReasonCode::kUnsupportedProtocolVersion);
}

TEST_F(RawV311, MQTT_3_1_2_3_MQTT_3_1_4_1_ReservedConnectFlagClosesWithoutConnack) {
  ExpectConnectRefused(V311Connect(kClean | 0x01, Str("id")));
}

TEST_F(RawV311, MQTT_3_1_2_11_MQTT_3_1_2_13_WillQosWithoutWillFlagCloses) {
  ExpectConnectRefused(V311Connect(kClean | kWillQos1, Str("id")));
}

TEST_F(RawV311, MQTT_3_1_2_15_WillRetainWithoutWillFlagCloses) {
  ExpectConnectRefused(V311Connect(kClean | kWillRetain, Str("id")));
}

TEST_F(RawV311, MQTT_3_1_2_14_WillQos3Closes) {
  ExpectConnectRefused(V311Connect(kClean | kWill | kWillQos3, Str("id") + Str("w") + Str("m")));
}

TEST_F(RawV311, MQTT_3_1_2_9_WillFlagWithoutWillFieldsCloses) {
  ExpectConnectRefused(V311Connect(kClean | kWill, Str("id")));
}

TEST_F(RawV311, MQTT_3_1_2_19_UserNameFlagWithoutUserNameCloses) {
  ExpectConnectRefused(V311Connect(kClean | kUserName, Str("id")));
}

TEST_F(RawV311, MQTT_3_1_2_21_PasswordFlagWithoutPasswordCloses) {
  ExpectConnectRefused(V311Connect(kClean | kUserName | kPassword, Str("id") + Str("user")));
}

TEST_F(RawV311, MQTT_3_1_2_22_PasswordWithoutUserNameCloses) {
  ExpectConnectRefused(V311Connect(kClean | kPassword, Str("id") + Str("secret")));
}

TEST_F(RawV311, MQTT_3_1_2_18_MQTT_3_1_2_20_FieldsWithoutTheirFlagsClose) {
  ExpectConnectRefused(V311Connect(kClean, Str("id") + Str("user") + Str("secret")));
}

TEST_F(RawV311, MQTT_3_1_3_4_ClientIdMustBeUtf8) {
  ExpectConnectRefused(V311Connect(kClean, Str("bad\xff")));
}

TEST_F(RawV311, MQTT_3_1_3_10_WillTopicMustBeUtf8) {
  ExpectConnectRefused(V311Connect(kClean | kWill, Str("id") + Str("will\xc0") + Str("m")));
}

TEST_F(RawV311, MQTT_3_1_3_11_UserNameMustBeUtf8) {
  ExpectConnectRefused(V311Connect(kClean | kUserName, Str("id") + Str("\xed\xa0\x80")));  // a surrogate
}

TEST_F(RawV311, MQTT_3_1_3_1_MQTT_3_1_3_3_MQTT_3_1_2_9_EveryPayloadFieldReadInOrder) {
  const std::string will_topic = Unique("will/");
  auto watcher = Subscriber(will_topic);
  auto client = Open();
  auto connect = WillConnect(Unique("full"), ProtocolVersion::kV311, will_topic, "will payload");
  connect.username = "user";
  connect.password = "secret";
  auto connack = client->Connect(connect);
  ASSERT_TRUE(connack.has_value());
  EXPECT_EQ(connack->reason, ReasonCode::kSuccess);
  client->Close();  // no DISCONNECT: the will goes out
  auto will = ReceivePublish(*watcher);
  ASSERT_TRUE(will.has_value());
  EXPECT_EQ(will->topic, will_topic);
  EXPECT_EQ(will->payload, "will payload");
}

TEST_F(RawV311, MQTT_3_1_3_8_MQTT_3_1_3_9_MQTT_3_2_2_4_MQTT_3_2_2_5_EmptyIdWithoutCleanSessionRefused) {
  ExpectConnectRefused(V311Connect(0, Str("")), ReasonCode::kClientIdentifierNotValid);
}

TEST_F(RawV311, MQTT_3_1_4_5_NothingProcessedAfterRefusedConnect) {
  const std::string topic = Unique("after/");
  const std::string marker = Unique("marker/");
  // A refused CONNECT and a retained PUBLISH in one write.
  ExpectConnectRefused(V311Connect(0, Str("")) + Encode(MakePublish(topic, "sneaked in", 0, 0, true),
                                                         ProtocolVersion::kV311),
                       ReasonCode::kClientIdentifierNotValid);
  RawPublish(marker, "marker", 1, true);
  auto later = Connect(Unique("later"));
  mqtt::SubscribeOptions options;
  options.qos = 1;
  ASSERT_TRUE(SubscribeAll(*later, {topic, marker}, options).has_value());
  ExpectMarkerFirst(*later, marker);
}

TEST_F(RawV311, MQTT_3_2_2_6_NoFittingReturnCodeClosesWithoutConnack) {
  RestartBroker({"--maximum-qos", "1"});
  // A will QoS over the server's maximum has no 3.1.1 return code.
  auto connect = WillConnect(Unique("greedy"), ProtocolVersion::kV311, "w", "m");
  connect.will->qos = 2;
  ExpectConnectRefused(Encode(connect, ProtocolVersion::kV311));
}

TEST_F(RawV311, MQTT_3_1_2_24_MQTT_3_1_2_8_KeepAliveExpiryClosesAndPublishesTheWill) {
  const std::string will_topic = Unique("will/");
  auto watcher = Subscriber(will_topic);
  auto client = Open();
  auto connect = WillConnect(Unique("silent"), ProtocolVersion::kV311, will_topic, "timed out");
  connect.keep_alive = 1;
  const auto start = Clock::now();
  ASSERT_TRUE(client->Connect(connect).has_value());
  EXPECT_FALSE(ExpectDisconnected(*client, seconds(5)).has_value());
  EXPECT_GE(Clock::now() - start, milliseconds(1400)) << "closed before 1.5 keep alive periods";
  auto will = ReceivePublish(*watcher);
  ASSERT_TRUE(will.has_value()) << "a keep alive timeout must publish the will";
  EXPECT_EQ(will->payload, "timed out");
}

TEST_F(RawV311, MQTT_3_1_2_24_PingreqKeepsTheConnectionAlive) {
  auto client = Connect(Unique("pinger"), true, {}, 2);
  for (int i = 0; i < 2; ++i) {  // round trips a second apart, within the 3 s allowed
    auto pong = DrainUntilPong(*client);
    ASSERT_TRUE(pong.has_value()) << "closed during a live keep alive";
    WaitBrokerSeconds(1);
  }
}

TEST_F(RawV311, MQTT_3_12_4_1_PingreqGetsPingresp) {
  auto client = Connect(Unique("ping"));
  client->Send(mqtt::PingreqPacket{});
  EXPECT_TRUE(client->ReceiveAs<mqtt::PingrespPacket>().has_value());
}

TEST_F(RawV311, MQTT_3_14_4_3_MQTT_3_1_2_10_DisconnectDiscardsTheWill) {
  const std::string id = Unique("polite");
  const std::string will_topic = Unique("will/");
  auto watcher = Subscriber(will_topic);
  auto client = Open();
  ASSERT_TRUE(client->Connect(WillConnect(id, ProtocolVersion::kV311, will_topic, "must not come")).has_value());
  client->Send(mqtt::DisconnectPacket{});
  ASSERT_TRUE(client->WaitClosed());  // the server acted on the DISCONNECT
  // The same client id again, so that its marker leaves from the same place.
  auto again = Connect(id);
  ASSERT_TRUE(PublishAndAck(*again, MakePublish(will_topic, "marker", 1, 1)));
  auto first = ReceivePublish(*watcher);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->payload, "marker") << "the will was published after DISCONNECT";
}

TEST_F(RawV311, MQTT_3_1_2_12_NoWillFlagNoWill) {
  const std::string id = Unique("nowill");
  const std::string topic = Unique("t/");
  auto watcher = Subscriber(topic + "/#");
  auto client = Connect(id);
  client->Close();
  auto again = Connect(id);
  ASSERT_TRUE(PublishAndAck(*again, MakePublish(topic + "/marker", "marker", 1, 1)));
  ExpectMarkerFirst(*watcher, topic + "/marker");
}

TEST_F(RawV311, MQTT_3_14_1_1_DisconnectReservedBitsCloseAndKeepTheWill) {
  const std::string will_topic = Unique("will/");
  auto watcher = Subscriber(will_topic);
  auto client = Open();
  ASSERT_TRUE(client->Connect(WillConnect(Unique("sloppy"), ProtocolVersion::kV311, will_topic, "kept")).has_value());
  client->SendBytes(Bytes({0xE1, 0x00}));  // DISCONNECT with a reserved bit
  EXPECT_FALSE(ExpectDisconnected(*client).has_value());
  auto will = ReceivePublish(*watcher);
  ASSERT_TRUE(will.has_value()) << "an invalid DISCONNECT is no DISCONNECT: the will must go out";
}

TEST_F(RawV311, MQTT_7_1_1_1_PacketsSplitAndJoinedAcrossWrites) {
  auto client = Open();
  const std::string connect = Encode(MakeConnect(Unique("drip"), ProtocolVersion::kV311), ProtocolVersion::kV311);
  for (char byte : connect) client->SendBytes(std::string(1, byte));  // one byte a write
  ASSERT_TRUE(client->ReceiveAs<mqtt::ConnackPacket>().has_value());
  const std::string topic = Unique("joined/");
  mqtt::SubscribePacket subscribe;
  subscribe.packet_id = 1;
  subscribe.subscriptions.push_back({topic, {1, false, false, 0}});
  // SUBSCRIBE, PUBLISH and PINGREQ in one write.
  client->SendBytes(Encode(subscribe, ProtocolVersion::kV311) +
                    Encode(MakePublish(topic, "together", 1, 2), ProtocolVersion::kV311) + Bytes({0xC0, 0x00}));
  int subacks = 0, pubacks = 0, pongs = 0, publishes = 0;
  for (int i = 0; i < 4; ++i) {
    auto packet = client->Receive();
    ASSERT_TRUE(packet.has_value());
    if (std::holds_alternative<mqtt::SubackPacket>(*packet)) ++subacks;
    if (std::holds_alternative<mqtt::AckPacket>(*packet)) ++pubacks;
    if (std::holds_alternative<mqtt::PingrespPacket>(*packet)) ++pongs;
    if (std::holds_alternative<mqtt::PublishPacket>(*packet)) ++publishes;
  }
  EXPECT_EQ(subacks + pubacks + pongs + publishes, 4);
  EXPECT_EQ(publishes, 1);
}

TEST_F(RawV311, MQTT_4_1_0_1_MQTT_4_1_0_2_SessionLastsWhileConnected) {
  const std::string topic = Unique("kept/");
  auto client = Subscriber(topic);
  WaitBrokerSeconds(2);  // time passes; the connection stays
  RawPublish(topic, "still subscribed", 1);
  auto got = ReceivePublish(*client);
  ASSERT_TRUE(got.has_value()) << "the session lost its subscription while connected";
}

// ------------------------------------------------------------------ 5.0 ----

TEST_F(RawV5, MQTT_4_1_0_1_SessionKeptWhileConnectedPastItsExpiry) {
  const std::string topic = Unique("kept/");
  mqtt::Properties properties;
  properties.session_expiry_interval = 1;
  auto client = Connect(Unique("lingering"), true, properties);
  mqtt::SubscribeOptions options;
  options.qos = 1;
  ASSERT_TRUE(Subscribe(*client, topic, options).has_value());
  WaitBrokerSeconds(2);  // longer than the expiry interval, but connected
  RawPublish(topic, "still subscribed", 1);
  EXPECT_TRUE(ReceivePublish(*client).has_value()) << "the session expired while its connection was open";
}

TEST_F(RawV5, MQTT_3_1_0_1_MQTT_3_14_0_1_PacketBeforeConnectClosedWithoutDisconnect) {
  ExpectConnectRefused(Encode(MakePublish("a/b", "too early"), ProtocolVersion::kV5));
}

TEST_F(RawV5, MQTT_3_1_0_2_MQTT_3_2_0_2_SecondConnectIsAProtocolError) {
  ExpectRejected(Encode(MakeConnect(Unique("again"), ProtocolVersion::kV5), ProtocolVersion::kV5),
                 {ReasonCode::kProtocolError});
}

TEST_F(RawV5, MQTT_3_1_2_1_UnknownProtocolNameClosed) {
  ExpectConnectRefused(Frame(0x10, ConnectBody(ProtocolVersion::kV5, kClean, Str("id"), 60, "MQTX")));
}

TEST_F(RawV5, MQTT_3_1_2_2_MQTT_3_2_2_8_UnsupportedVersionGetsConnack0x84) {
  ExpectConnectRefused(Frame(0x10, ConnectBody(ProtocolVersion::kV5, kClean, Str("id"), 60, "MQTT", 6)),
                       ReasonCode::kUnsupportedProtocolVersion);
}

TEST_F(RawV5, MQTT_3_1_2_3_MQTT_3_1_4_1_MQTT_3_2_2_6_MQTT_3_2_2_7_ReservedFlagGetsConnackMalformed) {
  ExpectConnectRefused(V5Connect(kClean | 0x01, Str("id")), ReasonCode::kMalformedPacket);
}

TEST_F(RawV5, MQTT_3_1_2_11_MQTT_3_1_2_13_WillQosOrRetainWithoutWillFlagIsMalformed) {
  ExpectConnectRefused(V5Connect(kClean | kWillQos1, Str("id")), ReasonCode::kMalformedPacket);
  ExpectConnectRefused(V5Connect(kClean | kWillRetain, Str("id")), ReasonCode::kMalformedPacket);
}

TEST_F(RawV5, MQTT_3_1_2_12_WillQos3IsMalformed) {
  ExpectConnectRefused(V5Connect(kClean | kWill | kWillQos3, Str("id") + VarInt(0) + Str("w") + Str("m")),
                       ReasonCode::kMalformedPacket);
}

TEST_F(RawV5, MQTT_3_1_2_9_WillFlagWithoutWillFieldsIsMalformed) {
  ExpectConnectRefused(V5Connect(kClean | kWill, Str("id")), ReasonCode::kMalformedPacket);
}

TEST_F(RawV5, MQTT_3_1_2_17_MQTT_3_1_2_19_FlaggedFieldsMissingAreMalformed) {
  ExpectConnectRefused(V5Connect(kClean | kUserName, Str("id")), ReasonCode::kMalformedPacket);
  ExpectConnectRefused(V5Connect(kClean | kPassword, Str("id")), ReasonCode::kMalformedPacket);
}

TEST_F(RawV5, MQTT_3_1_2_16_MQTT_3_1_2_18_FieldsWithoutTheirFlagsAreMalformed) {
  ExpectConnectRefused(V5Connect(kClean, Str("id") + Str("user") + Str("secret")), ReasonCode::kMalformedPacket);
}

TEST_F(RawV5, MQTT_3_1_3_4_ClientIdMustBeUtf8) {
  ExpectConnectRefused(V5Connect(kClean, Str("bad\xff")), ReasonCode::kMalformedPacket);
}

TEST_F(RawV5, MQTT_3_1_3_11_WillTopicMustBeUtf8) {
  ExpectConnectRefused(V5Connect(kClean | kWill, Str("id") + VarInt(0) + Str("w\xff") + Str("m")),
                       ReasonCode::kMalformedPacket);
}

TEST_F(RawV5, MQTT_3_1_3_12_UserNameMustBeUtf8) {
  ExpectConnectRefused(V5Connect(kClean | kUserName, Str("id") + Str("\xc3")), ReasonCode::kMalformedPacket);
}

TEST_F(RawV5, MQTT_3_1_3_1_MQTT_3_1_3_3_MQTT_3_1_3_5_MQTT_3_2_2_1_EveryPayloadFieldReadInOrder) {
  const std::string will_topic = Unique("will/");
  auto watcher = Subscriber(will_topic);
  auto client = Open();
  auto connect = WillConnect("Abc123xyz0987654321ZYXW", ProtocolVersion::kV5, will_topic, "will payload");
  connect.will->properties.content_type = "text/plain";
  connect.username = "user";
  connect.password = "secret";
  auto connack = client->Connect(connect);  // decoding it checks the reserved CONNACK flag bits
  ASSERT_TRUE(connack.has_value());
  EXPECT_EQ(connack->reason, ReasonCode::kSuccess);
  client->Close();
  auto will = ReceivePublish(*watcher);
  ASSERT_TRUE(will.has_value());
  EXPECT_EQ(will->topic, will_topic);
  EXPECT_EQ(will->payload, "will payload");
  EXPECT_EQ(will->properties.content_type, "text/plain");
}

TEST_F(RawV5, MQTT_4_12_0_1_MQTT_3_1_4_6_UnsupportedAuthenticationMethodRefused) {
  const std::string topic = Unique("after/");
  const std::string marker = Unique("marker/");
  auto connect = MakeConnect(Unique("kerberos"), ProtocolVersion::kV5);
  connect.properties.authentication_method = "GS2-KRB5";
  // The refused CONNECT and a retained PUBLISH in one write: nothing after
  // the CONNECT may be processed.
  ExpectConnectRefused(Encode(connect, ProtocolVersion::kV5) +
                           Encode(MakePublish(topic, "sneaked in", 0, 0, true), ProtocolVersion::kV5),
                       ReasonCode::kBadAuthenticationMethod);
  RawPublish(marker, "marker", 1, true);
  auto later = Connect(Unique("later"));
  mqtt::SubscribeOptions options;
  options.qos = 1;
  ASSERT_TRUE(SubscribeAll(*later, {topic, marker}, options).has_value());
  ExpectMarkerFirst(*later, marker);
}

TEST_F(RawV5, MQTT_4_12_0_7_AuthWithoutAuthenticationMethodIsAProtocolError) {
  mqtt::AuthPacket auth;
  auth.reason = ReasonCode::kReAuthenticate;
  ExpectRejected(Encode(auth, ProtocolVersion::kV5), {ReasonCode::kProtocolError});
}

TEST_F(RawV5, MQTT_3_15_1_1_AuthReservedBitsAreMalformed) {
  ExpectRejected(Bytes({0xF1, 0x00}), {ReasonCode::kMalformedPacket});
}

TEST_F(RawV5, MQTT_3_1_2_22_MQTT_4_13_2_1_KeepAliveExpiryGetsDisconnect0x8D) {
  const std::string will_topic = Unique("will/");
  auto watcher = Subscriber(will_topic);
  auto client = Open();
  auto connect = WillConnect(Unique("silent"), ProtocolVersion::kV5, will_topic, "timed out");
  connect.keep_alive = 1;
  const auto start = Clock::now();
  ASSERT_TRUE(client->Connect(connect).has_value());
  EXPECT_EQ(ExpectDisconnected(*client), ReasonCode::kKeepAliveTimeout);
  EXPECT_GE(Clock::now() - start, milliseconds(1400)) << "closed before 1.5 keep alive periods";
  EXPECT_TRUE(ReceivePublish(*watcher).has_value()) << "a keep alive timeout must publish the will";
}

TEST_F(RawV5, MQTT_3_14_4_3_MQTT_3_1_2_10_NormalDisconnectDiscardsTheWill) {
  const std::string id = Unique("polite");
  const std::string will_topic = Unique("will/");
  auto watcher = Subscriber(will_topic);
  auto client = Open();
  ASSERT_TRUE(client->Connect(WillConnect(id, ProtocolVersion::kV5, will_topic, "must not come")).has_value());
  client->Send(mqtt::DisconnectPacket{});  // reason 0x00
  ASSERT_TRUE(client->WaitClosed());
  auto again = Connect(id);
  ASSERT_TRUE(PublishAndAck(*again, MakePublish(will_topic, "marker", 1, 1)));
  auto first = ReceivePublish(*watcher);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->payload, "marker") << "the will was published after DISCONNECT 0x00";
}

TEST_F(RawV5, MQTT_3_1_2_8_DisconnectWithWillMessagePublishesTheWill) {
  const std::string will_topic = Unique("will/");
  auto watcher = Subscriber(will_topic);
  auto client = Open();
  ASSERT_TRUE(client->Connect(WillConnect(Unique("leaving"), ProtocolVersion::kV5, will_topic, "as asked")).has_value());
  mqtt::DisconnectPacket disconnect;
  disconnect.reason = ReasonCode::kDisconnectWithWill;
  client->Send(disconnect);
  auto will = ReceivePublish(*watcher);
  ASSERT_TRUE(will.has_value()) << "DISCONNECT 0x04 keeps the will";
  EXPECT_EQ(will->payload, "as asked");
}

TEST_F(RawV5, MQTT_3_14_1_1_DisconnectReservedBitsAreMalformed) {
  ExpectRejected(Bytes({0xE2, 0x00}), {ReasonCode::kMalformedPacket});
}

TEST_F(RawV5, MQTT_4_13_1_1_SessionExpirySetAtDisconnectAfterZeroIsAProtocolError) {
  mqtt::DisconnectPacket disconnect;
  disconnect.properties.session_expiry_interval = 60;
  ExpectRejected(Encode(disconnect, ProtocolVersion::kV5), {ReasonCode::kProtocolError});
}

TEST_F(RawV5, MQTT_4_2_0_1_MQTT_3_12_4_1_PacketsSplitAndJoinedAcrossWrites) {
  auto client = Open();
  const std::string connect = Encode(MakeConnect(Unique("drip"), ProtocolVersion::kV5), ProtocolVersion::kV5);
  for (char byte : connect) client->SendBytes(std::string(1, byte));
  ASSERT_TRUE(client->ReceiveAs<mqtt::ConnackPacket>().has_value());
  client->SendBytes(Bytes({0xC0, 0x00, 0xC0, 0x00}));  // two PINGREQs in one write
  EXPECT_TRUE(client->ReceiveAs<mqtt::PingrespPacket>().has_value());
  EXPECT_TRUE(client->ReceiveAs<mqtt::PingrespPacket>().has_value());
}

}  // namespace
}  // namespace estuary::conformance
