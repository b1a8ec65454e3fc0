// MqttConnection driven through in-memory streams on simulated time: exact
// packets in, exact packets out. Test names carry the normative statement
// they check where there is one.
#include "frontends/mqtt/session/connection.h"

#include <gtest/gtest.h>

#include <deque>

#include "frontends/mqtt/codec/encoder.h"
#include "io/sim/sim_loop.h"

namespace estuary::mqtt {
namespace {

class NoLink final : public core::ShardLink {
 public:
  void Post(uint16_t, std::function<void(core::ShardBroker&)>) override { ADD_FAILURE(); }
};

// One client: a stream, a connection, and the packets the server sent.
class Client {
 public:
  Client(core::ShardBroker& broker, ProtocolVersion version, ConnectionSettings settings = {})
      : version_(version) {
    connection_ = std::make_shared<MqttConnection>(broker, stream_, std::move(settings));
    connection_->Start();
  }
  void Send(const Packet& packet) {
    std::string bytes;
    EncodePacket(packet, version_, bytes);
    connection_->OnBytes(bytes);
  }
  void SendRaw(std::string_view bytes) { connection_->OnBytes(bytes); }
  // Decodes everything written so far.
  std::vector<Packet> Received() {
    std::string_view buffer = stream_.written;
    buffer.remove_prefix(consumed_);
    std::vector<Packet> packets;
    while (!buffer.empty()) {
      auto header = PeekFrame(buffer, UINT32_MAX);
      if (!header || header->header_size == 0 || buffer.size() < header->total_size()) break;
      auto packet = DecodePacket(buffer.substr(0, header->total_size()), version_);
      EXPECT_TRUE(packet.has_value());
      if (packet) packets.push_back(std::move(*packet));
      consumed_ += header->total_size();
      buffer.remove_prefix(header->total_size());
    }
    return packets;
  }
  template <typename T>
  T Expect() {
    auto packets = Received();
    EXPECT_EQ(packets.size(), 1u) << "expected exactly one packet";
    if (packets.size() != 1 || !std::holds_alternative<T>(packets[0])) {
      ADD_FAILURE() << "unexpected packet";
      return T{};
    }
    return std::get<T>(packets[0]);
  }
  void Connect(std::string client_id, bool clean = true, Properties properties = {},
               uint16_t keep_alive = 0, std::optional<Will> will = std::nullopt) {
    ConnectPacket connect;
    connect.protocol_name = "MQTT";
    connect.version = version_;
    connect.client_id = std::move(client_id);
    connect.clean_start = clean;
    connect.keep_alive = keep_alive;
    connect.properties = std::move(properties);
    connect.will = std::move(will);
    Send(connect);
  }
  void Subscribe(std::string filter, uint8_t qos, uint16_t id = 1, Properties properties = {}) {
    SubscribePacket subscribe;
    subscribe.packet_id = id;
    subscribe.properties = std::move(properties);
    subscribe.subscriptions.push_back({std::move(filter), SubscribeOptions{qos, false, false, 0}});
    Send(subscribe);
  }
  void Publish(std::string topic, std::string payload, uint8_t qos = 0, uint16_t id = 0,
               bool retain = false, Properties properties = {}) {
    PublishPacket publish;
    publish.topic = std::move(topic);
    publish.payload = std::move(payload);
    publish.qos = qos;
    publish.packet_id = id;
    publish.retain = retain;
    publish.properties = std::move(properties);
    Send(publish);
  }
  void Ack(PacketType type, uint16_t id) {
    AckPacket ack;
    ack.type = type;
    ack.packet_id = id;
    Send(ack);
  }
  void DropNetwork() {
    stream_.closed = true;
    connection_->OnStreamClosed();
  }
  // The server drops its last reference, as it does once a connection closed.
  void Destroy() { connection_.reset(); }
  bool closed() const { return stream_.closed; }
  io::MemoryStream& stream() { return stream_; }
  MqttConnection& connection() { return *connection_; }

 private:
  ProtocolVersion version_;
  io::MemoryStream stream_;
  std::shared_ptr<MqttConnection> connection_;
  size_t consumed_ = 0;
};

class ConnectionTest : public ::testing::Test {
 protected:
  explicit ConnectionTest(core::BrokerLimits limits = {}) {
    core::ShardConfig config;
    config.node_id = 1;
    config.limits = limits;
    broker_ = std::make_unique<core::ShardBroker>(config, loop_, link_, metrics_);
  }
  std::unique_ptr<Client> Connected(std::string id, ProtocolVersion version = ProtocolVersion::kV5,
                                    bool clean = true, Properties properties = {}) {
    auto client = std::make_unique<Client>(*broker_, version);
    client->Connect(std::move(id), clean, std::move(properties));
    auto connack = client->Expect<ConnackPacket>();
    EXPECT_EQ(connack.reason, ReasonCode::kSuccess);
    return client;
  }
  // Runs posted work (delivery pumps).
  void Settle() { loop_.RunUntilIdle(); }

