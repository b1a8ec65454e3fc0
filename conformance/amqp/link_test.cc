// AMQP 1.0 links against a real estuaryd: sending pre-settled and
// unsettled, receiving with credit and drain, outcomes, backpressure,
// wildcards, shared groups, durable and dynamic sources, link errors and
// multi-frame messages.
#include <proton/message.hpp>

#include <set>
#include <sstream>

#include "conformance/amqp/amqp_fixture.h"

namespace estuary::conformance {
namespace {

using Kind = AmqpEvent::Kind;
using Outcome = AmqpClient::Outcome;
using std::chrono::milliseconds;

class AmqpLinkTest : public AmqpFixture {};

// §2.7.5 transfer settled, §3.4 delivery state: a pre-settled message is
// delivered at most once, with no outcome sent back.
TEST_F(AmqpLinkTest, PresettledSendIsDelivered) {
  auto client = Connect({.container_id = Unique("presettled")});
  const std::string topic = Unique("ps/");
  Receive(*client, "r", topic, {.presettled = true});
  Sender(*client, "s", topic, {.presettled = true});
  client->Send("s", "", "fire and forget");
  auto message = client->Wait(Kind::kMessage, "r");
  ASSERT_TRUE(message.has_value());
  EXPECT_EQ(Body(*message), "fire and forget");
  EXPECT_TRUE(message->settled) << "a pre-settled receiver gets settled transfers";
  EXPECT_EQ(client->Count(Kind::kAccepted, "s"), 0u);
}

// §3.4.2 accepted, §2.6.12 settlement: an unsettled transfer is accepted
// once the broker has it, and reaches an unsettled receiver unsettled.
TEST_F(AmqpLinkTest, UnsettledSendIsAcceptedAndDeliveredUnsettled) {
  auto client = Connect({.container_id = Unique("unsettled")});
  const std::string topic = Unique("us/");
  Receive(*client, "r", topic);
  Sender(*client, "s", topic);
  client->Send("s", "", "at least once");
  ASSERT_TRUE(client->Wait(Kind::kAccepted, "s")) << "the broker never accepted the transfer";
  auto message = client->Wait(Kind::kMessage, "r");
  ASSERT_TRUE(message.has_value());
  EXPECT_EQ(Body(*message), "at least once");
  EXPECT_FALSE(message->settled);
  client->Settle(message->delivery, Outcome::kAccept);
}

// §2.6.7 flow control: nothing is sent without credit; credit N lets
// exactly N through; a drain sends what is queued and then uses up the
// rest of the credit (§2.7.4 drain).
TEST_F(AmqpLinkTest, CreditBoundsDeliveriesAndDrainCompletes) {
  auto client = Connect({.container_id = Unique("credit")});
  const std::string topic = Unique("cr/");
  Receive(*client, "r", topic, {.credit = 0});
  Sender(*client, "s", topic);
  for (int i = 0; i < 5; ++i) client->Send("s", "", "m" + std::to_string(i));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(client->Wait(Kind::kAccepted, "s"));
  EXPECT_FALSE(client->Wait(Kind::kMessage, "r", milliseconds(300)).has_value()) << "a message without credit";
  client->AddCredit("r", 2);
  auto two = client->TakeMessages("r", 2);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(Body(two[0]), "m0");
  EXPECT_EQ(Body(two[1]), "m1");
  EXPECT_FALSE(client->Wait(Kind::kMessage, "r", milliseconds(300)).has_value()) << "more than the credit";
  client->AddCredit("r", 10);
  client->Drain("r");
  auto rest = client->TakeMessages("r", 3);
  ASSERT_EQ(rest.size(), 3u);
  EXPECT_EQ(Body(rest[2]), "m4");
  EXPECT_TRUE(client->Wait(Kind::kDrainFinished, "r")) << "the drain never completed";
  // An empty queue: the drain completes at once.
  client->AddCredit("r", 5);
  client->Drain("r");
  EXPECT_TRUE(client->Wait(Kind::kDrainFinished, "r")) << "a drain with nothing queued never completed";
  for (auto& event : two) client->Settle(event.delivery, Outcome::kAccept);
  for (auto& event : rest) client->Settle(event.delivery, Outcome::kAccept);
}

// §3.4.4 released, §3.4.5 modified, §3.4.3 rejected: released is sent
// again, rejected is not, modified undeliverable-here is not.
TEST_F(AmqpLinkTest, ReleasedIsRedeliveredRejectedIsNot) {
  auto client = Connect({.container_id = Unique("outcomes")});
  const std::string topic = Unique("oc/");
  Receive(*client, "r", topic, {.credit = 1});
  Sender(*client, "s", topic);
  client->Send("s", "", "bounce");
  auto first = client->Wait(Kind::kMessage, "r");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->delivery_count, 0u);
  client->Settle(first->delivery, Outcome::kRelease);
  client->AddCredit("r", 1);
  auto again = client->Wait(Kind::kMessage, "r");
  ASSERT_TRUE(again.has_value()) << "a released message was not sent again";
  EXPECT_EQ(Body(*again), "bounce");
  EXPECT_GE(again->delivery_count, 1u) << "delivery-count counts the earlier attempt (§3.2.1)";
  EXPECT_FALSE(again->message.first_acquirer()) << "a redelivery is not to the first acquirer (§3.2.1)";
  client->Settle(again->delivery, Outcome::kReject);
  client->AddCredit("r", 1);
  EXPECT_FALSE(client->Wait(Kind::kMessage, "r", milliseconds(300)).has_value()) << "a rejected message came back";
}

// §3.4.3 rejected, §3.2.4 properties `to`: on a link with no target
// address (an anonymous relay) each message goes to its `to`; one without
// a `to` cannot be routed and is rejected, not accepted.
TEST_F(AmqpLinkTest, MessageWithoutATopicIsRejected) {
  auto client = Connect({.container_id = Unique("relay")});
  const std::string topic = Unique("relay/");
  Receive(*client, "r", topic);
  Sender(*client, "relay", "");
  client->Send("relay", "", "nowhere");
  auto rejected = client->Wait(Kind::kRejected, "relay");
  ASSERT_TRUE(rejected.has_value()) << "no rejection";
  EXPECT_EQ(rejected->condition, "amqp:invalid-field") << rejected->description;
  client->Send("relay", topic, "somewhere");  // the relay sends to `to`
  EXPECT_TRUE(client->Wait(Kind::kAccepted, "relay"));
  auto message = client->Wait(Kind::kMessage, "r");
  ASSERT_TRUE(message.has_value());
  EXPECT_EQ(Body(*message), "somewhere");
}

// §3.5.3 source address = an MQTT topic filter: '+' one level, '#' many.
TEST_F(AmqpLinkTest, SourceAddressesAreTopicFiltersWithWildcards) {
  auto client = Connect({.container_id = Unique("wild")});
  const std::string root = Unique("w");
  Receive(*client, "plus", root + "/+/temp", {.presettled = true});
  Receive(*client, "hash", root + "/#", {.presettled = true});
  Sender(*client, "s", root + "/room1/temp", {.presettled = true});
  Sender(*client, "deep", root + "/room1/a/temp", {.presettled = true});
  client->Send("s", "", "one");
  client->Send("deep", "", "two");
  auto hash = client->TakeMessages("hash", 2);
  ASSERT_EQ(hash.size(), 2u);
  auto plus = client->TakeMessages("plus", 1);
  ASSERT_EQ(plus.size(), 1u);
  EXPECT_EQ(Body(plus[0]), "one");
  EXPECT_FALSE(client->Wait(Kind::kMessage, "plus", milliseconds(300)).has_value()) << "'+' matched two levels";
}

// Competing receivers (§3.5.3 distribution-mode move, as MQTT $share):
// each message of a shared group goes to one member.
TEST_F(AmqpLinkTest, SharedGroupSplitsMessagesBetweenMembers) {
  auto a = Connect({.container_id = Unique("share-a")});
  auto b = Connect({.container_id = Unique("share-b")});
  const std::string topic = Unique("sh/");
  Receive(*a, "r", "$share/g/" + topic);
  Receive(*b, "r", "$share/g/" + topic);
  Sender(*a, "s", topic);
  for (int i = 0; i < 10; ++i) a->Send("s", "", std::to_string(i));
  std::set<std::string> seen;
  size_t from_a = 0;
  size_t from_b = 0;
  for (int i = 0; i < 10 && seen.size() < 10; ++i) {
    for (auto& event : a->TakeMessages("r", 10, milliseconds(200))) {
      seen.insert(Body(event));
      ++from_a;
      a->Settle(event.delivery, Outcome::kAccept);
    }
    for (auto& event : b->TakeMessages("r", 10, milliseconds(200))) {
      seen.insert(Body(event));
      ++from_b;
      b->Settle(event.delivery, Outcome::kAccept);
    }
  }
  EXPECT_EQ(seen.size(), 10u);
  EXPECT_EQ(from_a + from_b, 10u) << "a message went to two members";
  EXPECT_GT(from_a, 0u);
  EXPECT_GT(from_b, 0u);
}

// §3.5.3 durable, §3.5.6 expiry-policy never, §2.6.3 detach without
// closing: messages published while a durable link is detached wait for
// it; the same container-id and link name get them on reattach, and a
// delivery left unsettled at detach is sent again.
TEST_F(AmqpLinkTest, DurableSubscriptionSurvivesDetachAndReattach) {
  const std::string container = Unique("durable");
  const std::string topic = Unique("dur/");
  auto publisher = Connect({.container_id = Unique("dur-pub")});
  Sender(*publisher, "s", topic);
  {
    auto client = Connect({.container_id = container});
    Receive(*client, "sub", topic, {.durable = true, .credit = 1});
    publisher->Send("s", "", "before");
    ASSERT_TRUE(publisher->Wait(Kind::kAccepted, "s"));
    auto unsettled = client->Wait(Kind::kMessage, "sub");
    ASSERT_TRUE(unsettled.has_value());
    client->Detach("sub");  // left unsettled
    ASSERT_TRUE(client->Wait(Kind::kLinkClose, "sub"));
    client->Close();
    ASSERT_TRUE(client->Wait(Kind::kConnectionClose));
  }
  for (int i = 0; i < 3; ++i) publisher->Send("s", "", "while away " + std::to_string(i));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(publisher->Wait(Kind::kAccepted, "s"));
  auto client = Connect({.container_id = container});
  Receive(*client, "sub", topic, {.durable = true, .credit = 10});
  auto messages = client->TakeMessages("sub", 4);
  ASSERT_EQ(messages.size(), 4u);
  EXPECT_EQ(Body(messages[0]), "before");
  EXPECT_GE(messages[0].delivery_count, 1u);
  EXPECT_EQ(Body(messages[1]), "while away 0");
  EXPECT_EQ(Body(messages[3]), "while away 2");
  for (auto& event : messages) client->Settle(event.delivery, Outcome::kAccept);
  // Closing (not detaching) ends the subscription.
  client->CloseLink("sub");
  ASSERT_TRUE(client->Wait(Kind::kLinkClose, "sub"));
  publisher->Send("s", "", "after close");
  ASSERT_TRUE(publisher->Wait(Kind::kAccepted, "s"));
  Receive(*client, "sub", topic, {.durable = true, .credit = 10});
  EXPECT_FALSE(client->Wait(Kind::kMessage, "sub", milliseconds(300)).has_value())
      << "a closed durable subscription kept its queue";
}

// §3.5.3 dynamic: a receiver asking for a dynamic source gets an address,
// and messages sent to it arrive (request/reply).
TEST_F(AmqpLinkTest, DynamicSourceGetsATemporaryAddress) {
  auto client = Connect({.container_id = Unique("dynamic")});
  client->OpenReceiver("reply", "", {.dynamic = true});
  auto opened = client->Wait(Kind::kReceiverOpen, "reply");
  ASSERT_TRUE(opened.has_value());
  ASSERT_FALSE(opened->address.empty()) << "no address assigned to the dynamic source";
  auto other = Connect({.container_id = Unique("responder")});
  Sender(*other, "s", opened->address);
  other->Send("s", "", "the reply");
  auto message = client->Wait(Kind::kMessage, "reply");
  ASSERT_TRUE(message.has_value());
  EXPECT_EQ(Body(*message), "the reply");
}

// §2.8.15 amqp:invalid-field: a source address that is not a topic filter
// (or no address at all) is refused with the link's detach.
TEST_F(AmqpLinkTest, InvalidAddressesAreRefusedWithInvalidField) {
  auto client = Connect({.container_id = Unique("bad-address")});
  client->OpenReceiver("bad", "a/#/b");
  auto closed = client->Wait(Kind::kLinkClose, "bad");
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->condition, "amqp:invalid-field");
  client->OpenSender("bad-target", "a/+/b");
  closed = client->Wait(Kind::kLinkClose, "bad-target");
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->condition, "amqp:invalid-field");
  Receive(*client, "good", Unique("ok/"));  // the connection is fine
}

