// MQTT 3.1.1 with Eclipse Paho MQTT C++: sessions, QoS, retained messages,
// subscriptions and ordering, as a stock 3.1.1 client sees them.
#include <gtest/gtest.h>

#include "conformance/mqtt/paho_fixture.h"

namespace estuary::conformance {
namespace {

PahoClient::ConnectOptions Persistent() {
  PahoClient::ConnectOptions options;
  options.clean = false;
  return options;
}

TEST_F(PahoV311, MQTT_3_1_4_4_MQTT_3_2_0_1_MQTT_3_2_2_1_CleanSessionAcceptedWithoutSessionPresent) {
  auto client = Client(Unique("clean"));
  const auto connack = client->Connect();  // throws unless CONNACK 0 came first
  EXPECT_FALSE(connack.is_session_present());
  EXPECT_EQ(connack.get_mqtt_version(), MQTTVERSION_3_1_1);
}

TEST_F(PahoV311, MQTT_7_0_0_2_StockClientNeedsNoExtension) {
  // Connect, subscribe, publish and disconnect with nothing but the standard.
  const std::string topic = Unique("plain/");
  auto client = Connected(Unique("plain"));
  client->Subscribe(topic, 1);
  client->Publish(topic, "hello", 1);
  auto message = client->Next();
  ASSERT_NE(message, nullptr);
  EXPECT_EQ(message->get_payload_str(), "hello");
  client->Disconnect();
}

TEST_F(PahoV311, MQTT_3_1_2_4_MQTT_3_2_2_2_MQTT_3_2_2_3_MQTT_3_1_3_2_PersistentSessionResumes) {
  const std::string id = Unique("persistent");
  const std::string topic = Unique("resume/");
  {
    auto client = Client(id);
    EXPECT_FALSE(client->Connect(Persistent()).is_session_present());  // no state yet
    client->Subscribe(topic, 1);
    client->Disconnect();
  }
  auto client = Client(id);  // a new Paho client: only the client id links them
  EXPECT_TRUE(client->Connect(Persistent()).is_session_present());
  RawPublish(topic, "after resume", 1);
  auto message = client->Next();
  ASSERT_NE(message, nullptr) << "the subscription did not survive the reconnect";
  EXPECT_EQ(message->get_payload_str(), "after resume");
}

TEST_F(PahoV311, MQTT_3_1_2_6_MQTT_3_1_4_3_CleanSessionDiscardsStoredSession) {
  const std::string id = Unique("discard");
  const std::string topic = Unique("old/");
  const std::string marker = Unique("marker/");
  {
    auto client = Client(id);
    client->Connect(Persistent());
    client->Subscribe(topic, 1);
    client->Disconnect();
  }
  {
    auto client = Client(id);
    EXPECT_FALSE(client->Connect().is_session_present());  // clean session
    client->Subscribe(marker, 1);
    RawPublish(topic, "to the old subscription", 1);
    RawPublish(marker, "marker", 1);  // same publisher: would come after the first
    auto first = client->Next();
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(first->get_topic(), marker) << "the old session's subscription was kept";
  }
  // The clean session ends with its connection: nothing to resume. (A raw
  // client ends it, so that the server has surely seen the end.)
  {
    auto raw = ConnectRaw(id, mqtt::ProtocolVersion::kV311, true);
    DisconnectAndWait(*raw);
  }
  auto client = Client(id);
  EXPECT_FALSE(client->Connect(Persistent()).is_session_present());
}

TEST_F(PahoV311, MQTT_3_1_2_5_MQTT_4_5_0_1_MQTT_4_1_0_1_OfflineMessagesWaitInTheSession) {
  const std::string id = Unique("offline");
  const std::string topic = Unique("queued/");
  {
    auto client = Client(id);
    client->Connect(Persistent());
    client->Subscribe(topic, 2);
    client->Disconnect();
  }
  TakeOffline(id, mqtt::ProtocolVersion::kV311);
  RawPublish(topic, "one", 1);
  RawPublish(topic, "two", 2);
  auto client = Client(id);
  EXPECT_TRUE(client->Connect(Persistent()).is_session_present());
  auto messages = client->Take(2);
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[0]->get_payload_str(), "one");
  EXPECT_EQ(messages[0]->get_qos(), 1);
  EXPECT_EQ(messages[1]->get_payload_str(), "two");
  EXPECT_EQ(messages[1]->get_qos(), 2);
}

// One Paho client subscribes to what it publishes: it is both the
// publisher the server acknowledges and the subscriber it delivers to.
TEST_F(PahoV311, MQTT_4_3_1_1_Qos0BothWays) {
  const std::string topic = Unique("qos0/");
  auto client = Connected(Unique("self"));
  client->Subscribe(topic, 2);
  client->Publish(topic, "zero", 0);
  auto message = client->Next();
  ASSERT_NE(message, nullptr);
  EXPECT_EQ(message->get_qos(), 0);
  EXPECT_EQ(message->get_payload_str(), "zero");
}

TEST_F(PahoV311, MQTT_4_3_2_1_MQTT_4_3_2_2_MQTT_3_3_4_1_Qos1BothWays) {
  const std::string topic = Unique("qos1/");
  auto client = Connected(Unique("self"));
  client->Subscribe(topic, 1);
  client->Publish(topic, "one", 1);  // returns once PUBACK came
  auto message = client->Next();
  ASSERT_NE(message, nullptr);
  EXPECT_EQ(message->get_qos(), 1);
  EXPECT_EQ(message->get_payload_str(), "one");
}

TEST_F(PahoV311, MQTT_4_3_3_1_MQTT_4_3_3_2_Qos2BothWaysDeliveredOnce) {
  const std::string topic = Unique("qos2/");
  auto client = Connected(Unique("self"));
  client->Subscribe(topic, 2);
  client->Publish(topic, "two", 2);  // returns once PUBCOMP came
  client->Publish(topic, "marker", 2);
  auto messages = client->Take(2);
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[0]->get_payload_str(), "two");
  EXPECT_EQ(messages[0]->get_qos(), 2);
  EXPECT_EQ(messages[1]->get_payload_str(), "marker") << "the QoS 2 message came twice";
}

