#include "cluster-core/broker/shard_broker.h"

#include <gtest/gtest.h>

#include <deque>
#include <memory>

#include "cluster-core/broker/queue_link_for_tests.h"
#include "io/sim/sim_loop.h"

namespace estuary::core {
namespace {

using test_support::QueueLink;

class RecordingSink final : public SessionSink {
 public:
  void OnDeliveriesReady() override { ++ready; }
  void OnDetached(DetachReason reason) override { detached.push_back(reason); }
  int ready = 0;
  std::vector<DetachReason> detached;
};

class ShardBrokerTest : public ::testing::Test {
 protected:
  void MakeShards(uint16_t count, BrokerLimits limits = {}) {
    metrics_ = std::vector<ShardMetrics>(count);
    for (uint16_t i = 0; i < count; ++i) {
      ShardConfig config;
      config.node_id = 7;
      config.shard_id = i;
      config.shard_count = count;
      config.limits = limits;
      shards_.push_back(std::make_unique<ShardBroker>(config, loop_, link_, metrics_[i]));
      link_.shards.push_back(shards_.back().get());
    }
  }
  MessagePtr Make(std::string topic, std::string payload, QoS qos = QoS::kAtLeastOnce,
                  bool retain = false, std::string origin = "publisher") {
    auto message = std::make_shared<Message>();
    message->id = shards_[0]->NextMessageId();
    message->topic = std::move(topic);
    message->payload = MakePayload(std::move(payload));
    message->qos = qos;
    message->retain = retain;
    message->origin = Origin{Protocol::kMqtt, std::move(origin), 7};
    return message;
  }
  std::vector<std::string> Drain(Session* session) {
    std::vector<std::string> payloads;
    while (session->HasQueued()) payloads.push_back(*session->PopQueued().message->payload);
    return payloads;
  }
  SubscriptionOptions Options(QoS qos, uint32_t id = 0) {
    SubscriptionOptions options;
    options.max_qos = qos;
    options.subscription_id = id;
    return options;
  }

