// Partitioned shared groups, the shard's side (docs/cluster.md "Partitioned
// shared groups"): a configured group's messages go to the cluster's queues
// instead of a member, and a message taken out of a queue goes only to a
// connected member here with room.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cluster-core/broker/queue_link_for_tests.h"
#include "cluster-core/broker/shard_broker.h"
#include "cluster-core/broker/shared_strategy.h"
#include "cluster-core/store/durable_broker_fixture_for_tests.h"
#include "io/sim/sim_loop.h"

namespace estuary::core {
namespace {

using test_support::NullSink;
using test_support::QueueLink;

// The agent as the shard sees it: records appends and handoff answers.
class QueuePort final : public ClusterPort {
 public:
  void RouteChanged(const RouteUpdate&) override {}
  void Forward(uint16_t node, NodeForward forward) override { forwards.emplace_back(node, std::move(forward)); }
  void ForwardSafe(uint16_t, uint64_t) override {}
  bool QueuesOnPartitions() const override { return true; }
  void AppendToGroupQueue(const MessagePtr& message, const std::string& key, uint16_t, uint64_t token) override {
    appends.push_back({message, key, token});
  }
  void GroupQueueHandoff(uint64_t handoff, bool taken) override { handoffs.emplace_back(handoff, taken); }
  struct Append {
    MessagePtr message;
    std::string key;
    uint64_t token = 0;
  };
  std::vector<Append> appends;
  std::vector<std::pair<uint64_t, bool>> handoffs;
  std::vector<std::pair<uint16_t, NodeForward>> forwards;
};

class PartitionedGroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ShardConfig config;
    config.node_id = 7;
    config.shared.partitioned["g"] = PartitionedGroup{4, false};
    shard_ = std::make_unique<ShardBroker>(config, loop_, link_, metrics_);
    link_.shards.push_back(shard_.get());
    shard_->set_cluster(&port_);
  }
  MessagePtr Make(std::string topic, std::string payload) {
    auto message = std::make_shared<Message>();
    message->id = shard_->NextMessageId();
    message->topic = std::move(topic);
    message->payload = MakePayload(std::move(payload));
    message->qos = QoS::kAtLeastOnce;
    message->origin = Origin{Protocol::kMqtt, "publisher", 7};
    return message;
  }
  Session* Member(const std::string& id, const std::vector<std::string>& filters) {
    sinks_.push_back(std::make_unique<NullSink>());
    Session* session = shard_->Attach(id, true, sinks_.back().get()).session;
    SubscriptionOptions options;
    options.max_qos = QoS::kAtLeastOnce;
    for (const std::string& filter : filters) shard_->Subscribe(session, filter, options);
    link_.RunAll();
    return session;
  }
  io::ManualClock clock_;
  io::SimLoop loop_{clock_};
  QueueLink link_;
  ShardMetrics metrics_;
  QueuePort port_;
  std::unique_ptr<ShardBroker> shard_;
  std::vector<std::unique_ptr<NullSink>> sinks_;
};

TEST(PartitionedGroupConfigTest, ParsesGroupsAndRefusesTheRest) {
  EXPECT_EQ(ParsePartitionedGroup("jobs=4"), std::make_pair(std::string("jobs"), PartitionedGroup{4, false}));
  EXPECT_EQ(ParsePartitionedGroup("jobs=16:topic"), std::make_pair(std::string("jobs"), PartitionedGroup{16, true}));
  for (const char* bad : {"", "jobs", "=4", "jobs=", "jobs=0", "jobs=1025", "jobs=4:key", "jobs=-1", "a/b=4",
                          "j+=2", "jobs=4x", "jobs=99999"}) {
    EXPECT_FALSE(ParsePartitionedGroup(bad).has_value()) << bad;
  }
  EXPECT_EQ(SharedKeyGroup(SharedKey("jobs", "a/#")), "jobs");
}