// §2.8.3 rcv-settle-mode, §2.7.3 attach (issue 26): rcv-settle-mode second
// is honoured both ways. A client sender asking for it gets our attach in
// mode second; a client receiver in mode second is served (we settle when
// its outcome arrives, it settles last). docs/amqp.md "Exactly-once links".
TEST_F(AmqpLinkTest, ExactlyOnceSendersAndReceiversGetModeSecond) {
  auto client = Connect({.container_id = Unique("exactly-once")});
  const std::string topic = Unique("eo/");
  client->OpenSender("s", topic, {.exactly_once = true});
  auto attached = client->Wait(Kind::kSenderOpen, "s");
  ASSERT_TRUE(attached.has_value());
  EXPECT_EQ(attached->rcv_settle_mode, 1) << "mode second is kept for senders (not downgraded to first)";
  client->OpenReceiver("r", topic, {.exactly_once = true});
  auto receiving = client->Wait(Kind::kReceiverOpen, "r");
  ASSERT_TRUE(receiving.has_value());
  EXPECT_EQ(receiving->rcv_settle_mode, 1) << "mode second is served for receivers";
  Sender(*client, "plain", topic);
  client->Send("plain", "", "settled second");
  auto message = client->Wait(Kind::kMessage, "r");
  ASSERT_TRUE(message.has_value());
  EXPECT_EQ(Body(*message), "settled second");
  client->Settle(message->delivery, Outcome::kAccept);
}