TEST_F(PahoV311, MQTT_3_8_4_6_DeliveredQosIsTheLowerOfPublishedAndGranted) {
  const std::string topic = Unique("min/");
  auto client = Connected(Unique("sub"));
  client->Subscribe(topic, 1);
  RawPublish(topic, "sent at 2", 2);
  RawPublish(topic, "sent at 0", 0);
  auto messages = client->Take(2);
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[0]->get_qos(), 1);
  EXPECT_EQ(messages[1]->get_qos(), 0);
}

TEST_F(PahoV311, MQTT_3_3_5_1_OverlappingSubscriptionsDeliverAtHighestQos) {
  const std::string base = Unique("overlap/");
  auto client = Connected(Unique("sub"));
  client->Subscribe(base + "/#", 0);
  client->Subscribe(base + "/a", 2);
  RawPublish(base + "/a", "both match", 2);
  RawPublish(base + "/a", "marker", 2);  // same QoS: ordered with the first
  // Estuary sends one copy per session, at the highest granted QoS.
  auto messages = client->Take(2);
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[0]->get_payload_str(), "both match");
  EXPECT_EQ(messages[0]->get_qos(), 2);
  EXPECT_EQ(messages[1]->get_payload_str(), "marker") << "a second copy came";
}

TEST_F(PahoV311, MQTT_3_3_1_5_MQTT_3_3_1_6_MQTT_3_3_1_8_RetainedMessageSentToNewSubscribers) {
  const std::string topic = Unique("retained/");
  auto client = Connected(Unique("self"));
  client->Publish(topic, "kept", 1, true);
  client->Subscribe(topic, 2);
  auto message = client->Next();
  ASSERT_NE(message, nullptr);
  EXPECT_EQ(message->get_payload_str(), "kept");
  EXPECT_TRUE(message->is_retained());
  EXPECT_EQ(message->get_qos(), 1) << "the retained message keeps its QoS";
}

