// Exactly-once links (AMQP 1.0 §2.7.3 rcv-settle-mode second, §3.4, §3.4.6;
// docs/amqp.md "Exactly-once links"), issue 26 point 1: a client sender in
// mode second, and a client receiver in mode second, against one
// AmqpConnection and its broker on simulated time.
#include <proton/delivery.h>
#include <proton/link.h>

#include "frontends/amqp/session/connection_test_fixture.h"

namespace estuary::amqp {
namespace {

class AmqpExactlyOnceTest : public testing_support::AmqpConnectionTest {
 protected:
  AmqpExactlyOnceTest() { ledger_ = std::make_shared<InboundLedger>(); }

  // A client sender in rcv-settle-mode second that settles only when told.
  proton::sender OpenSecondModeSender(const std::string& name) {
    proton::sender sender =
        client_.connection().open_sender("t/a", proton::sender_options().name(name).auto_settle(false));
    pn_link_set_rcv_settle_mode(CObject::Of(sender), PN_RCV_SECOND);  // before the attach is written
    Pump();
    return sender;
  }
  proton::receiver OpenReceiver(bool second) {
    // Mode second: our handler gives outcomes itself (auto-accept would settle too).
    proton::receiver receiver = client_.connection().open_receiver(
        "t/#", proton::receiver_options().name("r").credit_window(10).auto_accept(!second));
    if (second) pn_link_set_rcv_settle_mode(CObject::Of(receiver), PN_RCV_SECOND);
    Pump();
    return receiver;
  }
  static proton::tracker Send(proton::sender& sender, const std::string& body, const std::string& tag) {
    proton::message message;
    message.body(proton::binary(body));
    return sender.send(message, proton::binary(tag));
  }
  // The server settled the transfer (its disposition said settled).
  static bool SettledByServer(const proton::tracker& tracker) { return pn_delivery_settled(CObject::Of(tracker)); }
};

TEST_F(AmqpExactlyOnceTest, SecondModeSenderKeepsTheModeAndIsAnsweredAcceptedUntilItSettles) {  // §2.7.3, §3.4
  Start();
  OpenReceiver(false);
  proton::sender sender = OpenSecondModeSender("s");
  ASSERT_EQ(handler_.senders_open, 1);
  EXPECT_EQ(pn_link_remote_rcv_settle_mode(CObject::Of(sender)), PN_RCV_SECOND) << "not downgraded to first";
  proton::tracker tracker = Send(sender, "once", "tag-1");
  Pump();
  ASSERT_EQ(handler_.accepted, 1);
  EXPECT_FALSE(SettledByServer(tracker)) << "the receiver settles after the sender in mode second";
  ASSERT_EQ(handler_.bodies.size(), 1u);
  EXPECT_EQ(ledger_->Kept("unit-client", "s"), 1u) << "remembered until the client settles";
  tracker.settle();
  Pump();
  EXPECT_EQ(ledger_->Kept("unit-client", "s"), 0u) << "forgotten once the client settled";
  EXPECT_EQ(ledger_->links(), 1u);
}

TEST_F(AmqpExactlyOnceTest, AKeptTagSentAgainOnTheRecoveredLinkIsAnsweredNotPublished) {  // §3.4.6, §2.6.13
  Start();
  OpenReceiver(false);
  proton::sender sender = OpenSecondModeSender("s");
  Send(sender, "once", "tag-1");
  Pump();
  ASSERT_EQ(handler_.accepted, 1);
  sender.detach();  // suspended, not closed: the link may be recovered
  Pump();
  EXPECT_EQ(ledger_->suspended(), 1u);
  EXPECT_EQ(ledger_->stats().suspended.load(), 1u) << "what /metrics shows";
  EXPECT_EQ(ledger_->stats().kept_tags.load(), 1u);
  proton::sender recovered = OpenSecondModeSender("s");
  proton::tracker again = Send(recovered, "once", "tag-1");
  Pump();
  EXPECT_EQ(handler_.accepted, 2) << "answered with the kept outcome";
  EXPECT_FALSE(SettledByServer(again));
  EXPECT_EQ(handler_.bodies.size(), 1u) << "published once";
  EXPECT_EQ(ledger_->resends_answered(), 1u);
  EXPECT_EQ(metrics_.messages_in.load(), 1u);
  // A new tag on the recovered link is a new message.
  Send(recovered, "twice", "tag-2");
  Pump();
  EXPECT_EQ(handler_.bodies.size(), 2u);
  again.settle();
  Pump();
  EXPECT_EQ(ledger_->Kept("unit-client", "s"), 1u) << "tag-2 still unsettled by the client";
  EXPECT_EQ(ledger_->stats().kept_tags.load(), 1u);
  EXPECT_EQ(ledger_->stats().links.load(), 1u);
  EXPECT_EQ(ledger_->stats().suspended.load(), 0u);
  EXPECT_EQ(ledger_->stats().resends_answered.load(), 1u);
}

TEST_F(AmqpExactlyOnceTest, ClosingTheLinkEndsItsKeptTags) {  // §2.6.6
  Start();
  OpenReceiver(false);
  proton::sender sender = OpenSecondModeSender("s");
  Send(sender, "one", "tag-1");
  Pump();
  sender.close();
  Pump();
  EXPECT_EQ(ledger_->links(), 0u);
  proton::sender fresh = OpenSecondModeSender("s");
  Send(fresh, "two", "tag-1");
  Pump();
  EXPECT_EQ(handler_.bodies.size(), 2u) << "a new link's tag is a new delivery";
}

TEST_F(AmqpExactlyOnceTest, LiveUnsettledDeliveriesPastTheLimitEndTheLink) {  // bounded memory
  ledger_ = std::make_shared<InboundLedger>(/*max_per_link=*/2, /*max_suspended=*/16);
  Start();
  OpenReceiver(false);
  proton::sender sender = OpenSecondModeSender("s");
  Send(sender, "a", "t1");
  Send(sender, "b", "t2");
  Send(sender, "c", "t3");
  Pump();
  EXPECT_EQ(handler_.bodies.size(), 2u);
  ASSERT_EQ(handler_.link_errors.size(), 1u);
  EXPECT_EQ(handler_.link_errors[0], "amqp:resource-limit-exceeded");
  EXPECT_EQ(ledger_->links(), 0u) << "a link we ended keeps nothing";
}

TEST_F(AmqpExactlyOnceTest, SuspendedLinksPastTheBoundAreForgottenOldestFirst) {  // bounded memory
  ledger_ = std::make_shared<InboundLedger>(/*max_per_link=*/16, /*max_suspended=*/1);
  Start();
  OpenReceiver(false);
  proton::sender first = OpenSecondModeSender("s1");
  proton::sender second = OpenSecondModeSender("s2");
  Send(first, "a", "t1");
  Send(second, "b", "t1");
  Pump();
  first.detach();
  Pump();
  second.detach();
  Pump();
  EXPECT_EQ(ledger_->forgotten_links(), 1u);
  EXPECT_EQ(ledger_->Kept("unit-client", "s1"), 0u);
  EXPECT_EQ(ledger_->Kept("unit-client", "s2"), 1u);
}

TEST_F(AmqpExactlyOnceTest, ModeFirstSendersAreSettledAtOnceAsBefore) {  // §2.7.3
  Start();
  OpenReceiver(false);
  proton::sender sender =
      client_.connection().open_sender("t/a", proton::sender_options().name("s").auto_settle(false));
  Pump();
  EXPECT_EQ(pn_link_remote_rcv_settle_mode(CObject::Of(sender)), PN_RCV_FIRST);
  proton::tracker tracker = Send(sender, "x", "tag-1");
  Pump();
  EXPECT_TRUE(SettledByServer(tracker));
  EXPECT_EQ(ledger_->links(), 0u);
}

// uAMQP asks for mode second and then waits for us to settle first.
TEST_F(AmqpExactlyOnceTest, ASenderThatNeverSettlesIsServedAsModeFirstAfterTheGrace) {  // docs/amqp.md
  AmqpSettings settings;
  settings.client_settle_grace_ms = 500;
  Start(settings);
  OpenReceiver(false);
  proton::sender sender = OpenSecondModeSender("s");
  proton::tracker first = Send(sender, "a", "t1");
  Pump();
  EXPECT_FALSE(SettledByServer(first));
  loop_.AdvanceBy(499);
  Pump();
  EXPECT_FALSE(SettledByServer(first)) << "within the grace";
  loop_.AdvanceBy(1);
  Pump();
  EXPECT_TRUE(SettledByServer(first)) << "settled for a client that does not settle second";
  proton::tracker next = Send(sender, "b", "t2");
  Pump();
  EXPECT_TRUE(SettledByServer(next)) << "and from then on at once";
  EXPECT_EQ(ledger_->Kept("unit-client", "s"), 0u);
  EXPECT_EQ(handler_.bodies.size(), 2u);
}

TEST_F(AmqpExactlyOnceTest, ASenderThatSettlesOnceIsNeverSwitched) {
  AmqpSettings settings;
  settings.client_settle_grace_ms = 500;
  Start(settings);
  OpenReceiver(false);
  proton::sender sender = OpenSecondModeSender("s");
  proton::tracker first = Send(sender, "a", "t1");
  proton::tracker second = Send(sender, "b", "t2");
  Pump();
  first.settle();
  Pump();
  loop_.AdvanceBy(10'000);
  Pump();
  EXPECT_FALSE(SettledByServer(second)) << "a client that settles second is waited for";
  EXPECT_EQ(ledger_->Kept("unit-client", "s"), 1u);
}

TEST_F(AmqpExactlyOnceTest, SecondModeReceiverIsSettledOnlyAfterItsOutcome) {  // §2.7.3, §3.4
  Start();
  handler_.receiver_second = true;
  handler_.defer_outcomes = true;
  proton::receiver receiver = OpenReceiver(true);
  EXPECT_EQ(pn_link_remote_rcv_settle_mode(CObject::Of(receiver)), PN_RCV_SECOND);
  proton::sender sender = OpenSecondModeSender("s");
  Send(sender, "once", "tag-1");
  Pump();
  ASSERT_EQ(handler_.deferred.size(), 1u);
  EXPECT_FALSE(handler_.deferred[0].settled()) << "sent unsettled";
  Pump();
  EXPECT_EQ(handler_.settled_by_server, 0) << "no settlement before the receiver's outcome";
  EXPECT_EQ(metrics_.inflight_messages.load(), 1u);
  pn_delivery_update(CObject::Of(handler_.deferred[0]), PN_ACCEPTED);
  Pump();
  EXPECT_EQ(handler_.settled_by_server, 1) << "settled once the outcome arrived";
  EXPECT_EQ(metrics_.inflight_messages.load(), 0u) << "forgotten after our settlement";
  EXPECT_EQ(handler_.bodies.size(), 1u);
}

// A durable mode-second receiver detached after its outcome was stored but
// before we settled: the reattach settles it, never sends it again (§2.6.13).
TEST_F(AmqpExactlyOnceTest, AStoredOutcomeIsNotSentAgainOnTheRecoveredLink) {  // §2.6.13, §3.4
  Start();
  handler_.receiver_second = true;
  handler_.defer_outcomes = true;
  auto open_durable = [&] {
    proton::source_options source;
    source.address("t/#").durability_mode(proton::source::UNSETTLED_STATE).expiry_policy(proton::source::NEVER);
    proton::receiver receiver = client_.connection().open_receiver(
        "t/#", proton::receiver_options().name("durable").credit_window(10).auto_accept(false).source(source));
    pn_link_set_rcv_settle_mode(CObject::Of(receiver), PN_RCV_SECOND);
    Pump();
    return receiver;
  };
  proton::receiver receiver = open_durable();
  proton::sender sender = OpenSecondModeSender("s");
  Send(sender, "once", "tag-1");
  Pump();
  ASSERT_EQ(handler_.bodies.size(), 1u);
  receiver.detach();
  Pump();
  // What the outcome's arrival does before the settlement (SettleWhenStored),
  // as if the link went between the store's write and our settle.
  core::Session* session = broker_.FindSession(DurableSessionId("unit-client", "durable"));
  ASSERT_NE(session, nullptr);
  ASSERT_EQ(session->inflight().size(), 1u);
  session->MarkReleased(session->inflight().begin()->first);
  handler_.deferred.clear();
  open_durable();
  EXPECT_EQ(handler_.bodies.size(), 1u) << "not sent again";
  EXPECT_TRUE(session->inflight().empty()) << "settled at our end on recovery";
  EXPECT_EQ(metrics_.inflight_messages.load(), 0u);
}

TEST_F(AmqpExactlyOnceTest, SecondModeReceiverTakesQos2FromASecondModeSender) {  // docs/mapping.md
  Start();
  handler_.receiver_second = true;
  OpenReceiver(true);
  proton::sender sender = OpenSecondModeSender("s");
  for (int i = 0; i < 5; ++i) Send(sender, "m" + std::to_string(i), "tag-" + std::to_string(i));
  Pump();
  EXPECT_EQ(handler_.bodies.size(), 5u);
  EXPECT_EQ(handler_.settled_by_server, 5);
  EXPECT_EQ(metrics_.inflight_messages.load(), 0u);
}

}  // namespace
}  // namespace estuary::amqp
