// AmqpConnection in one process: a Proton client driver talks to the
// server connection through a MemoryStream, on simulated time.
#include "frontends/amqp/session/connection_test_fixture.h"

#include <set>

namespace estuary::amqp {
namespace {

using testing_support::AmqpConnectionTest;
using testing_support::ClientHandler;
using testing_support::InlineLink;


TEST_F(AmqpConnectionTest, SendAndReceiveThroughTheBroker) {  // AMQP 1.0 §2.6, §2.7
  Start();
  ASSERT_TRUE(handler_.opened);
  proton::connection connection = client_.connection();
  connection.open_receiver("t/#", proton::receiver_options().name("r").credit_window(10));
  proton::sender sender = connection.open_sender("t/a", proton::sender_options().name("s"));
  Pump();
  ASSERT_EQ(handler_.receivers_open, 1);
  ASSERT_EQ(handler_.senders_open, 1);
  proton::message message;
  message.body(proton::binary("hello"));
  sender.send(message);
  Pump();
  EXPECT_EQ(handler_.accepted, 1);
  ASSERT_EQ(handler_.bodies.size(), 1u);
  EXPECT_EQ(handler_.bodies[0], "hello");
  EXPECT_EQ(metrics_.messages_in.load(), 1u);
  EXPECT_EQ(metrics_.messages_out.load(), 1u);
}

TEST_F(AmqpConnectionTest, ClientSenderGetsTheConfiguredCreditWindow) {  // §2.6.7, --amqp-credit
  AmqpSettings settings;
  settings.link_credit = 8;
  Start(settings);
  proton::sender sender = client_.connection().open_sender("t/a", proton::sender_options().name("s"));
  Pump();
  ASSERT_EQ(handler_.senders_open, 1);
  EXPECT_EQ(sender.credit(), 8);
}

// The client's dispositions for a whole batch arrive in one read. With
// only dispositions in it the server takes them from Proton's C event
// queue (TakeOutcomes); behind a flow frame (a client topping its credit
// up as it goes) the C++ dispatch gets them. Either way each delivery is
// settled once and released ones are sent again.
class AmqpOutcomeTest : public AmqpConnectionTest, public ::testing::WithParamInterface<bool> {};

TEST_P(AmqpOutcomeTest, BatchedOutcomesSettleEveryDeliveryAndRedeliverReleasedOnes) {  // §3.4
  const bool client_tops_up_credit = GetParam();
  Start();
  handler_.releases_left = 3;
  proton::connection connection = client_.connection();
  proton::receiver receiver =
      connection.open_receiver("t/#", proton::receiver_options().name("r").credit_window(client_tops_up_credit ? 100 : 0));
  if (!client_tops_up_credit) receiver.add_credit(100);
  proton::sender sender = connection.open_sender("t/a", proton::sender_options().name("s"));
  Pump();
  ASSERT_EQ(handler_.receivers_open, 1);
  ASSERT_EQ(handler_.senders_open, 1);
  constexpr int kMessages = 40;
  for (int i = 0; i < kMessages; ++i) {
    proton::message message;
    message.body(proton::binary("m" + std::to_string(i)));
    sender.send(message);
  }
  Pump();
  EXPECT_EQ(handler_.accepted, kMessages);
  ASSERT_EQ(handler_.bodies.size(), static_cast<size_t>(kMessages + 3)) << "3 released, sent again";
  std::set<std::string> distinct(handler_.bodies.begin(), handler_.bodies.end());
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kMessages)) << "every message arrived";
  EXPECT_EQ(metrics_.inflight_messages.load(), 0u) << "every delivery settled exactly once";
  EXPECT_EQ(metrics_.messages_out.load(), static_cast<uint64_t>(kMessages + 3));
}

INSTANTIATE_TEST_SUITE_P(CreditFromClient, AmqpOutcomeTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& param) {
                           return param.param ? "ToppedUpAsItGoes" : "GrantedOnce";
                         });

TEST_F(AmqpConnectionTest, InvalidSourceIsRefusedWithInvalidField) {  // §2.8.15
  Start();
  client_.connection().open_receiver("a/#/b", proton::receiver_options().name("bad"));
  Pump();
  ASSERT_EQ(handler_.link_errors.size(), 1u);
  EXPECT_EQ(handler_.link_errors[0], "amqp:invalid-field");
}

// Durable subscriptions in a cluster (docs/amqp.md): a durable link's
// session id is claimed before the attach is answered; the link's close
// releases it, a detach does not; links that are not durable claim nothing.
class AmqpClaimTest : public AmqpConnectionTest {
 protected:
  SessionClaims Claims() {
    SessionClaims claims;
    claims.claim = [this](const std::string& id, std::function<void(bool)> done) {
      claimed.push_back(id);
      answers.push_back(std::move(done));
    };
    claims.release = [this](const std::string& id) { released.push_back(id); };
    return claims;
  }
  proton::receiver OpenDurable(const std::string& name, const std::string& address) {
    proton::source_options source;
    source.address(address).durability_mode(proton::source::UNSETTLED_STATE).expiry_policy(proton::source::NEVER);
    return client_.connection().open_receiver(
        address, proton::receiver_options().name(name).source(source).credit_window(10));
  }
  void Answer(bool granted) {
    ASSERT_FALSE(answers.empty());
    auto done = std::move(answers.front());
    answers.pop_front();
    done(granted);
    Pump();
  }
  std::vector<std::string> claimed, released;
  std::deque<std::function<void(bool)>> answers;
};