TEST_F(PahoV311, MQTT_3_3_1_9_RetainFlagClearedForEstablishedSubscriptions) {
  const std::string topic = Unique("live/");
  auto client = Connected(Unique("self"));
  client->Subscribe(topic, 1);
  client->Publish(topic, "live", 1, true);
  auto message = client->Next();
  ASSERT_NE(message, nullptr);
  EXPECT_FALSE(message->is_retained());
}

TEST_F(PahoV311, MQTT_3_3_1_10_MQTT_3_3_1_11_EmptyRetainedMessageDeliveredAndClears) {
  const std::string topic = Unique("clear/");
  const std::string marker = Unique("marker/");
  auto clients = ConnectTogether({Unique("current"), Unique("late")});
  auto& current = clients[0];
  auto& late = clients[1];
  RawPublish(topic, "old", 1, true);
  RawPublish(marker, "marker", 1, true);
  current->Subscribe(topic, 1);
  ASSERT_NE(current->Next(), nullptr);  // the retained "old"

  RawPublish(topic, "", 1, true);
  auto cleared = current->Next();
  ASSERT_NE(cleared, nullptr) << "the empty retained message was not delivered";
  EXPECT_TRUE(cleared->get_payload_str().empty());

  // A new subscriber to both gets only the marker: retained messages come
  // in the order of the filters, so "old" would have come first.
  late->Subscribe(topic, 1);
  late->Subscribe(marker, 1);
  auto first = late->Next();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->get_topic(), marker) << "the cleared retained message was still sent";
}

TEST_F(PahoV311, MQTT_3_3_1_7_Qos0RetainedMessageReplacesThePrevious) {
  const std::string topic = Unique("replace/");
  auto client = Connected(Unique("self"));
  client->Publish(topic, "first", 1, true);
  client->Publish(topic, "second", 0, true);
  client->Publish(topic, "marker", 1);  // QoS 1 after QoS 0: the retained one is in place
  client->Subscribe(topic, 1);
  auto message = client->Next();
  ASSERT_NE(message, nullptr);
  EXPECT_EQ(message->get_payload_str(), "second");
  EXPECT_EQ(message->get_qos(), 0);
}

TEST_F(PahoV311, MQTT_3_3_1_12_NonRetainedPublishLeavesTheRetainedMessage) {
  const std::string topic = Unique("keep/");
  auto client = Connected(Unique("self"));
  client->Publish(topic, "retained", 1, true);
  client->Publish(topic, "not retained", 1, false);
  client->Subscribe(topic, 1);
  auto message = client->Next();
  ASSERT_NE(message, nullptr);
  EXPECT_EQ(message->get_payload_str(), "retained");
  EXPECT_TRUE(message->is_retained());
}

TEST_F(PahoV311, MQTT_3_1_2_7_RetainedMessageOutlivesThePublishersSession) {
  const std::string topic = Unique("outlive/");
  {
    auto publisher = Connected(Unique("pub"));
    publisher->Publish(topic, "still here", 1, true);
    publisher->Disconnect();  // its clean session ends now
  }
  auto subscriber = Connected(Unique("sub"));
  subscriber->Subscribe(topic, 1);
  auto message = subscriber->Next();
  ASSERT_NE(message, nullptr);
  EXPECT_EQ(message->get_payload_str(), "still here");
}

TEST_F(PahoV311, MQTT_3_1_4_2_SameClientIdDisconnectsTheExistingClient) {
  const std::string id = Unique("twin");
  auto first = Connected(id);
  auto second = ConnectRaw(id, mqtt::ProtocolVersion::kV311);  // a newcomer with the same id
  EXPECT_TRUE(first->WaitDisconnected()) << "the first connection was not closed";
  // The newcomer works.
  const std::string topic = Unique("twin/");
  mqtt::SubscribeOptions options;
  options.qos = 1;
  ASSERT_TRUE(Subscribe(*second, topic, options).has_value());
  ASSERT_TRUE(PublishAndAck(*second, MakePublish(topic, "ok", 1, 9)));
  EXPECT_TRUE(ReceivePublish(*second).has_value());
}

