// MQTT 5.0 with Eclipse Paho MQTT C++: QoS, retained messages and retain
// handling, subscription options and identifiers, shared subscriptions,
// message properties, expiry, request/response.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "conformance/mqtt/paho_fixture.h"

namespace estuary::conformance {
namespace {

using paho::property;
using Clock = std::chrono::steady_clock;

paho::subscribe_options Options(bool no_local, bool retain_as_published,
                                paho::subscribe_options::RetainHandling handling) {
  return paho::subscribe_options(no_local, retain_as_published, handling);
}

constexpr auto kSendRetained = paho::subscribe_options::SEND_RETAINED_ON_SUBSCRIBE;
constexpr auto kRetainedIfNew = paho::subscribe_options::SEND_RETAINED_ON_NEW;
constexpr auto kNoRetained = paho::subscribe_options::DONT_SEND_RETAINED;

TEST_F(PahoV5, MQTT_3_3_4_1_MQTT_4_3_1_1_MQTT_4_3_2_2_MQTT_4_3_2_4_MQTT_4_3_3_2_MQTT_4_3_3_8_Qos012BothWays) {
  const std::string topic = Unique("qos/");
  auto client = Connected(Unique("self"));
  client->Subscribe(topic, 2);
  for (int qos = 0; qos <= 2; ++qos) {
    client->Publish(topic, "at " + std::to_string(qos), qos);  // waits for PUBACK / PUBCOMP
    auto message = client->Next();
    ASSERT_NE(message, nullptr) << "QoS " << qos;
    EXPECT_EQ(message->get_qos(), qos);
    EXPECT_EQ(message->get_payload_str(), "at " + std::to_string(qos));
  }
}

TEST_F(PahoV5, MQTT_3_8_4_8_DeliveredQosIsTheLowerOfPublishedAndGranted) {
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

TEST_F(PahoV5, MQTT_3_3_4_2_MQTT_3_3_4_3_MQTT_3_3_4_4_OverlappingSubscriptionsSendAllIdentifiers) {
  const std::string base = Unique("ids/");
  auto client = Connected(Unique("sub"));
  client->Subscribe(base + "/#", 0, {}, Props({property(property::SUBSCRIPTION_IDENTIFIER, 11)}));
  client->Subscribe(base + "/a", 2, {}, Props({property(property::SUBSCRIPTION_IDENTIFIER, 22)}));
  client->Subscribe(base + "/+", 1);  // no identifier
  RawPublish(base + "/a", "three match", 2);
  RawPublish(base + "/a", "marker", 2);
  auto messages = client->Take(2);
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[0]->get_payload_str(), "three match");
  EXPECT_EQ(messages[0]->get_qos(), 2) << "the highest granted QoS";
  auto ids = SubscriptionIds(messages[0]->get_properties());
  EXPECT_EQ(std::multiset<uint32_t>(ids.begin(), ids.end()), (std::multiset<uint32_t>{11, 22}));
  EXPECT_EQ(messages[1]->get_payload_str(), "marker") << "more than one copy for one session";
}

TEST_F(PahoV5, MQTT_3_3_4_5_SeparateCopiesCarryTheirOwnIdentifier) {
  // A shared and a non-shared subscription of one session give two copies.
  const std::string topic = Unique("copies/");
  auto client = Connected(Unique("sub"));
  client->Subscribe(topic, 1, {}, Props({property(property::SUBSCRIPTION_IDENTIFIER, 5)}));
  client->Subscribe("$share/g/" + topic, 1, {}, Props({property(property::SUBSCRIPTION_IDENTIFIER, 6)}));
  RawPublish(topic, "twice", 1);
  auto messages = client->Take(2);
  ASSERT_EQ(messages.size(), 2u);
  std::set<std::vector<uint32_t>> seen;
  for (const auto& message : messages) seen.insert(SubscriptionIds(message->get_properties()));
  EXPECT_EQ(seen, (std::set<std::vector<uint32_t>>{{5}, {6}}));
}

TEST_F(PahoV5, MQTT_3_3_1_5_MQTT_3_3_1_6_MQTT_3_3_1_7_MQTT_3_3_1_8_RetainedReplacedKeptAndCleared) {
  const std::string topic = Unique("retained/");
  const std::string marker = Unique("marker/");
  auto client = Connected(Unique("self"));
  client->Publish(topic, "first", 1, true);
  client->Publish(topic, "second", 1, true);  // replaces
  client->Publish(topic, "not retained", 1);  // leaves it alone
  client->Subscribe(topic, 1, Options(false, false, kSendRetained));
  auto retained = client->Next();
  ASSERT_NE(retained, nullptr);
  EXPECT_EQ(retained->get_payload_str(), "second");
  EXPECT_TRUE(retained->is_retained());
  client->Unsubscribe({topic});

  client->Publish(topic, "", 1, true);  // clears
  client->Publish(marker, "marker", 1, true);
  client->Subscribe(topic, 1);
  client->Subscribe(marker, 1);
  auto first = client->Next();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->get_topic(), marker) << "an empty retained message was stored or the old one kept";
}

TEST_F(PahoV5, MQTT_3_3_1_9_MQTT_3_3_1_10_MQTT_3_3_1_11_MQTT_3_8_4_3_MQTT_3_8_4_4_RetainHandling) {
  const std::string topic = Unique("rh/");
  const std::string marker = Unique("marker/");
  RawPublish(topic, "retained", 1, true);
  RawPublish(marker, "marker", 1, true);
  auto client = Connected(Unique("sub"));
  // The next retained message after each step tells what that step sent:
  // a SUBSCRIBE to the marker follows every step that must send nothing.
  auto next_topic = [&]() {
    auto message = client->Next();
    return message ? message->get_topic() : std::string("(nothing)");
  };
  client->Subscribe(topic, 1, Options(false, false, kSendRetained));  // 0: sent
  EXPECT_EQ(next_topic(), topic);
  client->Subscribe(topic, 1, Options(false, false, kSendRetained));  // 0 again: replaced, sent again
  EXPECT_EQ(next_topic(), topic);
  client->Subscribe(topic, 1, Options(false, false, kRetainedIfNew));  // 1, existing: not sent
  client->Subscribe(marker, 1, Options(false, false, kSendRetained));
  EXPECT_EQ(next_topic(), marker);
  client->Subscribe(topic, 1, Options(false, false, kNoRetained));  // 2: never sent
  client->Subscribe(marker, 1, Options(false, false, kSendRetained));
  EXPECT_EQ(next_topic(), marker);
  client->Unsubscribe({topic});
  client->Subscribe(topic, 1, Options(false, false, kRetainedIfNew));  // 1, new: sent
  EXPECT_EQ(next_topic(), topic);
}

TEST_F(PahoV5, MQTT_3_3_1_12_MQTT_3_3_1_13_RetainAsPublished) {
  const std::string topic = Unique("rap/");
  auto client = Connected(Unique("self"));
  client->Subscribe(topic, 1, Options(false, true, kNoRetained));
  client->Publish(topic, "kept flag", 1, true);
  auto with_flag = client->Next();
  ASSERT_NE(with_flag, nullptr);
  EXPECT_TRUE(with_flag->is_retained()) << "retain as published 1 cleared RETAIN";
  client->Publish(topic, "plain", 1, false);
  auto plain = client->Next();
  ASSERT_NE(plain, nullptr);
  EXPECT_FALSE(plain->is_retained());

  client->Subscribe(topic, 1, Options(false, false, kNoRetained));  // replaces: retain as published 0
  client->Publish(topic, "cleared flag", 1, true);
  auto without_flag = client->Next();
  ASSERT_NE(without_flag, nullptr);
  EXPECT_FALSE(without_flag->is_retained()) << "retain as published 0 kept RETAIN";
}

TEST_F(PahoV5, MQTT_3_8_3_3_NoLocalSuppressesOnlyOwnMessages) {
  const std::string topic = Unique("nolocal/");
  const std::string marker = Unique("marker/");
  auto client = Connected(Unique("self"));
  client->Subscribe(topic, 1, Options(true, false, kSendRetained));
  client->Subscribe(marker, 1);
  client->Publish(topic, "own", 1);
  client->Publish(marker, "marker", 1);  // same publisher: after "own" if that came
  auto first = client->Next();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->get_payload_str(), "marker") << "no local did not suppress the client's own message";
  RawPublish(topic, "someone else's", 1);
  auto other = client->Next();
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->get_payload_str(), "someone else's");
}