// The member does not get it: the queue does, and the publisher waits for
// the queue's commit. A group that is not configured works as before.
TEST_F(PartitionedGroupTest, AConfiguredGroupsMessageIsAppendedToItsQueuesNotDelivered) {
  Session* member = Member("m", {"$share/g/jobs/+", "$share/other/jobs/+"});
  bool acknowledged = false;
  shard_->Publish(Make("jobs/1", "a"), [&] { acknowledged = true; });
  link_.RunAll();
  ASSERT_EQ(port_.appends.size(), 1u);
  EXPECT_EQ(port_.appends[0].key, SharedKey("g", "jobs/+"));
  EXPECT_EQ(member->queued_messages(), 1u) << "only the ordinary group's copy";
  EXPECT_FALSE(acknowledged) << "acknowledged before the queue had it";
  shard_->OnForwardSafe(port_.appends[0].token);
  EXPECT_TRUE(acknowledged);
}

TEST_F(PartitionedGroupTest, AQueueMessageGoesOnlyToAConnectedMemberWithRoom) {
  EXPECT_EQ(port_.handoffs.size(), 0u);
  shard_->TakeFromGroupQueue(Make("jobs/1", "q0"), SharedKey("g", "jobs/+"), 1);  // no member here
  Session* member = Member("m", {"$share/g/jobs/+", "fill/#"});
  shard_->TakeFromGroupQueue(Make("jobs/1", "q1"), SharedKey("g", "jobs/+"), 2);
  link_.RunAll();
  EXPECT_EQ(member->queued_messages(), 1u);
  // Its queue fills up (a plain subscription it does not read): the queue keeps the next one.
  for (size_t i = 1; i < ShardBroker::kGroupQueueHandoffDepth; ++i) shard_->Publish(Make("fill/x", "f"), [] {});
  link_.RunAll();
  ASSERT_EQ(member->queued_messages(), ShardBroker::kGroupQueueHandoffDepth);
  shard_->TakeFromGroupQueue(Make("jobs/1", "q2"), SharedKey("g", "jobs/+"), 3);
  link_.RunAll();
  EXPECT_EQ(member->queued_messages(), ShardBroker::kGroupQueueHandoffDepth);
  using Answers = std::vector<std::pair<uint64_t, bool>>;
  EXPECT_EQ(port_.handoffs, (Answers{{1, false}, {2, true}, {3, false}}));
}

// Exactly once across a consumer's death (the shard's side): a QoS 2
// queue message for a durable member is handed first (the port is asked),
// put after, and sent to the client only once its Ack has committed; a
// session that arrives (here: kept after a restart) reports what it holds.
class HandPort final : public test_support::QuietPort {
 public:
  bool QueuesOnPartitions() const override { return true; }
  bool SessionsOnPartitions() const override { return false; }
  bool HandsOnGroupQueues() const override { return hands_on; }
  void GroupQueueHandoff(uint64_t handoff, bool taken) override { handoffs.emplace_back(handoff, taken); }
  void GroupQueueHand(uint64_t handoff, std::string client_id) override { hands.emplace_back(handoff, client_id); }
  void GroupSessionArrived(std::string client_id, std::vector<std::string> keys, std::vector<MessageId> held) override {
    arrived.push_back({std::move(client_id), std::move(keys), std::move(held)});
  }
  struct Arrival {
    std::string client_id;
    std::vector<std::string> keys;
    std::vector<MessageId> held;
  };
  bool hands_on = true;
  std::vector<std::pair<uint64_t, bool>> handoffs;
  std::vector<std::pair<uint64_t, std::string>> hands;
  std::vector<Arrival> arrived;
};

class PartitionedGroupHandTest : public test_support::DurableBrokerTest {
 protected:
  void SetUp() override {
    partitioned_["g"] = PartitionedGroup{2, false};
    boot_port_ = &port_;
    Start(1);
  }
  Session* DurableMember(const std::string& id, QoS max_qos) {
    Session* session = brokers_[0]->Attach(id, false, &sink_).session;
    session->set_expiry_interval(3600);
    SubscriptionOptions options;
    options.max_qos = max_qos;
    brokers_[0]->Subscribe(session, "$share/g/jobs/+", options);
    Settle();
    return session;
  }
  const std::string key_ = SharedKey("g", "jobs/+");
  HandPort port_;
};

