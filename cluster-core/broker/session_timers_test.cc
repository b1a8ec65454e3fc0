// Issue 27, point 1: a timer armed for one session never acts on the next
// session of the same client id (nor on the same session resumed since).
// One test per timer kind (session expiry, will delay, shared-group
// redelivery delay, the timers a restart re-arms, the registry's answer
// on a recovered session), each in memory and with a store.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "cluster-core/broker/queue_link_for_tests.h"
#include "cluster-core/broker/shard_broker.h"
#include "io/sim/sim_loop.h"
#include "persistence/memory_engine.h"

namespace estuary::core {
namespace {

using test_support::NullSink;
using test_support::QueueLink;
using test_support::QuietPort;

enum class Storage { kMemory, kDurable };

class Issue27TimerTest : public ::testing::TestWithParam<Storage> {
 protected:
  bool durable() const { return GetParam() == Storage::kDurable; }
  void Boot(ClusterPort* port = nullptr) {
    ShardConfig config;
    config.node_id = 7;
    config.shared = shared_;
    broker_ = std::make_unique<ShardBroker>(config, loop_, link_, metrics_);
    if (port != nullptr) broker_->set_cluster(port);
    link_.shards = {broker_.get()};
    if (durable()) {
      broker_->AttachStore(engine_);
      auto recovered = broker_->Recover();
      ASSERT_TRUE(recovered) << recovered.error();
    }
    Settle();
  }
  // The broker goes, the engine (and the loop, with the old broker's
  // timers still on it) stays.
  void Restart(ClusterPort* port = nullptr) {
    Settle();
    broker_->FlushStore();
    broker_.reset();
    metrics_.sessions = 0;
    metrics_.sessions_expired = 0;
    Boot(port);
  }
  void Settle() {
    for (int i = 0; i < 5; ++i) {
      link_.RunAll();
      loop_.RunUntilIdle();
    }
  }
  Session* Connect(const std::string& client_id, bool clean_start, uint32_t expiry, bool* present = nullptr) {
    auto attached = broker_->Attach(client_id, clean_start, &sink_);
    if (present != nullptr) *present = attached.session_present;
    attached.session->set_expiry_interval(expiry);
    return attached.session;
  }
  void Subscribe(Session* session, const std::string& filter) {
    SubscriptionOptions options;
    options.max_qos = QoS::kAtLeastOnce;
    broker_->Subscribe(session, filter, options);
    Settle();
  }
  void Leave(Session* session, bool publish_will = false) {
    broker_->Disconnect(session, &sink_, publish_will);
    Settle();
  }
  static WillMessage Will(const std::string& payload, uint32_t delay_seconds) {
    auto message = std::make_shared<Message>();
    message->topic = "will/x";
    message->payload = MakePayload(payload);
    message->qos = QoS::kAtLeastOnce;
    WillMessage will;
    will.message = message;
    will.delay_seconds = delay_seconds;
    return will;
  }
  void Publish(const std::string& topic, const std::string& payload) {
    auto message = std::make_shared<Message>();
    message->id = broker_->NextMessageId();
    message->topic = topic;
    message->payload = MakePayload(payload);
    message->qos = QoS::kAtLeastOnce;
    message->origin = Origin{Protocol::kMqtt, "publisher", 7};
    broker_->Publish(message);
    Settle();
  }
  std::vector<std::string> Queued(const std::string& client_id) {
    std::vector<std::string> payloads;
    Session* session = broker_->FindSession(client_id);
    if (session == nullptr) return payloads;
    session->ForEachDelivery([&](Delivery& delivery) { payloads.push_back(*delivery.message->payload); });
    return payloads;
  }
  // The issue's sequence: client x connects with Clean Start 0 and expiry
  // `first_expiry`, leaves; connects at once with Clean Start 1 and expiry
  // 1, subscribes to "t", leaves with a DISCONNECT that sets expiry 10.
  void CleanStartAfterAPersistentSession(uint32_t first_expiry) {
    Leave(Connect("x", false, first_expiry));
    bool present = true;
    Session* next = Connect("x", true, 1, &present);
    EXPECT_FALSE(present);
    Subscribe(next, "t");
    next->set_expiry_interval(10);  // the DISCONNECT's Session Expiry Interval
    Leave(next);
  }