TEST_F(PahoV311, MQTT_3_1_3_6_EmptyClientIdGetsOneAssigned) {
  auto clients = ConnectTogether({"", ""});
  // Two anonymous clients are two sessions: each gets only its own message.
  const std::string topic_a = Unique("anon/");
  const std::string topic_b = Unique("anon/");
  clients[0]->Subscribe(topic_a, 1);
  clients[1]->Subscribe(topic_b, 1);
  clients[0]->Publish(topic_a, "a", 1);
  clients[1]->Publish(topic_b, "b", 1);
  auto a = clients[0]->Next();
  auto b = clients[1]->Next();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a->get_payload_str(), "a");
  EXPECT_EQ(b->get_payload_str(), "b");
  EXPECT_TRUE(clients[0]->client().is_connected()) << "the second anonymous client took the first's session";
}

TEST_F(PahoV311, MQTT_3_1_3_5_TwentyThreeLettersAndDigitsAccepted) {
  auto client = Client("abcdefghijKLMNOPQRST123");
  EXPECT_FALSE(client->Connect().is_session_present());
}

TEST_F(PahoV311, MQTT_3_10_4_1_MQTT_3_10_4_2_MQTT_3_10_4_6_UnsubscribeStopsOnlyThoseFilters) {
  const std::string base = Unique("unsub/");
  auto client = Connected(Unique("sub"));
  client->Subscribe(base + "/a", 1);
  client->Subscribe(base + "/b", 1);
  client->Subscribe(base + "/c", 1);
  // One UNSUBSCRIBE with two filters, one of which matches nothing.
  client->Unsubscribe({base + "/a", base + "/never"});
  RawPublish(base + "/a", "gone", 1);
  RawPublish(base + "/b", "kept b", 1);
  RawPublish(base + "/c", "kept c", 1);
  auto messages = client->Take(2);
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[0]->get_payload_str(), "kept b");
  EXPECT_EQ(messages[1]->get_payload_str(), "kept c");
}

TEST_F(PahoV311, MQTT_4_6_0_5_MQTT_4_6_0_6_OnePublishersMessagesArriveInOrder) {
  const std::string topic = Unique("order/");
  auto clients = ConnectTogether({Unique("sub"), Unique("pub")});
  clients[0]->Subscribe(topic, 1);
  constexpr int kCount = 50;
  std::vector<paho::delivery_token_ptr> tokens;
  for (int i = 0; i < kCount; ++i) {
    tokens.push_back(clients[1]->client().publish(paho::message::create(topic, std::to_string(i), 1, false)));
  }
  for (auto& token : tokens) ASSERT_TRUE(token->wait_for(PahoClient::kWait));
  auto messages = clients[0]->Take(kCount);
  ASSERT_EQ(messages.size(), static_cast<size_t>(kCount));
  for (int i = 0; i < kCount; ++i) EXPECT_EQ(messages[i]->get_payload_str(), std::to_string(i));
}

TEST_F(PahoV311, MQTT_4_7_1_2_MQTT_4_7_1_3_MQTT_3_3_2_3_MQTT_3_8_3_2_WildcardsMatchLevels) {
  const std::string base = Unique("wild");
  auto clients = ConnectTogether({Unique("plus"), Unique("hash")});
  auto& plus = clients[0];
  auto& hash = clients[1];
  plus->Subscribe(base + "/+/c", 1);
  hash->Subscribe(base + "/a/#", 1);
  RawPublish(base + "/a/c", "1", 1);    // both
  RawPublish(base + "/a/b/c", "2", 1);  // '#' only
  RawPublish(base + "/x/c", "3", 1);    // '+' only
  RawPublish(base + "/a", "4", 1);      // '#' also matches its parent level

  auto plus_got = plus->Take(2);
  ASSERT_EQ(plus_got.size(), 2u);
  EXPECT_EQ(plus_got[0]->get_topic(), base + "/a/c");
  EXPECT_EQ(plus_got[1]->get_topic(), base + "/x/c");
  auto hash_got = hash->Take(3);
  ASSERT_EQ(hash_got.size(), 3u);
  EXPECT_EQ(hash_got[0]->get_topic(), base + "/a/c");
  EXPECT_EQ(hash_got[1]->get_topic(), base + "/a/b/c");
  EXPECT_EQ(hash_got[2]->get_topic(), base + "/a");
}