// §2.8.15 amqp:resource-limit-exceeded: links over the per-connection limit.
TEST_F(AmqpLinkTest, LinksOverTheLimitAreRefused) {
  RestartBroker({"--amqp-max-links", "2"});
  auto client = Connect({.container_id = Unique("links")});
  Receive(*client, "1", Unique("l/"));
  Receive(*client, "2", Unique("l/"));
  client->OpenReceiver("3", Unique("l/"));
  auto closed = client->Wait(Kind::kLinkClose, "3");
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->condition, "amqp:resource-limit-exceeded");
}

// §2.7.5 transfer (more), §2.6.14 multi-frame deliveries: a message far
// larger than max-frame-size arrives whole; §2.7.3 max-message-size and
// amqp:link:message-size-exceeded (§2.8.17) above the node's limit.
TEST_F(AmqpLinkTest, LargeMessagesSpanFramesAndOversizedOnesEndTheLink) {
  auto client = Connect({.container_id = Unique("large"), .max_frame_size = 4096});
  const std::string topic = Unique("big/");
  Receive(*client, "r", topic);
  Sender(*client, "s", topic);
  std::string body(512 * 1024, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>('a' + i % 26);
  client->Send("s", "", body);
  ASSERT_TRUE(client->Wait(Kind::kAccepted, "s"));
  auto message = client->Wait(Kind::kMessage, "r");
  ASSERT_TRUE(message.has_value());
  EXPECT_EQ(Body(*message), body);
  Sender(*client, "huge", topic);
  client->Send("huge", "", std::string(3 * 1024 * 1024, 'x'));  // the node's default limit is 1 MiB
  auto closed = client->Wait(Kind::kLinkClose, "huge", std::chrono::seconds(10));
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->condition, "amqp:link:message-size-exceeded");
  EXPECT_FALSE(client->Wait(Kind::kMessage, "r", milliseconds(300)).has_value());
}