  io::ManualClock clock_;
  io::SimLoop loop_{clock_};
  QueueLink link_;
  std::vector<ShardMetrics> metrics_;
  std::vector<std::unique_ptr<ShardBroker>> shards_;
};

TEST_F(ShardBrokerTest, DeliversOncePerSessionWithHighestQosAndAllSubscriptionIds) {
  MakeShards(1);
  RecordingSink sink;
  Session* session = shards_[0]->Attach("sub", true, &sink).session;
  shards_[0]->Subscribe(session, "a/+", Options(QoS::kAtMostOnce, 1));
  shards_[0]->Subscribe(session, "a/#", Options(QoS::kExactlyOnce, 2));
  shards_[0]->Publish(Make("a/b", "x", QoS::kExactlyOnce));
  ASSERT_EQ(session->queued_messages(), 1u);
  Delivery delivery = session->PopQueued();
  EXPECT_EQ(delivery.qos, QoS::kExactlyOnce);
  EXPECT_EQ(delivery.subscription_ids.size(), 2u);
  EXPECT_GT(sink.ready, 0);
}

TEST_F(ShardBrokerTest, GrantedQosCapsDeliveryQos) {
  MakeShards(1);
  RecordingSink sink;
  Session* session = shards_[0]->Attach("sub", true, &sink).session;
  shards_[0]->Subscribe(session, "t", Options(QoS::kAtMostOnce));
  shards_[0]->Publish(Make("t", "x", QoS::kExactlyOnce));
  EXPECT_EQ(session->PopQueued().qos, QoS::kAtMostOnce);
}

TEST_F(ShardBrokerTest, NoLocalSkipsThePublishersOwnSession) {
  MakeShards(1);
  RecordingSink sink;
  Session* session = shards_[0]->Attach("me", true, &sink).session;
  SubscriptionOptions options = Options(QoS::kAtLeastOnce);
  options.no_local = true;
  shards_[0]->Subscribe(session, "t", options);
  shards_[0]->Publish(Make("t", "mine", QoS::kAtLeastOnce, false, "me"));
  shards_[0]->Publish(Make("t", "theirs", QoS::kAtLeastOnce, false, "other"));
  EXPECT_EQ(Drain(session), std::vector<std::string>{"theirs"});
}

TEST_F(ShardBrokerTest, ForwardsToAnotherShardOnlyAfterRoutesAreVisible) {
  MakeShards(2);
  RecordingSink sink;
  Session* session = shards_[1]->Attach("sub", true, &sink).session;
  shards_[1]->Subscribe(session, "s/#", Options(QoS::kAtLeastOnce));
  bool visible = false;
  shards_[1]->WhenRoutesVisible([&] { visible = true; });
  EXPECT_FALSE(visible);  // shard 0 has not applied the route yet
  link_.RunAll();
  EXPECT_TRUE(visible);
  shards_[0]->Publish(Make("s/1", "hello"));
  EXPECT_EQ(metrics_[0].forwards_out.load(), 1u);
  link_.RunAll();
  EXPECT_EQ(Drain(session), std::vector<std::string>{"hello"});
}

TEST_F(ShardBrokerTest, NoForwardWithoutRemoteRoutes) {
  MakeShards(3);
  shards_[0]->Publish(Make("nobody/listens", "x"));
  EXPECT_EQ(link_.pending(), 0u);
  EXPECT_EQ(metrics_[0].forwards_out.load(), 0u);
}

TEST_F(ShardBrokerTest, UnsubscribeRemovesRemoteRoute) {
  MakeShards(2);
  RecordingSink sink;
  Session* session = shards_[1]->Attach("sub", true, &sink).session;
  shards_[1]->Subscribe(session, "t", Options(QoS::kAtLeastOnce));
  link_.RunAll();
  EXPECT_EQ(shards_[1]->Unsubscribe(session, "t"), UnsubscribeOutcome::kRemoved);
  EXPECT_EQ(shards_[1]->Unsubscribe(session, "t"), UnsubscribeOutcome::kNotSubscribed);
  link_.RunAll();
  shards_[0]->Publish(Make("t", "x"));
  EXPECT_EQ(link_.pending(), 0u);
}

TEST_F(ShardBrokerTest, SharedSubscriptionDeliversEachMessageToExactlyOneMemberAcrossShards) {
  MakeShards(2);
  RecordingSink sink_a, sink_b;
  Session* a = shards_[0]->Attach("a", true, &sink_a).session;
  Session* b = shards_[1]->Attach("b", true, &sink_b).session;
  shards_[0]->Subscribe(a, "$share/g/jobs/+", Options(QoS::kAtLeastOnce));
  shards_[1]->Subscribe(b, "$share/g/jobs/+", Options(QoS::kAtLeastOnce));
  link_.RunAll();
  for (int i = 0; i < 10; ++i) {
    shards_[i % 2]->Publish(Make("jobs/x", std::to_string(i)));
    link_.RunAll();
  }
  const auto got_a = Drain(a);
  const auto got_b = Drain(b);
  EXPECT_EQ(got_a.size() + got_b.size(), 10u);
  EXPECT_FALSE(got_a.empty());
  EXPECT_FALSE(got_b.empty());
}

TEST_F(ShardBrokerTest, RetainedMessagesReplicateAndClearWithEmptyPayload) {
  MakeShards(2);
  bool acknowledged = false;
  shards_[0]->Publish(Make("r/1", "v1", QoS::kAtLeastOnce, true), [&] { acknowledged = true; });
  EXPECT_FALSE(acknowledged);  // not until every shard holds it
  link_.RunAll();
  EXPECT_TRUE(acknowledged);
  EXPECT_EQ(shards_[1]->retained().size(), 1u);

  RecordingSink sink;
  Session* session = shards_[1]->Attach("sub", true, &sink).session;
  SubscriptionOptions options = Options(QoS::kAtLeastOnce);
  shards_[1]->DeliverRetained(session, "r/+", options, shards_[1]->Subscribe(session, "r/+", options));
  ASSERT_EQ(session->queued_messages(), 1u);
  Delivery delivery = session->PopQueued();
  EXPECT_TRUE(delivery.retain);
  EXPECT_EQ(*delivery.message->payload, "v1");

  shards_[0]->Publish(Make("r/1", "", QoS::kAtLeastOnce, true));
  link_.RunAll();
  EXPECT_EQ(shards_[1]->retained().size(), 0u);
}

TEST_F(ShardBrokerTest, RetainHandlingOneSendsOnlyForNewSubscriptions) {
  MakeShards(1);
  shards_[0]->Publish(Make("r", "v", QoS::kAtLeastOnce, true));
  RecordingSink sink;
  Session* session = shards_[0]->Attach("sub", true, &sink).session;
  SubscriptionOptions options = Options(QoS::kAtLeastOnce);
  options.retain_handling = core::RetainHandling::kSendIfNew;
  SubscribeOutcome outcome = shards_[0]->Subscribe(session, "r", options);
  EXPECT_EQ(outcome, SubscribeOutcome::kAdded);
  shards_[0]->DeliverRetained(session, "r", options, outcome);
  outcome = shards_[0]->Subscribe(session, "r", options);
  EXPECT_EQ(outcome, SubscribeOutcome::kReplaced);
  shards_[0]->DeliverRetained(session, "r", options, outcome);
  EXPECT_EQ(session->queued_messages(), 1u);
}

TEST_F(ShardBrokerTest, TakeoverDetachesTheOldConnectionAndKeepsTheSession) {
  MakeShards(1);
  RecordingSink first, second;
  Session* session = shards_[0]->Attach("c", false, &first).session;
  session->set_expiry_interval(100);
  shards_[0]->Subscribe(session, "t", Options(QoS::kAtLeastOnce));
  auto result = shards_[0]->Attach("c", false, &second);
  EXPECT_TRUE(result.session_present);
  EXPECT_EQ(result.session, session);
  ASSERT_EQ(first.detached.size(), 1u);
  EXPECT_EQ(first.detached[0], DetachReason::kTakenOver);
  // The old connection's late disconnect must not affect the new owner.
  shards_[0]->Disconnect(session, &first, true);
  EXPECT_EQ(session->sink(), &second);
}

TEST_F(ShardBrokerTest, WillIsPublishedOnAbnormalDisconnectOnly) {
  MakeShards(1);
  RecordingSink watcher_sink, sink;
  Session* watcher = shards_[0]->Attach("watcher", true, &watcher_sink).session;
  shards_[0]->Subscribe(watcher, "will/#", Options(QoS::kAtLeastOnce));
  for (bool abnormal : {false, true}) {
    Session* session = shards_[0]->Attach("dying", true, &sink).session;
    session->will() = WillMessage{Make("will/dying", abnormal ? "gone" : "bye"), 0, {}};
    shards_[0]->Disconnect(session, &sink, abnormal);
  }
  EXPECT_EQ(Drain(watcher), std::vector<std::string>{"gone"});
}

TEST_F(ShardBrokerTest, WillDelayIsCancelledWhenTheClientComesBack) {
  MakeShards(1);
  RecordingSink watcher_sink, sink;
  Session* watcher = shards_[0]->Attach("watcher", true, &watcher_sink).session;
  shards_[0]->Subscribe(watcher, "will/#", Options(QoS::kAtLeastOnce));
  Session* session = shards_[0]->Attach("c", false, &sink).session;
  session->set_expiry_interval(3600);
  session->will() = WillMessage{Make("will/c", "late"), 10, {}};
  shards_[0]->Disconnect(session, &sink, true);
  loop_.AdvanceBy(5'000);
  EXPECT_FALSE(watcher->HasQueued());
  shards_[0]->Attach("c", false, &sink);  // back within the delay
  loop_.AdvanceBy(10'000);
  EXPECT_FALSE(watcher->HasQueued());

  session->will() = WillMessage{Make("will/c", "late"), 10, {}};
  shards_[0]->Disconnect(session, &sink, true);
  loop_.AdvanceBy(10'000);
  EXPECT_EQ(Drain(watcher), std::vector<std::string>{"late"});
}

TEST_F(ShardBrokerTest, SessionExpiresAfterItsInterval) {
  MakeShards(1);
  RecordingSink sink;
  Session* session = shards_[0]->Attach("c", false, &sink).session;
  session->set_expiry_interval(60);
  shards_[0]->Subscribe(session, "t", Options(QoS::kAtLeastOnce));
  shards_[0]->Disconnect(session, &sink, false);
  shards_[0]->Publish(Make("t", "while-offline"));
  loop_.AdvanceBy(59'000);
  ASSERT_NE(shards_[0]->FindSession("c"), nullptr);
  EXPECT_EQ(shards_[0]->FindSession("c")->queued_messages(), 1u);
  loop_.AdvanceBy(1'000);
  EXPECT_EQ(shards_[0]->FindSession("c"), nullptr);
  EXPECT_EQ(metrics_[0].subscriptions.load(), 0u);
}

TEST_F(ShardBrokerTest, OfflineQueueIsBoundedAndDropsQos0) {
  BrokerLimits limits;
  limits.session.max_queued_messages = 3;
  MakeShards(1, limits);
  RecordingSink sink;
  Session* session = shards_[0]->Attach("c", false, &sink).session;
  session->set_expiry_interval(60);
  shards_[0]->Subscribe(session, "t", Options(QoS::kAtLeastOnce));
  shards_[0]->Disconnect(session, &sink, false);
  shards_[0]->Publish(Make("t", "qos0", QoS::kAtMostOnce));
  for (int i = 0; i < 5; ++i) shards_[0]->Publish(Make("t", std::to_string(i)));
  EXPECT_EQ(Drain(session), (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(metrics_[0].messages_dropped.load(), 3u);
}

TEST_F(ShardBrokerTest, ExpiredMessagesAreNotQueued) {
  MakeShards(1);
  RecordingSink sink;
  Session* session = shards_[0]->Attach("c", true, &sink).session;
  shards_[0]->Subscribe(session, "t", Options(QoS::kAtLeastOnce));
  auto message = std::make_shared<Message>(*Make("t", "old"));
  message->properties.expiry_at_ms = clock_.WallMs() - 1;
  shards_[0]->Publish(message);
  EXPECT_FALSE(session->HasQueued());
}

TEST_F(ShardBrokerTest, ClientIdsSpreadOverShardsStably) {
  std::vector<int> counts(4, 0);
  for (int i = 0; i < 4000; ++i) ++counts[ShardForClientId("client-" + std::to_string(i), 4)];
  for (int count : counts) EXPECT_GT(count, 800);
  EXPECT_EQ(ShardForClientId("abc", 4), ShardForClientId("abc", 4));
  EXPECT_EQ(ShardForClientId("abc", 1), 0);
}

// An AMQP durable subscription's session lives with its connection, on the
// shard of its container-id: the agent's takeovers and attach notices must
// find it there (ids as frontends/amqp DurableSessionId makes them).
TEST_F(ShardBrokerTest, AnAmqpDurableSubscriptionIsOnItsContainersShard) {
  using namespace std::string_literals;
  for (int i = 0; i < 50; ++i) {
    const std::string container = "container-" + std::to_string(i);
    const std::string id = "\0amqp/"s + std::to_string(container.size()) + ":" + container + "/link-" + std::to_string(i);
    EXPECT_EQ(ShardForClientId(id, 7), ShardForClientId(container, 7)) << container;
  }
  // Malformed: hashed whole, never out of range.
  for (const std::string& bad : {"\0amqp/"s, "\0amqp/:x/y"s, "\0amqp/99:short/l"s, "\0amqp/x1:a/b"s}) {
    EXPECT_LT(ShardForClientId(bad, 7), 7) << bad.substr(1);
  }
}

class CountingFlow final : public PublisherFlow {
 public:
  void PauseIngress() override { ++pauses; }
  void ResumeIngress() override { ++resumes; }
  int pauses = 0;
  int resumes = 0;
};

TEST_F(ShardBrokerTest, CongestedSubscriberPausesItsPublisherUntilDrained) {
  BrokerLimits limits;
  limits.session.max_queued_messages = 8;
  MakeShards(2, limits);
  RecordingSink slow;  // never takes anything from the queue
  Session* session = shards_[1]->Attach("slow", true, &slow).session;
  shards_[1]->Subscribe(session, "t", Options(QoS::kAtLeastOnce));
  link_.RunAll();
  auto flow = std::make_shared<CountingFlow>();
  const FlowId id = shards_[0]->RegisterFlow(flow);
  for (int i = 0; i < 4; ++i) shards_[0]->Publish(Make("t", std::to_string(i)), {}, id);
  link_.RunAll();
  EXPECT_EQ(flow->pauses, 1);  // once, however many messages land while congested
  EXPECT_EQ(metrics_[1].messages_dropped.load(), 0u);
  while (session->queued_messages() > 2) {
    session->PopQueued();
    shards_[1]->OnDequeued(*session);
  }
  link_.RunAll();
  EXPECT_EQ(flow->resumes, 1);
}

TEST_F(ShardBrokerTest, ForwardWindowPausesAPublisherUntilCreditReturns) {
  MakeShards(2);
  RecordingSink sink;
  Session* session = shards_[1]->Attach("sub", true, &sink).session;
  shards_[1]->Subscribe(session, "t", Options(QoS::kAtLeastOnce));
  link_.RunAll();
  auto flow = std::make_shared<CountingFlow>();
  const FlowId id = shards_[0]->RegisterFlow(flow);
  for (uint32_t i = 0; i < kForwardWindow; ++i) shards_[0]->Publish(Make("t", "x"), {}, id);
  EXPECT_EQ(flow->pauses, 1);  // the window is full: nothing delivered yet
  link_.RunAll();              // shard 1 delivers and queues the credit
  loop_.RunUntilIdle();        // ... flushed once per loop iteration
  link_.RunAll();
  EXPECT_EQ(flow->resumes, 1);
}

TEST_F(ShardBrokerTest, OfflineSubscriberNeverPausesPublishers) {
  BrokerLimits limits;
  limits.session.max_queued_messages = 4;
  MakeShards(1, limits);
  RecordingSink sink;
  Session* session = shards_[0]->Attach("away", false, &sink).session;
  session->set_expiry_interval(60);
  shards_[0]->Subscribe(session, "t", Options(QoS::kAtLeastOnce));
  shards_[0]->Disconnect(session, &sink, false);
  auto flow = std::make_shared<CountingFlow>();
  const FlowId id = shards_[0]->RegisterFlow(flow);
  for (int i = 0; i < 10; ++i) shards_[0]->Publish(Make("t", std::to_string(i)), {}, id);
  EXPECT_EQ(flow->pauses, 0);
  EXPECT_EQ(session->queued_messages(), 4u);
}

TEST_F(ShardBrokerTest, DisconnectReleasesPausedPublishers) {
  BrokerLimits limits;
  limits.session.max_queued_messages = 2;
  MakeShards(1, limits);
  RecordingSink sink;
  Session* session = shards_[0]->Attach("slow", true, &sink).session;
  shards_[0]->Subscribe(session, "t", Options(QoS::kAtLeastOnce));
  auto flow = std::make_shared<CountingFlow>();
  const FlowId id = shards_[0]->RegisterFlow(flow);
  shards_[0]->Publish(Make("t", "1"), {}, id);
  ASSERT_EQ(flow->pauses, 1);
  shards_[0]->Disconnect(session, &sink, false);
  EXPECT_EQ(flow->resumes, 1);
}

}  // namespace
}  // namespace estuary::core