// Shared subscriptions: each message to exactly one member of the group.
TEST_F(PahoV5, MQTT_4_8_2_3_SharedSubscriptionSpreadsEachMessageToOneMember) {
  const std::string topic = Unique("shared/");
  auto members = ConnectTogether({Unique("m0"), Unique("m1"), Unique("m2")});
  members[0]->Subscribe("$share/workers/" + topic, 1);
  members[1]->Subscribe("$share/workers/" + topic, 1);
  members[2]->Subscribe("$share/workers/" + topic, 0);  // granted QoS 0
  auto everything = SubscribeRaw(Unique("all"), topic, 1);
  constexpr int kCount = 30;
  for (int i = 0; i < kCount; ++i) RawPublish(topic, std::to_string(i), 1);

  std::map<std::string, int> deliveries;
  std::vector<int> per_member(members.size(), 0);
  const auto deadline = Clock::now() + seconds(10);
  int total = 0;
  while (total < kCount && Clock::now() < deadline) {
    for (size_t m = 0; m < members.size(); ++m) {
      while (auto message = members[m]->Next(milliseconds(20))) {
        ++deliveries[message->get_payload_str()];
        ++per_member[m];
        ++total;
        if (m == 2) {
          EXPECT_EQ(message->get_qos(), 0) << "the member's granted QoS was not respected";
        }
      }
    }
  }
  EXPECT_EQ(total, kCount);
  for (int i = 0; i < kCount; ++i) EXPECT_EQ(deliveries[std::to_string(i)], 1) << "message " << i;
  for (size_t m = 0; m < members.size(); ++m) EXPECT_GT(per_member[m], 0) << "member " << m << " got nothing";
  for (int i = 0; i < kCount; ++i) {
    auto copy = ReceivePublish(*everything);
    ASSERT_TRUE(copy.has_value()) << "the non-shared subscriber missed message " << i;
    EXPECT_EQ(copy->payload, std::to_string(i));
  }
}