TEST_F(AmqpClaimTest, ADurableAttachWaitsForItsClaimAndItsCloseReleasesIt) {
  Start({}, Claims());
  proton::receiver durable = OpenDurable("d", "c/#");
  client_.connection().open_receiver("c/#", proton::receiver_options().name("plain").credit_window(10));
  Pump();
  ASSERT_EQ(claimed, std::vector<std::string>{DurableSessionId("unit-client", "d")}) << "only the durable link claims";
  EXPECT_EQ(handler_.receivers_open, 1) << "the durable attach was answered before its claim";
  Answer(true);
  EXPECT_EQ(handler_.receivers_open, 2);
  proton::sender sender = client_.connection().open_sender("c/a", proton::sender_options().name("s"));
  Pump();
  proton::message message;
  message.body(proton::binary("to both"));
  sender.send(message);
  Pump();
  EXPECT_EQ(handler_.bodies.size(), 2u);
  EXPECT_EQ(metrics_.client_id_claims.load(), 1u);
  durable.close();
  Pump();
  EXPECT_EQ(released, claimed) << "closing a durable link ends its session: the id is released";
}

TEST_F(AmqpClaimTest, ADetachKeepsTheClaimAndARefusedClaimRefusesTheAttach) {
  Start({}, Claims());
  proton::receiver durable = OpenDurable("d", "c/#");
  Pump();
  Answer(true);
  ASSERT_EQ(handler_.receivers_open, 1);
  durable.detach();
  Pump();
  EXPECT_TRUE(released.empty()) << "a detached durable subscription stays, and so does its claim";
  OpenDurable("d", "c/#");
  Pump();
  ASSERT_EQ(claimed.size(), 2u) << "the reattach claims again";
  Answer(false);  // no quorum
  ASSERT_EQ(handler_.link_errors.size(), 1u);
  EXPECT_EQ(handler_.link_errors[0], "amqp:internal-error");
  EXPECT_EQ(metrics_.client_id_claims_refused.load(), 1u);
  EXPECT_TRUE(released.empty());
}

TEST_F(AmqpClaimTest, ALinkClosedWhileClaimingEndsItsSessionOnceGranted) {
  Start({}, Claims());
  proton::receiver first = OpenDurable("d", "c/#");
  Pump();
  Answer(true);
  first.detach();  // the subscription stays, with its queue
  Pump();
  ASSERT_EQ(broker_.session_count(), 1u);
  proton::receiver again = OpenDurable("d", "c/#");
  Pump();
  again.close();  // before the claim's answer
  Pump();
  Answer(true);
  EXPECT_EQ(broker_.session_count(), 0u) << "the closed subscription kept its session";
  EXPECT_EQ(released, std::vector<std::string>{DurableSessionId("unit-client", "d")});
}

TEST_F(AmqpConnectionTest, SilentPeerIsClosedAfterTheIdleTimeout) {  // §2.4.5
  AmqpSettings settings;
  settings.idle_timeout_ms = 1000;
  Start(settings);
  ASSERT_TRUE(handler_.opened);
  EXPECT_FALSE(stream_.closed);
  loop_.AdvanceBy(2500);  // the client says nothing
  Pump();
  EXPECT_TRUE(stream_.closed) << "a silent peer outlived the idle-timeout";
}

// Issue 21 point 6: --max-publish-rate on AMQP is backpressure. The
// transfers a read brought are taken (as a debt past the budget), then the
// socket is not read until the debt is paid; the connection stays open.
class Issue21AmqpPublishRateTest : public AmqpConnectionTest {
 protected:
  static core::BrokerLimits TenPerSecond() {
    core::BrokerLimits limits;
    limits.max_publish_rate = 10;
    return limits;
  }
  Issue21AmqpPublishRateTest() : AmqpConnectionTest(TenPerSecond()) {}
};

TEST_F(Issue21AmqpPublishRateTest, ReadingStopsUntilTheBudgetRefills) {
  Start();
  proton::sender sender = client_.connection().open_sender("t/a", proton::sender_options().name("s"));
  Pump();
  ASSERT_EQ(handler_.senders_open, 1);
  for (int i = 0; i < 50; ++i) {
    proton::message message;
    message.body(proton::binary("m"));
    sender.send(message);
  }
  Pump();
  EXPECT_EQ(metrics_.messages_in.load(), 50u);
  EXPECT_FALSE(stream_.reading);  // 40 over the second's 10: 4 s of debt
  EXPECT_EQ(metrics_.publish_throttled.load(), 1u);
  loop_.AdvanceBy(3990);
  EXPECT_FALSE(stream_.reading);
  loop_.AdvanceBy(20);
  EXPECT_TRUE(stream_.reading);
  EXPECT_FALSE(server_->closed());
}