  io::ManualClock clock_;
  io::SimLoop loop_{clock_};
  QueueLink link_;
  ShardMetrics metrics_;
  SharedGroupConfig shared_;
  persistence::MemoryEngine engine_;
  NullSink sink_;
  std::unique_ptr<ShardBroker> broker_;
};

INSTANTIATE_TEST_SUITE_P(Storage, Issue27TimerTest, ::testing::Values(Storage::kMemory, Storage::kDurable),
                         [](const auto& param_info) {
                           return param_info.param == Storage::kMemory ? "Memory" : "Durable";
                         });

// MQTT 5.0 3.1.2.11.2 and 3.14.2.2.2: the new session's expiry is its own.
TEST_P(Issue27TimerTest, Issue27EarlierSessionsExpirySparesTheNextSession) {
  Boot();
  CleanStartAfterAPersistentSession(5);
  loop_.AdvanceBy(6'000);  // the first session's 5 s are over
  ASSERT_NE(broker_->FindSession("x"), nullptr) << "the first session's expiry timer deleted the next session";
  EXPECT_EQ(metrics_.sessions_expired.load(), 0u);
  EXPECT_TRUE(broker_->FindSession("x")->subscriptions().contains("t"));
  Publish("t", "kept");
  EXPECT_EQ(Queued("x"), std::vector<std::string>{"kept"});
  bool present = false;
  Leave(Connect("x", false, 10, &present));
  EXPECT_TRUE(present);
  // Its own expiry still runs: 10 s after its last disconnect.
  loop_.AdvanceBy(9'999);
  EXPECT_NE(broker_->FindSession("x"), nullptr);
  loop_.AdvanceBy(1);
  EXPECT_EQ(broker_->FindSession("x"), nullptr);
  EXPECT_EQ(metrics_.sessions_expired.load(), 1u);
}

TEST_P(Issue27TimerTest, Issue27EarlierSessionsWillDelaySparesTheNextSessionsWill) {
  Boot();
  Subscribe(Connect("watcher", true, 0), "will/#");
  Session* first = Connect("x", false, 60);
  first->set_will(Will("first", 5));
  Leave(first, /*publish_will=*/true);
  // A clean start ends the first session: its will goes now [MQTT-3.1.3-9].
  Session* next = Connect("x", true, 60);
  EXPECT_EQ(Queued("watcher"), std::vector<std::string>{"first"});
  next->set_will(Will("next", 10));
  Leave(next, /*publish_will=*/true);
  loop_.AdvanceBy(9'999);  // past the first will's 5 s
  EXPECT_EQ(Queued("watcher"), std::vector<std::string>{"first"}) << "the next will went early";
  loop_.AdvanceBy(1);
  EXPECT_EQ(Queued("watcher"), (std::vector<std::string>{"first", "next"}));
  EXPECT_NE(broker_->FindSession("x"), nullptr);  // the will went, the session stays
}

TEST_P(Issue27TimerTest, Issue27EarlierSessionsSharedRedeliverySparesTheNextSession) {
  shared_.redelivery_delay_ms = 1'000;
  Boot();
  Subscribe(Connect("other", true, 0), "$share/g/jobs");
  Session* first = Connect("x", false, 3600);
  Subscribe(first, "$share/g/jobs");
  Leave(first);  // the first session's redelivery is due at 1000
  loop_.AdvanceBy(500);
  Session* next = Connect("x", true, 3600);
  Subscribe(next, "$share/g/jobs");
  for (int i = 0; i < 4; ++i) Publish("jobs", "m" + std::to_string(i));  // round robin: two each
  const std::vector<std::string> held = Queued("x");
  ASSERT_EQ(held.size(), 2u);
  Leave(next);  // the next session's redelivery is due at 1500
  loop_.AdvanceBy(999);
  EXPECT_EQ(Queued("x"), held) << "the first session's redelivery timer moved the next session's messages";
  EXPECT_EQ(metrics_.shared_redelivered.load(), 0u);
  loop_.AdvanceBy(1);
  EXPECT_TRUE(Queued("x").empty());
  EXPECT_EQ(Queued("other").size(), 4u);
  EXPECT_EQ(metrics_.shared_redelivered.load(), 2u);
}

// The same session resumed and left again: only the last disconnect's
// timers act (the generation moves at every attach and disconnect).
TEST_P(Issue27TimerTest, Issue27ResumedSessionKeepsOnlyItsLastDisconnectsExpiry) {
  Boot();
  Leave(Connect("x", false, 5));
  loop_.AdvanceBy(3'000);
  Leave(Connect("x", false, 5));
  loop_.AdvanceBy(4'000);  // the first disconnect's 5 s are over
  EXPECT_NE(broker_->FindSession("x"), nullptr);
  loop_.AdvanceBy(1'000);
  EXPECT_EQ(broker_->FindSession("x"), nullptr);
}

class Issue27RecoveredTimerTest : public Issue27TimerTest {};
INSTANTIATE_TEST_SUITE_P(Storage, Issue27RecoveredTimerTest, ::testing::Values(Storage::kDurable),
                         [](const auto&) { return "Durable"; });

// A restart re-arms a recovered session's expiry from its stored
// disconnect time; a clean start after the restart makes a session that
// timer does not touch.
TEST_P(Issue27RecoveredTimerTest, Issue27RecoveredSessionsExpirySparesTheNextSession) {
  Boot();
  Leave(Connect("x", false, 5));
  Restart();
  ASSERT_NE(broker_->FindSession("x"), nullptr);
  Session* next = Connect("x", true, 1);
  Subscribe(next, "t");
  next->set_expiry_interval(10);
  Leave(next);
  loop_.AdvanceBy(6'000);
  ASSERT_NE(broker_->FindSession("x"), nullptr);
  EXPECT_TRUE(broker_->FindSession("x")->subscriptions().contains("t"));
  // And the new session is what a second restart recovers.
  Restart();
  ASSERT_NE(broker_->FindSession("x"), nullptr);
  EXPECT_TRUE(broker_->FindSession("x")->subscriptions().contains("t"));
}

// The issue's sequence, with a restart in the middle: the stored session is
// the new one (expiry 10), and the old process's timers on the loop are void.
TEST_P(Issue27RecoveredTimerTest, Issue27NextSessionSurvivesARestartAfterTheEarlierExpiryWasDue) {
  Boot();
  CleanStartAfterAPersistentSession(5);
  loop_.AdvanceBy(6'000);
  Restart();
  ASSERT_NE(broker_->FindSession("x"), nullptr);
  EXPECT_TRUE(broker_->FindSession("x")->subscriptions().contains("t"));
  loop_.AdvanceBy(4'000);  // 10 s after its disconnect
  EXPECT_EQ(broker_->FindSession("x"), nullptr);
}

// A cluster node's recovered session waits for the registry's answer; its
// client came back (and left) in between: the answer, about the session
// as recovered, leaves the one the client made alone.
TEST_P(Issue27RecoveredTimerTest, Issue27RegistryAnswerActsOnlyOnTheSessionAsRecovered) {
  QuietPort port;
  Boot(&port);
  Leave(Connect("x", false, 3600));
  Restart(&port);
  EXPECT_EQ(broker_->TakeUnconfirmed(), std::vector<std::string>{"x"});
  Session* next = Connect("x", true, 3600);
  Subscribe(next, "t");
  Leave(next);
  broker_->ConfirmRecovered("x", /*ours=*/false);
  Settle();
  ASSERT_NE(broker_->FindSession("x"), nullptr) << "the answer dropped the session the client made since";
  EXPECT_TRUE(broker_->FindSession("x")->subscriptions().contains("t"));
  EXPECT_EQ(metrics_.sessions_stale_dropped.load(), 0u);
}

// The counterpart: untouched since the restart, the stale copy goes.
TEST_P(Issue27RecoveredTimerTest, Issue27RegistryAnswerStillDropsAnUntouchedStaleCopy) {
  QuietPort port;
  Boot(&port);
  Leave(Connect("x", false, 3600));
  Restart(&port);
  EXPECT_EQ(broker_->TakeUnconfirmed(), std::vector<std::string>{"x"});
  broker_->ConfirmRecovered("x", /*ours=*/false);
  Settle();
  EXPECT_EQ(broker_->FindSession("x"), nullptr);
  EXPECT_EQ(metrics_.sessions_stale_dropped.load(), 1u);
}

}  // namespace
}  // namespace estuary::core