TEST_F(PahoV5, MQTT_3_3_2_3_MQTT_4_6_0_5_MQTT_4_6_0_6_WildcardDeliveriesKeepTopicAndOrder) {
  const std::string base = Unique("ordered");
  auto client = Connected(Unique("self"));
  client->Subscribe(base + "/+/x", 1);
  constexpr int kCount = 20;
  std::vector<paho::delivery_token_ptr> tokens;
  for (int i = 0; i < kCount; ++i) {
    const std::string topic = base + (i % 2 ? "/odd/x" : "/even/x");
    tokens.push_back(client->client().publish(paho::message::create(topic, std::to_string(i), 1, false)));
  }
  for (auto& token : tokens) ASSERT_TRUE(token->wait_for(PahoClient::kWait));
  auto messages = client->Take(kCount);
  ASSERT_EQ(messages.size(), static_cast<size_t>(kCount));
  for (int i = 0; i < kCount; ++i) {
    EXPECT_EQ(messages[i]->get_payload_str(), std::to_string(i));
    EXPECT_EQ(messages[i]->get_topic(), base + (i % 2 ? "/odd/x" : "/even/x"));
  }
}

TEST_F(PahoV5, MQTT_4_7_2_1_WildcardFiltersDoNotMatchDollarTopics) {
  RestartBroker({"--sys-interval", "1", "--shards", "1"});
  auto clients = ConnectTogether({Unique("wild"), Unique("sys")});
  auto& wildcard = clients[0];
  auto& sys = clients[1];
  wildcard->Subscribe("#", 0);
  wildcard->Subscribe("+/broker/uptime", 0);
  sys->Subscribe("$SYS/broker/uptime", 0);
  paho::const_message_ptr live;
  for (int i = 0; i < 10 && !live; ++i) {
    auto message = sys->Next();
    ASSERT_NE(message, nullptr) << "no $SYS/broker/uptime";
    if (!message->is_retained()) live = message;
  }
  ASSERT_NE(live, nullptr);
  wildcard->Publish(Unique("marker/"), "marker", 0);
  auto first = wildcard->Next();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->get_payload_str(), "marker") << "a wildcard filter matched " << first->get_topic();
}

TEST_F(PahoV5, SharedSubscriptionGetsNoRetainedMessageOnSubscribe) {
  const std::string topic = Unique("shared/");
  const std::string marker = Unique("marker/");
  RawPublish(topic, "retained", 1, true);
  RawPublish(marker, "marker", 1, true);
  auto client = Connected(Unique("member"));
  client->Subscribe("$share/g/" + topic, 1);
  client->Subscribe(marker, 1);
  auto first = client->Next();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->get_topic(), marker);
}

