// Issue 27, point 3: what a session's full queue does with a message for
// it (--queue-overflow drop-new | drop-oldest | reject, limits.h), in
// memory and with a store, on one shard and across shards.
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

// What a publisher was answered.
struct Answer {
  int safe = 0;
  int full = 0;
};

class Issue27QueueOverflowTest : public ::testing::Test {
 protected:
  void MakeShards(uint16_t count, QueueOverflow overflow, size_t max_messages = 3, bool durable = false,
                  size_t max_bytes = SessionLimits{}.max_queued_bytes) {
    metrics_ = std::vector<ShardMetrics>(count);
    for (uint16_t i = 0; i < count; ++i) {
      ShardConfig config;
      config.node_id = 7;
      config.shard_id = i;
      config.shard_count = count;
      config.limits.session.max_queued_messages = max_messages;
      config.limits.session.max_queued_bytes = max_bytes;
      config.limits.session.queue_overflow = overflow;
      shards_.push_back(std::make_unique<ShardBroker>(config, loop_, link_, metrics_[i]));
      link_.shards.push_back(shards_.back().get());
      if (durable) {
        engines_.push_back(std::make_unique<persistence::MemoryEngine>());
        shards_.back()->AttachStore(*engines_.back());
        ASSERT_TRUE(shards_.back()->Recover());
      }
    }
    Settle();
  }
  void Settle() {
    for (int i = 0; i < 5; ++i) {
      link_.RunAll();
      loop_.RunUntilIdle();
    }
  }
  // A persistent session subscribed to `filter` and offline.
  Session* Offline(uint16_t shard, const std::string& client_id, const std::string& filter = "t") {
    Session* session = shards_[shard]->Attach(client_id, false, &sink_).session;
    session->set_expiry_interval(3600);
    SubscriptionOptions options;
    options.max_qos = QoS::kAtLeastOnce;
    shards_[shard]->Subscribe(session, filter, options);
    shards_[shard]->Disconnect(session, &sink_, false);
    Settle();
    return session;
  }
  // A client id whose session lives on `shard`.
  std::string IdOn(uint16_t shard, std::string id) const {
    while (ShardForClientId(id, static_cast<uint16_t>(shards_.size())) != shard) id += "+";
    return id;
  }
  MessagePtr Make(const std::string& payload, const std::string& topic = "t") {
    auto message = std::make_shared<Message>();
    message->id = shards_[0]->NextMessageId();
    message->topic = topic;
    message->payload = MakePayload(payload);
    message->qos = QoS::kAtLeastOnce;
    message->origin = Origin{Protocol::kMqtt, "publisher", 7};
    return message;
  }
  // Publishes on shard 0 as a frontend does under reject (with on_full).
  void Publish(const std::string& payload, Answer& answer, bool tell_full = true) {
    std::function<void()> on_full;
    if (tell_full) on_full = [&answer] { ++answer.full; };
    shards_[0]->Publish(Make(payload), [&answer] { ++answer.safe; }, 0, std::move(on_full));
  }
  static std::vector<std::string> Queued(Session* session) {
    std::vector<std::string> payloads;
    session->ForEachDelivery([&](Delivery& delivery) { payloads.push_back(*delivery.message->payload); });
    return payloads;
  }
  uint64_t Sum(std::atomic<uint64_t> ShardMetrics::*field) const {
    uint64_t total = 0;
    for (const ShardMetrics& metrics : metrics_) total += (metrics.*field).load();
    return total;
  }

  io::ManualClock clock_;
  io::SimLoop loop_{clock_};
  QueueLink link_;
  NullSink sink_;
  std::vector<ShardMetrics> metrics_;
  std::vector<std::unique_ptr<persistence::MemoryEngine>> engines_;
  std::vector<std::unique_ptr<ShardBroker>> shards_;
};

TEST_F(Issue27QueueOverflowTest, Issue27DropNewKeepsTheOldestAndAcknowledges) {
  MakeShards(1, QueueOverflow::kDropNew);
  Session* away = Offline(0, "away");
  Answer answer;
  for (int i = 0; i < 5; ++i) Publish("m" + std::to_string(i), answer, /*tell_full=*/false);
  Settle();
  EXPECT_EQ(Queued(away), (std::vector<std::string>{"m0", "m1", "m2"}));
  EXPECT_EQ(answer.safe, 5);
  EXPECT_EQ(metrics_[0].queue_full_dropped.load(), 2u);
  EXPECT_EQ(metrics_[0].messages_dropped.load(), 2u);
  EXPECT_EQ(metrics_[0].queued_messages.load(), 3u);
}