// §2.6.7 flow control as backpressure: a receiver that grants no credit
// makes the broker stop crediting the publisher once the receiver's queue
// is congested, instead of queueing without bound or dropping accepted
// messages; once the receiver takes them, every message arrives in order.
TEST_F(AmqpLinkTest, SlowReceiverPausesThePublisherWithoutLoss) {
  auto consumer = Connect({.container_id = Unique("slow")});
  auto producer = Connect({.container_id = Unique("fast")});
  const std::string topic = Unique("slow/");
  Receive(*consumer, "r", topic, {.credit = 0});
  Sender(*producer, "s", topic);
  constexpr int kCount = 3000;  // three times the session queue limit (1000)
  for (int i = 0; i < kCount; ++i) producer->Send("s", "", std::to_string(i));
  // Accepts stop short of all of them while the consumer holds no credit.
  size_t accepted = 0;
  while (producer->Wait(Kind::kAccepted, "s", milliseconds(500))) ++accepted;
  EXPECT_LT(accepted, static_cast<size_t>(kCount)) << "the publisher was never paused";
  EXPECT_GT(accepted, 0u);
  auto metrics = testing::HttpGet(broker().host(), broker().admin_port(), "/metrics");
  ASSERT_EQ(metrics.status, 200);
  // Bounded: the broker holds at most the queue limit plus the forwards in flight.
  size_t queued = 0;
  std::istringstream lines(metrics.body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("estuary_queued_messages{", 0) == 0) queued += std::stoul(line.substr(line.rfind(' ') + 1));
  }
  EXPECT_LE(queued, 1000u + 128u) << metrics.body;
  // Now take everything: nothing lost, in order.
  int expected = 0;
  while (expected < kCount) {
    consumer->AddCredit("r", 500);
    auto batch = consumer->TakeMessages("r", 500, std::chrono::seconds(10));
    ASSERT_FALSE(batch.empty()) << "stalled at " << expected;
    for (auto& event : batch) {
      ASSERT_EQ(Body(event), std::to_string(expected)) << "lost or reordered";
      ++expected;
      consumer->Settle(event.delivery, Outcome::kAccept);
    }
  }
  while (accepted < static_cast<size_t>(kCount) && producer->Wait(Kind::kAccepted, "s")) ++accepted;
  EXPECT_EQ(accepted, static_cast<size_t>(kCount));
}

}  // namespace
}  // namespace estuary::conformance