TEST_F(AmqpConnectionTest, WithoutAPublishRateReadingNeverStops) {
  Start();
  proton::sender sender = client_.connection().open_sender("t/a", proton::sender_options().name("s"));
  Pump();
  for (int i = 0; i < 50; ++i) {
    proton::message message;
    message.body(proton::binary("m"));
    sender.send(message);
  }
  Pump();
  EXPECT_EQ(metrics_.messages_in.load(), 50u);
  EXPECT_TRUE(stream_.reading);
  EXPECT_EQ(metrics_.publish_throttled.load(), 0u);
}

// Issue 21 point 6: a connection that has not finished SASL and its open
// within the connect timeout is closed (a slowloris on the AMQP port holds
// a pending slot for a bounded time only).
class Issue21AmqpConnectTimeoutTest : public AmqpConnectionTest {
 protected:
  // The server side only; the test sends what it likes.
  void StartServer() {
    AmqpSettings settings;
    settings.connect_timeout_ms = 1000;
    settings.connect_timed_out = [this] { ++timeouts_; };
    server_ = std::make_shared<AmqpConnection>(broker_, stream_, std::move(settings));
    server_->Start();
  }
  int timeouts_ = 0;
};

TEST_F(Issue21AmqpConnectTimeoutTest, SilentSocketIsClosedAtTheDeadline) {
  StartServer();
  loop_.AdvanceBy(999);
  EXPECT_FALSE(stream_.closed);
  loop_.AdvanceBy(1);
  EXPECT_TRUE(stream_.closed);
  EXPECT_TRUE(server_->closed());
  EXPECT_EQ(timeouts_, 1);
}

TEST_F(Issue21AmqpConnectTimeoutTest, SaslHeaderAloneIsClosedAtTheDeadline) {
  StartServer();
  server_->OnBytes(std::string_view("AMQP\x03\x01\x00\x00", 8));  // §5.3.1: the SASL protocol header
  EXPECT_NE(stream_.written.find("AMQP\x03\x01\x00\x00"), std::string::npos) << "our SASL header and mechanisms";
  loop_.AdvanceBy(999);
  EXPECT_FALSE(stream_.closed);
  loop_.AdvanceBy(1);
  EXPECT_TRUE(stream_.closed);
  EXPECT_EQ(timeouts_, 1);
}

TEST_F(Issue21AmqpConnectTimeoutTest, OpenedConnectionOutlivesTheDeadline) {
  AmqpSettings settings;
  settings.connect_timeout_ms = 1000;
  settings.connect_timed_out = [this] { ++timeouts_; };
  Start(settings);
  ASSERT_TRUE(handler_.opened);
  loop_.AdvanceBy(5000);
  Pump();
  EXPECT_FALSE(stream_.closed);
  EXPECT_FALSE(server_->closed());
  EXPECT_EQ(timeouts_, 0);
}

class DenyAll final : public core::Authenticator {
 public:
  core::AuthDecision Authenticate(const core::Credentials&) override { return core::AuthDecision::kNotAuthorized; }
};

TEST_F(Issue21AmqpConnectTimeoutTest, RefusedOpenFromAClientThatNeverClosesIsClosedAtTheDeadline) {
  DenyAll deny;
  AmqpSettings settings;
  settings.authenticator = &deny;
  settings.connect_timeout_ms = 1000;
  settings.connect_timed_out = [this] { ++timeouts_; };
  server_ = std::make_shared<AmqpConnection>(broker_, stream_, std::move(settings));
  server_->Start();
  // No SASL layer: the open is refused (amqp:unauthorized-access); the
  // client never reads the close, let alone answers it.
  client_.connect(proton::connection_options(handler_).container_id("lingering").sasl_enabled(false));
  while (client_.has_events()) client_.dispatch();
  for (auto out = client_.write_buffer(); out.size > 0; out = client_.write_buffer()) {
    server_->OnBytes(std::string_view(static_cast<const char*>(out.data), out.size));
    client_.write_done(out.size);
  }
  loop_.RunUntilIdle();
  EXPECT_NE(stream_.written.find("amqp:unauthorized-access"), std::string::npos);
  EXPECT_FALSE(stream_.closed);
  loop_.AdvanceBy(1000);
  EXPECT_TRUE(stream_.closed);
  EXPECT_EQ(timeouts_, 1);
}

TEST_F(Issue21AmqpConnectTimeoutTest, ZeroMeansNoDeadline) {
  AmqpSettings settings;
  settings.connect_timeout_ms = 0;
  server_ = std::make_shared<AmqpConnection>(broker_, stream_, std::move(settings));
  server_->Start();
  loop_.AdvanceBy(600'000);
  EXPECT_FALSE(stream_.closed);
}

}  // namespace
}  // namespace estuary::amqp