TEST_F(PahoV5, MQTT_3_3_2_4_MQTT_3_3_2_15_MQTT_3_3_2_16_MQTT_3_3_2_17_MQTT_3_3_2_18_MQTT_3_3_2_20_PropertiesForwarded) {
  const std::string topic = Unique("props/");
  auto client = Connected(Unique("self"));
  client->Subscribe(topic, 1);
  const std::string correlation("\x00\x01\xff binary", 10);
  client->Publish(topic, "{\"x\":1}", 1, false,
                  Props({property(property::PAYLOAD_FORMAT_INDICATOR, 1),
                         property(property::CONTENT_TYPE, "application/json"),
                         property(property::RESPONSE_TOPIC, "replies/here"),
                         property(property::CORRELATION_DATA, correlation),
                         property(property::USER_PROPERTY, "z", "last letter"),
                         property(property::USER_PROPERTY, "a", "first letter"),
                         property(property::USER_PROPERTY, "z", "again")}));
  auto message = client->Next();
  ASSERT_NE(message, nullptr);
  const auto& p = message->get_properties();
  EXPECT_EQ(paho::get<uint8_t>(p, property::PAYLOAD_FORMAT_INDICATOR, 0), 1);
  EXPECT_EQ(paho::get<std::string>(p, property::CONTENT_TYPE, 0), "application/json");
  EXPECT_EQ(paho::get<std::string>(p, property::RESPONSE_TOPIC, 0), "replies/here");
  EXPECT_EQ(paho::get<std::string>(p, property::CORRELATION_DATA, 0), correlation);
  EXPECT_EQ(UserProperties(p), (std::vector<std::string>{"z=last letter", "a=first letter", "z=again"}));
}

TEST_F(PahoV5, MQTT_3_1_2_26_MQTT_3_3_2_12_TopicAliasesBothWaysWithPaho) {
  const std::string topic = Unique("aliased/");
  auto client = Client(Unique("aliaser"));
  PahoClient::ConnectOptions options;
  options.properties = Props({property(property::TOPIC_ALIAS_MAXIMUM, 10)});
  const auto connack = client->Connect(options);
  ASSERT_GT(paho::get<uint16_t>(connack.get_properties(), property::TOPIC_ALIAS_MAXIMUM, 0), 0);
  client->Subscribe(topic, 1);
  // Paho sends the alias the application sets; the first PUBLISH maps it.
  // Paho hands aliases from the server to the application unresolved (an
  // empty topic and the Topic Alias property), so the test resolves them.
  std::map<uint16_t, std::string> aliases;
  client->Publish(topic, "maps alias 1", 1, false, Props({property(property::TOPIC_ALIAS, 1)}));
  for (int i = 0; i < 3; ++i) {
    auto message = client->Next();
    ASSERT_NE(message, nullptr);
    std::string received = message->get_topic();
    const auto& p = message->get_properties();
    if (p.contains(property::TOPIC_ALIAS)) {
      const auto alias = paho::get<uint16_t>(p, property::TOPIC_ALIAS, 0);
      EXPECT_GE(alias, 1);
      EXPECT_LE(alias, 10) << "alias above the Topic Alias Maximum Paho sent";
      if (received.empty()) {
        ASSERT_TRUE(aliases.count(alias)) << "alias " << alias << " used before it was set";
        received = aliases[alias];
      } else {
        aliases[alias] = received;
      }
    }
    EXPECT_EQ(received, topic);
    if (i < 2) client->Publish(topic, "again", 1, false, Props({property(property::TOPIC_ALIAS, 1)}));
  }
}