TEST_F(Issue27QueueOverflowTest, Issue27DropOldestKeepsTheNewest) {
  MakeShards(1, QueueOverflow::kDropOldest);
  Session* away = Offline(0, "away");
  Answer answer;
  for (int i = 0; i < 5; ++i) Publish("m" + std::to_string(i), answer, /*tell_full=*/false);
  Settle();
  EXPECT_EQ(Queued(away), (std::vector<std::string>{"m2", "m3", "m4"}));
  EXPECT_EQ(answer.safe, 5);
  EXPECT_EQ(metrics_[0].queue_full_dropped_oldest.load(), 2u);
  EXPECT_EQ(metrics_[0].queue_full_dropped.load(), 0u);
  EXPECT_EQ(metrics_[0].queued_messages.load(), 3u);
}

// The store follows: the dropped ones' records go, so a restart recovers
// the newest.
TEST_F(Issue27QueueOverflowTest, Issue27DropOldestDeletesTheDroppedRecords) {
  MakeShards(1, QueueOverflow::kDropOldest, 3, /*durable=*/true);
  Offline(0, "away");
  Answer answer;
  for (int i = 0; i < 5; ++i) Publish("m" + std::to_string(i), answer, /*tell_full=*/false);
  Settle();
  shards_[0]->FlushStore();
  link_.shards.clear();
  shards_.clear();
  metrics_ = std::vector<ShardMetrics>(1);
  ShardConfig config;
  config.node_id = 7;
  config.limits.session.max_queued_messages = 3;
  shards_.push_back(std::make_unique<ShardBroker>(config, loop_, link_, metrics_[0]));
  link_.shards.push_back(shards_.back().get());
  shards_[0]->AttachStore(*engines_[0]);
  auto recovered = shards_[0]->Recover();
  ASSERT_TRUE(recovered);
  EXPECT_EQ(recovered->queued, 3u);
  EXPECT_EQ(Queued(shards_[0]->FindSession("away")), (std::vector<std::string>{"m2", "m3", "m4"}));
}

// What was sent (in flight) is not in the queue: drop-oldest leaves it.
TEST_F(Issue27QueueOverflowTest, Issue27DropOldestLeavesInFlightDeliveriesAlone) {
  MakeShards(1, QueueOverflow::kDropOldest, 2);
  Session* away = Offline(0, "away");
  Answer answer;
  Publish("sent", answer, false);
  Settle();
  // The client comes back, is sent the first message, and goes again.
  Session* back = shards_[0]->Attach("away", false, &sink_).session;
  ASSERT_EQ(back, away);
  ASSERT_TRUE(back->HasQueued());
  Delivery sent = back->PopQueued();
  const uint16_t packet_id = back->NextPacketId();
  back->AddInflight(packet_id, InflightDelivery{sent, InflightPhase::kAwaitingPuback, back->NextSendOrder()});
  shards_[0]->Disconnect(back, &sink_, false);
  for (int i = 0; i < 4; ++i) Publish("m" + std::to_string(i), answer, false);
  Settle();
  ASSERT_EQ(away->inflight().size(), 1u);
  EXPECT_EQ(*away->inflight().begin()->second.delivery.message->payload, "sent");
  EXPECT_EQ(away->queued_messages(), 2u);
  EXPECT_EQ(*away->PeekQueued().message->payload, "m2");
}

// A connected durable session's staged deliveries have their packet ids
// and in-flight records (session.h): they are the client's, not dropped;
// with nothing else queued the new message goes instead.
TEST_F(Issue27QueueOverflowTest, Issue27DropOldestSparesStagedDeliveries) {
  MakeShards(1, QueueOverflow::kDropOldest, 2, /*durable=*/true);
  Session* live = shards_[0]->Attach("live", false, &sink_).session;
  live->set_expiry_interval(3600);
  SubscriptionOptions options;
  options.max_qos = QoS::kAtLeastOnce;
  shards_[0]->Subscribe(live, "t", options);
  Answer answer;
  Publish("m0", answer, false);
  Publish("m1", answer, false);
  (void)live->HasQueued();  // the connection's first look stages them
  Settle();
  ASSERT_EQ(live->staged(), 2u);
  Publish("m2", answer, false);
  Settle();
  EXPECT_EQ(Queued(live), (std::vector<std::string>{"m0", "m1"}));
  EXPECT_EQ(metrics_[0].queue_full_dropped.load(), 1u);
  EXPECT_EQ(metrics_[0].queue_full_dropped_oldest.load(), 0u);
}