  io::ManualClock clock_;
  io::SimLoop loop_{clock_};
  NoLink link_;
  core::ShardMetrics metrics_;
  std::unique_ptr<core::ShardBroker> broker_;
};

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

// --- issue 6 point 5: CONNECT waits for the cluster's client id claim -------

// A client id registry that answers when the test says so (or at once, from
// inside the hook, with answer_at_once).
class FakeRegistry {
 public:
  ConnectionSettings Settings() {
    ConnectionSettings settings;
    settings.claim_client_id = [this](const std::string& client_id,
                                      std::function<void(ClaimOutcome)> done) {
      claims.push_back(client_id);
      if (answer_at_once) {
        done(*answer_at_once);
        return;
      }
      pending.push_back(std::move(done));
    };
    settings.release_client_id = [this](const std::string& client_id) {
      released.push_back(client_id);
    };
    return settings;
  }
  void Answer(ClaimOutcome outcome) {
    ASSERT_FALSE(pending.empty());
    auto done = std::move(pending.front());
    pending.pop_front();
    done(outcome);
  }

  std::optional<ClaimOutcome> answer_at_once;
  std::vector<std::string> claims;
  std::deque<std::function<void(ClaimOutcome)>> pending;
  std::vector<std::string> released;
};

std::string Encoded(const Packet& packet, ProtocolVersion version = ProtocolVersion::kV5) {
  std::string bytes;
  EncodePacket(packet, version, bytes);
  return bytes;
}

ConnectPacket MakeConnect(std::string client_id, ProtocolVersion version = ProtocolVersion::kV5) {
  ConnectPacket connect;
  connect.protocol_name = "MQTT";
  connect.version = version;
  connect.client_id = std::move(client_id);
  connect.clean_start = true;
  return connect;
}

PublishPacket MakePublish(std::string payload, uint8_t qos, uint16_t packet_id) {
  PublishPacket publish;
  publish.topic = "t";
  publish.payload = std::move(payload);
  publish.qos = qos;
  publish.packet_id = packet_id;
  return publish;
}

std::vector<std::string> Payloads(const std::vector<Packet>& packets) {
  std::vector<std::string> payloads;
  for (const auto& packet : packets) {
    if (auto* publish = std::get_if<PublishPacket>(&packet)) payloads.push_back(publish->payload);
  }
  return payloads;
}

class ClaimTest : public ConnectionTest {
 protected:
  std::unique_ptr<Client> Claiming(std::string id, ProtocolVersion version = ProtocolVersion::kV5,
                                   bool clean = true, Properties properties = {},
                                   uint16_t keep_alive = 0) {
    auto client = std::make_unique<Client>(*broker_, version, registry_.Settings());
    client->Connect(std::move(id), clean, std::move(properties), keep_alive);
    return client;
  }
  std::unique_ptr<Client> Granted(std::string id, ProtocolVersion version = ProtocolVersion::kV5,
                                  bool clean = true, Properties properties = {}) {
    auto client = Claiming(std::move(id), version, clean, std::move(properties));
    registry_.Answer(ClaimOutcome::kGranted);
    EXPECT_EQ(client->Expect<ConnackPacket>().reason, ReasonCode::kSuccess);
    return client;
  }
  // A plain (unclaimed) subscriber to "t".
  std::unique_ptr<Client> Watcher() {
    auto watcher = Connected("watcher");
    watcher->Subscribe("t", 1);
    watcher->Received();
    return watcher;
  }