TEST_F(PahoV311, MQTT_4_7_2_1_WildcardFiltersDoNotMatchDollarTopics) {
  // One shard, so the $SYS publication reaches both subscribers in order.
  RestartBroker({"--sys-interval", "1", "--shards", "1"});
  auto clients = ConnectTogether({Unique("wild"), Unique("sys")});
  auto& wildcard = clients[0];
  auto& sys = clients[1];
  wildcard->Subscribe("#", 0);
  wildcard->Subscribe("+/broker/version", 0);
  sys->Subscribe("$SYS/broker/version", 0);
  // Wait for a live (not retained) publication made after both subscribed.
  paho::const_message_ptr live;
  for (int i = 0; i < 10 && !live; ++i) {
    auto message = sys->Next();
    ASSERT_NE(message, nullptr) << "no $SYS/broker/version";
    EXPECT_EQ(message->get_payload_str().rfind("estuary", 0), 0u);
    if (!message->is_retained()) live = message;
  }
  ASSERT_NE(live, nullptr);
  wildcard->Publish(Unique("marker/"), "marker", 0);
  auto first = wildcard->Next();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->get_payload_str(), "marker") << "'#' or '+' matched " << first->get_topic();
}

TEST_F(PahoV311, MQTT_3_1_2_8_MQTT_3_1_2_16_WillPublishedWhenTheServerDropsTheClient) {
  RestartBroker({"--shards", "1"});  // the later subscriber sees what the watcher saw
  const std::string id = Unique("doomed");
  const std::string will_topic = Unique("will/");
  const std::string marker = Unique("marker/");
  auto watcher = SubscribeRaw(Unique("watch"), will_topic, 1, mqtt::ProtocolVersion::kV311);
  auto client = Client(id);
  PahoClient::ConnectOptions options;
  options.will = paho::will_options(will_topic, std::string("dropped"), 1, false);
  client->Connect(options);
  auto usurper = ConnectRaw(id, mqtt::ProtocolVersion::kV311);  // the server closes the Paho connection
  auto will = ReceivePublish(*watcher);
  ASSERT_TRUE(will.has_value()) << "no will when the server closed the connection";
  EXPECT_EQ(will->payload, "dropped");
  // Published not retained: a later subscriber gets only the retained marker.
  RawPublish(marker, "marker", 1, true);
  auto later = ConnectRaw(Unique("later"), mqtt::ProtocolVersion::kV311);
  mqtt::SubscribeOptions subscription;
  subscription.qos = 1;
  ASSERT_TRUE(SubscribeAll(*later, {will_topic, marker}, subscription).has_value());
  auto first = ReceivePublish(*later);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->topic, marker) << "the will was retained";
}

TEST_F(PahoV311, MQTT_3_1_2_17_RetainedWillPublishedRetained) {
  RestartBroker({"--shards", "1"});
  const std::string id = Unique("doomed");
  const std::string will_topic = Unique("will/");
  auto watcher = SubscribeRaw(Unique("watch"), will_topic, 1, mqtt::ProtocolVersion::kV311);
  auto client = Client(id);
  PahoClient::ConnectOptions options;
  options.will = paho::will_options(will_topic, std::string("kept"), 1, true);
  client->Connect(options);
  auto usurper = ConnectRaw(id, mqtt::ProtocolVersion::kV311);
  ASSERT_TRUE(ReceivePublish(*watcher).has_value()) << "no will";
  auto later = SubscribeRaw(Unique("later"), will_topic, 1, mqtt::ProtocolVersion::kV311);
  auto will = ReceivePublish(*later);
  ASSERT_TRUE(will.has_value()) << "the will was not retained";
  EXPECT_TRUE(will->retain);
  EXPECT_EQ(will->payload, "kept");
}

}  // namespace
}  // namespace estuary::conformance