TEST_F(Issue27QueueOverflowTest, Issue27DropOldestMakesRoomByBytesToo) {
  Message probe;
  probe.topic = "t";
  probe.payload = MakePayload(std::string(1000, 'x'));
  const size_t size = probe.ApproximateBytes();
  MakeShards(1, QueueOverflow::kDropOldest, 100, false, size * 2 + size / 2);  // two fit by bytes
  Session* away = Offline(0, "away");
  Answer answer;
  for (int i = 0; i < 4; ++i) Publish(std::to_string(i) + std::string(999, 'x'), answer, false);
  Settle();
  std::vector<std::string> queued = Queued(away);
  ASSERT_EQ(queued.size(), 2u);
  EXPECT_EQ(queued[0][0], '2');
  EXPECT_EQ(queued[1][0], '3');
  // One message larger than the whole byte limit is dropped, not made room for.
  Publish(std::string(size * 3, 'y'), answer, false);
  Settle();
  EXPECT_EQ(Queued(away).size(), 2u);
  EXPECT_EQ(metrics_[0].queue_full_dropped.load(), 1u);
}

TEST_F(Issue27QueueOverflowTest, Issue27RejectTellsThePublisherAndTheOthersStillGetIt) {
  MakeShards(1, QueueOverflow::kReject, 2);
  Session* away = Offline(0, "away");
  Session* roomy = Offline(0, "roomy", "#");
  Answer answer;
  Publish("m0", answer);
  Publish("m1", answer);
  Settle();
  EXPECT_EQ(answer.safe, 2);
  EXPECT_EQ(answer.full, 0);
  // Drain the roomy one so it has room again.
  (void)roomy->TakeDeliveries([](const Delivery&) { return true; }, false);
  Publish("m2", answer);
  Settle();
  EXPECT_EQ(answer.safe, 2);
  EXPECT_EQ(answer.full, 1);
  EXPECT_EQ(Queued(away), (std::vector<std::string>{"m0", "m1"}));
  EXPECT_EQ(Queued(roomy), std::vector<std::string>{"m2"});
  EXPECT_EQ(metrics_[0].queue_full_dropped.load(), 1u);
  // Not matching the full session: acknowledged.
  shards_[0]->Publish(Make("other", "elsewhere"), [&answer] { ++answer.safe; }, 0, [&answer] { ++answer.full; });
  Settle();
  EXPECT_EQ(answer.safe, 3);
  EXPECT_EQ(answer.full, 1);
}

// A shared group's member is picked with room while one has it; when every
// member is full the group refuses the message too.
TEST_F(Issue27QueueOverflowTest, Issue27RejectCountsASharedGroupWhoseMembersAreFull) {
  MakeShards(1, QueueOverflow::kReject, 1);
  Session* first = Offline(0, "first", "$share/g/t");
  Session* second = Offline(0, "second", "$share/g/t");
  Answer answer;
  Publish("m0", answer);
  Publish("m1", answer);
  Settle();
  EXPECT_EQ(answer.safe, 2);
  EXPECT_EQ(first->queued_messages() + second->queued_messages(), 2u);
  Publish("m2", answer);
  Settle();
  EXPECT_EQ(answer.full, 1);
  EXPECT_EQ(metrics_[0].queue_full_dropped.load(), 1u);
}

// The full session lives on another shard of the node: the publisher's
// answer waits for that shard's word.
TEST_F(Issue27QueueOverflowTest, Issue27RejectHearsFromTheOtherShards) {
  MakeShards(2, QueueOverflow::kReject, 1);
  Session* away = Offline(1, IdOn(1, "away"));
  Answer answer;
  Publish("m0", answer);
  EXPECT_EQ(answer.safe + answer.full, 0) << "answered before shard 1 said";
  Settle();
  EXPECT_EQ(answer.safe, 1);
  Publish("m1", answer);
  Settle();
  EXPECT_EQ(answer.full, 1);
  EXPECT_EQ(Queued(away), std::vector<std::string>{"m0"});
  EXPECT_EQ(Sum(&ShardMetrics::queue_full_dropped), 1u);
}

// With a store the answer also waits for durability, and still says full.
TEST_F(Issue27QueueOverflowTest, Issue27RejectWithAStore) {
  MakeShards(2, QueueOverflow::kReject, 1, /*durable=*/true);
  Offline(0, IdOn(0, "here"));
  Offline(1, IdOn(1, "there"));
  Answer answer;
  Publish("m0", answer);
  Settle();
  Publish("m1", answer);
  Settle();
  EXPECT_EQ(answer.safe, 1);
  EXPECT_EQ(answer.full, 1);
}

}  // namespace
}  // namespace estuary::core