  FakeRegistry registry_;
};

TEST_F(ClaimTest, ConnackAndPipelinedPacketsWaitForTheGrantThenRunInOrder_Issue6) {
  auto watcher = Watcher();
  Client client(*broker_, ProtocolVersion::kV5, registry_.Settings());
  // CONNECT with two PUBLISHes pipelined in the same read (MQTT 5 §3.1.4:
  // a client need not wait for CONNACK).
  client.SendRaw(Encoded(MakeConnect("pub")) + Encoded(MakePublish("1", 1, 1)) +
                 Encoded(MakePublish("2", 0, 0)));
  EXPECT_EQ(registry_.claims, std::vector<std::string>{"pub"});
  EXPECT_EQ(client.connection().state(), MqttConnection::State::kClaiming);
  EXPECT_FALSE(client.stream().reading);
  client.SendRaw(Encoded(MakePublish("3", 1, 3)));  // a read already under way
  Settle();
  EXPECT_TRUE(client.stream().written.empty());
  EXPECT_TRUE(watcher->Received().empty());
  EXPECT_EQ(broker_->FindSession("pub"), nullptr);

  registry_.Answer(ClaimOutcome::kGranted);
  Settle();
  auto packets = client.Received();
  ASSERT_EQ(packets.size(), 3u);
  EXPECT_EQ(std::get<ConnackPacket>(packets[0]).reason, ReasonCode::kSuccess);
  EXPECT_EQ(std::get<AckPacket>(packets[1]).packet_id, 1);
  EXPECT_EQ(std::get<AckPacket>(packets[2]).packet_id, 3);
  EXPECT_EQ(Payloads(watcher->Received()), (std::vector<std::string>{"1", "2", "3"}));
  EXPECT_TRUE(client.stream().reading);
  EXPECT_EQ(metrics_.client_id_claims.load(), 1u);
  EXPECT_EQ(metrics_.client_id_claims_refused.load(), 0u);
}

TEST_F(ClaimTest, ClaimAnsweredFromInsideTheHookKeepsPipelinedOrder) {
  auto watcher = Watcher();
  registry_.answer_at_once = ClaimOutcome::kGranted;
  Client client(*broker_, ProtocolVersion::kV5, registry_.Settings());
  client.SendRaw(Encoded(MakeConnect("pub")) + Encoded(MakePublish("1", 1, 1)) +
                 Encoded(MakePublish("2", 1, 2)));
  EXPECT_EQ(registry_.claims, std::vector<std::string>{"pub"});
  Settle();
  auto packets = client.Received();
  ASSERT_EQ(packets.size(), 3u);
  EXPECT_TRUE(std::holds_alternative<ConnackPacket>(packets[0]));
  EXPECT_EQ(std::get<AckPacket>(packets[2]).packet_id, 2);
  EXPECT_EQ(Payloads(watcher->Received()), (std::vector<std::string>{"1", "2"}));
}

TEST_F(ClaimTest, UnavailableClaimGetsConnack0x88AndClose_Issue6) {
  auto watcher = Watcher();
  Client client(*broker_, ProtocolVersion::kV5, registry_.Settings());
  client.SendRaw(Encoded(MakeConnect("c")) + Encoded(MakePublish("lost", 1, 1)));
  registry_.Answer(ClaimOutcome::kUnavailable);
  Settle();
  auto connack = client.Expect<ConnackPacket>();
  EXPECT_EQ(connack.reason, ReasonCode::kServerUnavailable);
  EXPECT_NE(connack.properties.reason_string.value_or("").find("no quorum"), std::string::npos);
  EXPECT_TRUE(client.closed());
  EXPECT_EQ(broker_->FindSession("c"), nullptr);
  // §3.1.4: data after a rejected CONNECT is not processed.
  EXPECT_TRUE(watcher->Received().empty());
  EXPECT_EQ(metrics_.client_id_claims_refused.load(), 1u);
}

TEST_F(ClaimTest, UnavailableClaimGetsReturnCode3InV311_Issue6) {
  auto client = Claiming("c", ProtocolVersion::kV311);
  registry_.Answer(ClaimOutcome::kUnavailable);
  EXPECT_EQ(client->stream().written, std::string("\x20\x02\x00\x03", 4));
  EXPECT_TRUE(client->closed());
  EXPECT_TRUE(registry_.released.empty());
}

TEST_F(ClaimTest, ConnectionLostDuringTheClaimIgnoresTheLateAnswer) {
  auto client = Claiming("c");
  client->DropNetwork();
  registry_.Answer(ClaimOutcome::kGranted);
  Settle();
  EXPECT_TRUE(client->stream().written.empty());
  EXPECT_EQ(broker_->FindSession("c"), nullptr);
  EXPECT_TRUE(registry_.released.empty());
}

TEST_F(ClaimTest, ConnectionDestroyedDuringTheClaimIgnoresTheLateAnswer) {
  auto granted_late = Claiming("a");
  auto refused_late = Claiming("b");
  granted_late->DropNetwork();
  granted_late->Destroy();
  refused_late->Destroy();  // even without a close first
  registry_.Answer(ClaimOutcome::kGranted);
  registry_.Answer(ClaimOutcome::kUnavailable);
  Settle();
  EXPECT_TRUE(granted_late->stream().written.empty());
  EXPECT_TRUE(refused_late->stream().written.empty());
  EXPECT_EQ(broker_->FindSession("a"), nullptr);
  EXPECT_EQ(metrics_.client_id_claims_refused.load(), 0u);
}

TEST_F(ClaimTest, UnansweredClaimIsRefusedAtTheConnectTimeout) {
  auto client = Claiming("c");
  loop_.AdvanceBy(ConnectionSettings{}.connect_timeout_ms - 1);
  EXPECT_FALSE(client->closed());
  EXPECT_TRUE(client->stream().written.empty());
  loop_.AdvanceBy(1);
  EXPECT_TRUE(client->closed());
  EXPECT_EQ(client->Expect<ConnackPacket>().reason, ReasonCode::kServerUnavailable);
  EXPECT_EQ(metrics_.client_id_claims_refused.load(), 1u);
  registry_.Answer(ClaimOutcome::kGranted);  // too late: nothing happens
  EXPECT_TRUE(client->Received().empty());
  EXPECT_EQ(broker_->FindSession("c"), nullptr);
}

TEST_F(ClaimTest, KeepAliveStartsAtConnackNotAtConnect) {
  auto client = Claiming("c", ProtocolVersion::kV5, true, {}, /*keep_alive=*/1);
  loop_.AdvanceBy(5'000);
  registry_.Answer(ClaimOutcome::kGranted);
  EXPECT_EQ(client->Expect<ConnackPacket>().reason, ReasonCode::kSuccess);
  EXPECT_FALSE(client->closed());
  loop_.AdvanceBy(1'499);
  EXPECT_FALSE(client->closed());
  loop_.AdvanceBy(1);
  EXPECT_EQ(client->Expect<DisconnectPacket>().reason, ReasonCode::kKeepAliveTimeout);
}

TEST_F(ClaimTest, NoClaimForRefusedConnectOrAssignedClientId) {
  Client refused(*broker_, ProtocolVersion::kV5, registry_.Settings());
  Will will;
  will.topic = "bad/+";
  refused.Connect("c", true, {}, 0, will);
  EXPECT_EQ(refused.Expect<ConnackPacket>().reason, ReasonCode::kTopicNameInvalid);
  Client assigned(*broker_, ProtocolVersion::kV5, registry_.Settings());
  assigned.Connect("");
  EXPECT_EQ(assigned.Expect<ConnackPacket>().reason, ReasonCode::kSuccess);
  assigned.Send(DisconnectPacket{});
  auto named = Claiming("named");
  EXPECT_EQ(registry_.claims, std::vector<std::string>{"named"});
  EXPECT_TRUE(registry_.released.empty());
}

TEST_F(ClaimTest, IdIsReleasedWhenTheSessionEndsWithTheConnection_Issue6) {
  auto v5 = Granted("v5");
  v5->Send(DisconnectPacket{});
  auto v311 = Granted("v311", ProtocolVersion::kV311);
  v311->DropNetwork();  // clean session: the session ends all the same
  Properties keep;
  keep.session_expiry_interval = 600;
  auto shortened = Granted("shortened", ProtocolVersion::kV5, false, keep);
  DisconnectPacket expire_now;
  expire_now.properties.session_expiry_interval = 0;
  shortened->Send(expire_now);
  shortened->DropNetwork();  // a second close changes nothing
  EXPECT_EQ(registry_.released, (std::vector<std::string>{"v5", "v311", "shortened"}));
}

TEST_F(ClaimTest, IdIsKeptWhileThePersistentSessionLives_Issue6) {
  auto v311 = Granted("v311", ProtocolVersion::kV311, /*clean=*/false);
  v311->Send(DisconnectPacket{});
  Properties keep;
  keep.session_expiry_interval = 600;
  auto v5 = Granted("v5", ProtocolVersion::kV5, false, keep);
  v5->DropNetwork();
  EXPECT_TRUE(registry_.released.empty());
  EXPECT_NE(broker_->FindSession("v5"), nullptr);
}

TEST_F(ClaimTest, IdIsNotReleasedByATakenOverConnection_Issue6) {
  auto first = Granted("same");
  auto second = Granted("same");  // takeover on this node
  EXPECT_EQ(first->Expect<DisconnectPacket>().reason, ReasonCode::kSessionTakenOver);
  EXPECT_TRUE(first->closed());
  broker_->TakenOverElsewhere("same");  // and by a connection on another node
  EXPECT_EQ(second->Expect<DisconnectPacket>().reason, ReasonCode::kSessionTakenOver);
  EXPECT_TRUE(second->closed());
  EXPECT_TRUE(registry_.released.empty());
}

}  // namespace
}  // namespace estuary::mqtt