TEST_F(PartitionedGroupHandTest, AQos2MessageIsHandedThenPutAndSentOnlyAfterItsAck) {
  Session* member = DurableMember("m", QoS::kExactlyOnce);
  MessagePtr message = Make("jobs/1", "exactly", QoS::kExactlyOnce);
  brokers_[0]->TakeFromGroupQueue(message, key_, 1);
  Settle();
  using Hands = std::vector<std::pair<uint64_t, std::string>>;
  EXPECT_EQ(port_.hands, (Hands{{1, "m"}}));
  EXPECT_TRUE(port_.handoffs.empty());
  EXPECT_EQ(member->queued_messages(), 0u) << "not put before the hand is recorded";

  brokers_[0]->PutFromGroupQueue(message, key_, "m", 1);
  Settle();
  using Answers = std::vector<std::pair<uint64_t, bool>>;
  EXPECT_EQ(port_.handoffs, (Answers{{1, true}})) << "durable in the session";
  EXPECT_EQ(member->queued_messages(), 1u);
  EXPECT_TRUE(Drain(member).empty()) << "sent before its Ack committed";
  brokers_[0]->ReleaseHanded("m", Make("jobs/1", "another").get()->id);
  EXPECT_TRUE(Drain(member).empty()) << "another message's release";
  brokers_[0]->ReleaseHanded("m", message->id);
  Settle();
  EXPECT_EQ(Drain(member), std::vector<std::string>{"exactly"});

  // A session that is not (or no longer) a member: the put fails.
  brokers_[0]->PutFromGroupQueue(message, key_, "nobody", 2);
  Settle();
  EXPECT_EQ(port_.handoffs.back(), std::make_pair(uint64_t{2}, false));
}

TEST_F(PartitionedGroupHandTest, QoS1OrAMemberGrantedLessOrNoHandsAreDeliveredAtOnce) {
  Session* member = DurableMember("m", QoS::kAtLeastOnce);
  brokers_[0]->TakeFromGroupQueue(Make("jobs/1", "granted 1", QoS::kExactlyOnce), key_, 1);
  Settle();
  EXPECT_TRUE(port_.hands.empty()) << "delivered at QoS 1: at least once is its contract";
  EXPECT_EQ(Drain(member), std::vector<std::string>{"granted 1"});
  Session* two = DurableMember("two", QoS::kExactlyOnce);
  brokers_[0]->Unsubscribe(member, "$share/g/jobs/+");
  port_.hands_on = false;  // a node of an older binary in the cluster
  brokers_[0]->TakeFromGroupQueue(Make("jobs/1", "old peer", QoS::kExactlyOnce), key_, 2);
  Settle();
  EXPECT_TRUE(port_.hands.empty());
  EXPECT_EQ(Drain(two), std::vector<std::string>{"old peer"});
}

TEST_F(PartitionedGroupHandTest, ASessionKeptAfterARestartReportsTheGroupDeliveriesItHolds) {
  Session* member = DurableMember("m", QoS::kExactlyOnce);
  SubscriptionOptions plain;
  plain.max_qos = QoS::kAtLeastOnce;
  brokers_[0]->Subscribe(member, "plain/#", plain);
  MessagePtr message = Make("jobs/1", "held", QoS::kExactlyOnce);
  brokers_[0]->TakeFromGroupQueue(message, key_, 1);
  brokers_[0]->PutFromGroupQueue(message, key_, "m", 1);
  brokers_[0]->Publish(Make("plain/x", "not a group's"), [] {});
  Settle();
  ASSERT_EQ(member->queued_messages(), 2u);
  Restart();
  EXPECT_TRUE(port_.arrived.empty()) << "not before the registry says the session is still this node's";
  brokers_[0]->ConfirmRecovered("m", true);
  ASSERT_EQ(port_.arrived.size(), 1u);
  EXPECT_EQ(port_.arrived[0].client_id, "m");
  EXPECT_EQ(port_.arrived[0].keys, std::vector<std::string>{key_});
  EXPECT_EQ(port_.arrived[0].held, std::vector<MessageId>{message->id});
  Session* restored = brokers_[0]->FindSession("m");
  ASSERT_NE(restored, nullptr);
  EXPECT_EQ(QueuedPayloads(restored), (std::vector<std::string>{"held", "not a group's"}))
      << "restored deliveries are not held back";
}

}  // namespace
}  // namespace estuary::core