TEST_F(PahoV5, RequestResponseWithResponseInformation) {
  auto responder = Client(Unique("responder"));
  auto requester = Client(Unique("requester"));
  // The requester asks for response information: a topic prefix it may use.
  PahoClient::ConnectOptions options;
  options.properties = Props({property(property::REQUEST_RESPONSE_INFORMATION, 1)});
  auto responder_token = responder->StartConnect({});
  const auto connack = PahoClient::FinishConnect(requester->StartConnect(options));
  PahoClient::FinishConnect(responder_token);
  ASSERT_TRUE(connack.get_properties().contains(property::RESPONSE_INFORMATION));
  const std::string reply_topic =
      paho::get<std::string>(connack.get_properties(), property::RESPONSE_INFORMATION, 0) + "/answers";
  const std::string service = Unique("service/");
  responder->Subscribe(service, 1);
  requester->Subscribe(reply_topic, 1);
  requester->Publish(service, "what time is it", 1, false,
                     Props({property(property::RESPONSE_TOPIC, reply_topic),
                            property(property::CORRELATION_DATA, "req-42")}));
  auto request = responder->Next();
  ASSERT_NE(request, nullptr);
  const auto& asked = request->get_properties();
  const std::string respond_to = paho::get<std::string>(asked, property::RESPONSE_TOPIC, 0);
  EXPECT_EQ(respond_to, reply_topic);
  responder->Publish(respond_to, "noon", 1, false,
                     Props({property(property::CORRELATION_DATA,
                                     paho::get<std::string>(asked, property::CORRELATION_DATA, 0))}));
  auto reply = requester->Next();
  ASSERT_NE(reply, nullptr);
  EXPECT_EQ(reply->get_payload_str(), "noon");
  EXPECT_EQ(paho::get<std::string>(reply->get_properties(), property::CORRELATION_DATA, 0), "req-42");
}

TEST_F(PahoV5, MQTT_3_3_2_5_MQTT_3_3_2_6_ExpiredMessagesDroppedRemainingIntervalSent) {
  const std::string id = Unique("away");
  const std::string topic = Unique("expiry/");
  {
    auto client = Client(id);
    PahoClient::ConnectOptions options;
    options.clean = false;
    options.properties = Props({property(property::SESSION_EXPIRY_INTERVAL, 300)});
    client->Connect(options);
    client->Subscribe(topic, 1);
    client->Disconnect();
  }
  TakeOffline(id, mqtt::ProtocolVersion::kV5);
  mqtt::Properties short_lived;
  short_lived.message_expiry_interval = 1;
  mqtt::Properties long_lived;
  long_lived.message_expiry_interval = 60;
  RawPublish(topic, "expires", 1, false, short_lived);
  RawPublish(topic, "lasts", 1, false, long_lived);
  WaitBrokerSeconds(2);
  auto client = Client(id);
  PahoClient::ConnectOptions options;
  options.clean = false;
  options.properties = Props({property(property::SESSION_EXPIRY_INTERVAL, 300)});
  ASSERT_TRUE(client->Connect(options).is_session_present());
  auto message = client->Next();
  ASSERT_NE(message, nullptr);
  EXPECT_EQ(message->get_payload_str(), "lasts") << "an expired message was delivered";
  const auto remaining = paho::get<uint32_t>(message->get_properties(), property::MESSAGE_EXPIRY_INTERVAL, 0);
  EXPECT_LE(remaining, 58u) << "the expiry interval did not count the time waited";
  EXPECT_GE(remaining, 30u);
}

TEST_F(PahoV5, MQTT_3_11_3_2_MQTT_3_10_4_5_UnsubackReasonCodes) {
  const std::string topic = Unique("unsub/");
  auto client = Connected(Unique("sub"));
  client->Subscribe(topic, 1);
  client->Subscribe(topic + "/2", 1);
  EXPECT_EQ(client->Unsubscribe({topic, topic + "/2"}),
            (std::vector<paho::ReasonCode>{paho::ReasonCode::SUCCESS, paho::ReasonCode::SUCCESS}));
  // Paho reports a reason other than Success as a failed request.
  try {
    client->Unsubscribe({topic});
    ADD_FAILURE() << "UNSUBACK said Success for a subscription that no longer exists";
  } catch (const paho::exception& error) {
    EXPECT_EQ(error.get_reason_code(), paho::ReasonCode::NO_SUBSCRIPTION_FOUND);
  }
}

TEST_F(PahoV5, MQTT_3_8_4_7_MQTT_3_9_3_2_SubackGrantsRequestedQos) {
  auto client = Connected(Unique("sub"));
  EXPECT_EQ(client->Subscribe(Unique("g0/"), 0), (std::vector<paho::ReasonCode>{paho::ReasonCode::GRANTED_QOS_0}));
  EXPECT_EQ(client->Subscribe(Unique("g1/"), 1), (std::vector<paho::ReasonCode>{paho::ReasonCode::GRANTED_QOS_1}));
  EXPECT_EQ(client->Subscribe(Unique("g2/"), 2), (std::vector<paho::ReasonCode>{paho::ReasonCode::GRANTED_QOS_2}));
}

}  // namespace
}  // namespace estuary::conformance
