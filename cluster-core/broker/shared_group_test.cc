// Shared subscriptions: a departed member's messages go to another member;
// the member and destination strategies (shared_strategy.h).
#include <gtest/gtest.h>

#include <algorithm>

#include <deque>
#include <map>
#include <memory>
#include <set>

#include "cluster-core/broker/shard_broker.h"
#include "cluster-core/broker/shared_strategy.h"
#include "cluster-core/broker/queue_link_for_tests.h"
#include "cluster-core/store/durable_broker_fixture_for_tests.h"
#include "io/sim/sim_loop.h"

namespace estuary::core {
namespace {

using test_support::NullSink;
using test_support::QueueLink;

// Records forwards to other nodes; routes and the rest are ignored.
class RecordingPort final : public ClusterPort {
 public:
  void RouteChanged(const RouteUpdate&) override {}
  void Forward(uint16_t node, NodeForward forward) override { forwards.emplace_back(node, std::move(forward)); }
  void ForwardSafe(uint16_t, uint64_t) override {}
  std::vector<std::pair<uint16_t, NodeForward>> forwards;
};

class SharedGroupTest : public ::testing::Test {
 protected:
  void MakeShards(uint16_t count, SharedGroupConfig shared = {}, BrokerLimits limits = {}) {
    metrics_ = std::vector<ShardMetrics>(count);
    for (uint16_t i = 0; i < count; ++i) {
      ShardConfig config;
      config.limits = limits;
      config.node_id = 7;
      config.shard_id = i;
      config.shard_count = count;
      config.shared = shared;
      shards_.push_back(std::make_unique<ShardBroker>(config, loop_, link_, metrics_[i]));
      link_.shards.push_back(shards_.back().get());
    }
  }
  MessagePtr Make(std::string topic, std::string payload, QoS qos = QoS::kAtLeastOnce) {
    auto message = std::make_shared<Message>();
    message->id = shards_[0]->NextMessageId();
    message->topic = std::move(topic);
    message->payload = MakePayload(std::move(payload));
    message->qos = qos;
    message->origin = Origin{Protocol::kMqtt, "publisher", 7};
    return message;
  }
  Session* Member(uint16_t shard, const std::string& id, QoS qos = QoS::kExactlyOnce,
                  const std::string& filter = "$share/g/jobs/+") {
    sinks_.push_back(std::make_unique<NullSink>());
    Session* session = shards_[shard]->Attach(id, true, sinks_.back().get()).session;
    SubscriptionOptions options;
    options.max_qos = qos;
    shards_[shard]->Subscribe(session, filter, options);
    link_.RunAll();
    return session;
  }
  void Leave(uint16_t shard, Session* session) {
    shards_[shard]->Disconnect(session, session->sink(), false);
    link_.RunAll();
  }
  // Sends what is queued as a frontend would, leaving it unacknowledged.
  std::vector<uint16_t> SendAll(Session* session) {
    std::vector<uint16_t> ids;
    while (session->HasQueued()) {
      const uint16_t packet_id = session->NextPacketId();
      Delivery delivery = session->PopQueued();
      for (size_t i = 0; i < shards_.size(); ++i) {  // the metrics a frontend keeps
        if (shards_[i]->FindSession(session->client_id()) != session) continue;
        shards_[i]->OnDequeued(*session);
        ShardMetrics::Add(metrics_[i].inflight_messages);
      }
      const InflightPhase phase =
          delivery.qos == QoS::kExactlyOnce ? InflightPhase::kAwaitingPubrec : InflightPhase::kAwaitingPuback;
      session->AddInflight(packet_id, InflightDelivery{std::move(delivery), phase, session->NextSendOrder()});
      ids.push_back(packet_id);
    }
    return ids;
  }
  static std::vector<std::string> Drain(Session* session) {
    std::vector<std::string> payloads;
    while (session->HasQueued()) payloads.push_back(*session->PopQueued().message->payload);
    return payloads;
  }
  void Publish(uint16_t shard, const std::string& topic, const std::string& payload, QoS qos = QoS::kAtLeastOnce) {
    shards_[shard]->Publish(Make(topic, payload, qos));
    link_.RunAll();
  }

  io::ManualClock clock_;
  io::SimLoop loop_{clock_};
  QueueLink link_;
  std::vector<ShardMetrics> metrics_;
  std::vector<std::unique_ptr<ShardBroker>> shards_;
  std::vector<std::unique_ptr<NullSink>> sinks_;
};

TEST_F(SharedGroupTest, FiveUnacknowledgedQos1GoToTheOtherMemberWhenAMemberDisconnects) {
  MakeShards(1);
  Session* a = Member(0, "a");
  for (int i = 0; i < 5; ++i) Publish(0, "jobs/1", "m" + std::to_string(i));
  EXPECT_EQ(SendAll(a).size(), 5u);  // in flight at a, never PUBACKed
  Session* b = Member(0, "b");
  Leave(0, a);  // clean session: it ends
  EXPECT_EQ(metrics_[0].shared_redelivered.load(), 5u);
  EXPECT_EQ(metrics_[0].inflight_messages.load(), 0u);
  EXPECT_EQ(metrics_[0].queued_messages.load(), 5u);  // now b's
  EXPECT_EQ(Drain(b), (std::vector<std::string>{"m0", "m1", "m2", "m3", "m4"}));
}

TEST_F(SharedGroupTest, Qos2NotYetPubrecedMovesAndAPubrecedOneStays) {
  MakeShards(1);
  Session* a = Member(0, "a");
  for (int i = 0; i < 4; ++i) Publish(0, "jobs/1", "m" + std::to_string(i), QoS::kExactlyOnce);
  const std::vector<uint16_t> ids = SendAll(a);
  a->MarkReleased(ids[0]);  // PUBREC came: the client has m0
  Publish(0, "jobs/1", "queued", QoS::kExactlyOnce);  // queued, not sent
  Publish(0, "jobs/1", "zero", QoS::kAtMostOnce);     // QoS 0: never re-sent
  Session* b = Member(0, "b");
  Leave(0, a);
  std::vector<std::string> got;
  while (b->HasQueued()) {
    Delivery delivery = b->PopQueued();
    EXPECT_EQ(delivery.qos, QoS::kExactlyOnce);
    got.push_back(*delivery.message->payload);
  }
  EXPECT_EQ(got, (std::vector<std::string>{"m1", "m2", "m3", "queued"}));
}

TEST_F(SharedGroupTest, TheNewDeliveryTakesTheNewMembersGrantedQos) {
  MakeShards(1);
  Session* a = Member(0, "a");
  Publish(0, "jobs/1", "x", QoS::kExactlyOnce);
  SendAll(a);
  Session* b = Member(0, "b", QoS::kAtLeastOnce);
  Leave(0, a);
  ASSERT_TRUE(b->HasQueued());
  EXPECT_EQ(b->PopQueued().qos, QoS::kAtLeastOnce);
}

TEST_F(SharedGroupTest, AMemberOnAnotherShardGetsThemThroughTheShardLink) {
  MakeShards(2);
  Session* a = Member(0, "a");
  for (int i = 0; i < 5; ++i) Publish(0, "jobs/1", "m" + std::to_string(i));
  // Only a was a member: all five are a's.
  SendAll(a);
  Session* b = Member(1, "b");
  Leave(0, a);
  EXPECT_EQ(Drain(b), (std::vector<std::string>{"m0", "m1", "m2", "m3", "m4"}));
}

TEST_F(SharedGroupTest, AMemberOnAnotherNodeGetsThemThroughTheForwardPath) {
  MakeShards(1);
  RecordingPort port;
  shards_[0]->set_cluster(&port);
  Session* a = Member(0, "a");
  for (int i = 0; i < 3; ++i) Publish(0, "jobs/1", "m" + std::to_string(i));
  SendAll(a);
  // Node 9 holds the group too; the next pick would be it or a, but a leaves.
  shards_[0]->ApplyRouteUpdate(RouteUpdate{true, "jobs/+", SharedKey("g", "jobs/+"), NodeDestination(9)});
  port.forwards.clear();
  Leave(0, a);
  ASSERT_EQ(port.forwards.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(port.forwards[i].first, 9);
    EXPECT_FALSE(port.forwards[i].second.plain);
    EXPECT_EQ(port.forwards[i].second.shared_keys, std::vector<std::string>{SharedKey("g", "jobs/+")});
    EXPECT_EQ(port.forwards[i].second.safe_token, 0u);
    EXPECT_EQ(*port.forwards[i].second.message->payload, "m" + std::to_string(i));
  }
}

// The partition refused this node's changes to a member's session (it was
// taken over while the node was cut off): the copy here goes and the
// messages it holds, unacknowledged, go to the other member.
TEST_F(SharedGroupTest, AMemberLostToAnotherNodeGivesItsMessagesToTheOtherMember) {
  MakeShards(2);
  Session* a = Member(0, "a");
  Session* b = Member(1, "b");
  for (int i = 0; i < 4; ++i) Publish(0, "jobs/1", "m" + std::to_string(i));
  const auto sent_to_a = SendAll(a);
  ASSERT_EQ(sent_to_a.size(), 2u);
  shards_[0]->LostToAnotherNode("a");
  link_.RunAll();
  EXPECT_EQ(shards_[0]->FindSession("a"), nullptr);
  auto got = Drain(b);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::string>{"m0", "m1", "m2", "m3"}));
  EXPECT_EQ(metrics_[0].sessions_stale_dropped.load(), 1u);
  shards_[0]->LostToAnotherNode("a");  // again, or never here: nothing happens
}

TEST_F(SharedGroupTest, WithNoMemberLeftTheyAreDroppedAndCounted) {
  MakeShards(1);
  Session* a = Member(0, "a");
  for (int i = 0; i < 3; ++i) Publish(0, "jobs/1", "m" + std::to_string(i));
  SendAll(a);
  Leave(0, a);
  EXPECT_EQ(metrics_[0].shared_dropped_no_member.load(), 3u);
  EXPECT_EQ(metrics_[0].shared_redelivered.load(), 0u);
}

TEST_F(SharedGroupTest, PlainSubscriptionDeliveriesNeverMove) {
  MakeShards(1);
  Session* a = Member(0, "a", QoS::kAtLeastOnce, "jobs/+");
  Publish(0, "jobs/1", "plain");
  SendAll(a);
  Session* b = Member(0, "b");
  Leave(0, a);
  EXPECT_FALSE(b->HasQueued());
}

TEST_F(SharedGroupTest, UnsubscribeMovesQueuedAndKeepsInFlight) {
  MakeShards(1);
  Session* a = Member(0, "a");
  Publish(0, "jobs/1", "sent");
  SendAll(a);
  Publish(0, "jobs/1", "waiting");
  Session* b = Member(0, "b");
  EXPECT_EQ(shards_[0]->Unsubscribe(a, "$share/g/jobs/+"), UnsubscribeOutcome::kRemoved);
  link_.RunAll();
  EXPECT_EQ(a->inflight().size(), 1u);  // [MQTT-3.10.4-3]: completed with a
  EXPECT_FALSE(a->HasQueued());
  EXPECT_EQ(Drain(b), std::vector<std::string>{"waiting"});
  // a's session ends before it acknowledges: the in-flight one moves too.
  Leave(0, a);
  EXPECT_EQ(Drain(b), std::vector<std::string>{"sent"});
}

TEST_F(SharedGroupTest, UnsubscribeOfTheLastMemberKeepsWhatItHas) {
  MakeShards(1);
  Session* a = Member(0, "a");
  Publish(0, "jobs/1", "waiting");
  shards_[0]->Unsubscribe(a, "$share/g/jobs/+");
  EXPECT_EQ(Drain(a), std::vector<std::string>{"waiting"});
  EXPECT_EQ(metrics_[0].shared_dropped_no_member.load(), 0u);
}

TEST_F(SharedGroupTest, APersistentMemberKeepsThemForTheDelayThenTheyMove) {
  SharedGroupConfig shared;
  shared.redelivery_delay_ms = 1000;
  MakeShards(1, shared);
  Session* a = Member(0, "a");
  a->set_expiry_interval(3600);
  for (int i = 0; i < 5; ++i) Publish(0, "jobs/1", "m" + std::to_string(i));
  SendAll(a);
  Publish(0, "jobs/1", "q");
  Session* b = Member(0, "b");
  Leave(0, a);
  loop_.AdvanceBy(999);
  EXPECT_FALSE(b->HasQueued());
  EXPECT_EQ(a->inflight().size(), 5u);
  loop_.AdvanceBy(1);
  link_.RunAll();
  EXPECT_EQ(Drain(b), (std::vector<std::string>{"m0", "m1", "m2", "m3", "m4", "q"}));
  EXPECT_TRUE(a->inflight().empty());
  EXPECT_FALSE(a->HasQueued());
}

// [MQTT-4.8.2-4]: a QoS 2 message sent to a persistent member's client
// (PUBREC not seen) is that client's to finish when it reconnects: after
// the delay only what it was never sent (and QoS 1 in flight) moves. Given
// away, it could reach two members, and its packet id would be free here
// for another message the client would take for a resend of the first.
TEST_F(SharedGroupTest, APersistentMembersSentQos2StaysWithItAfterTheDelay) {
  SharedGroupConfig shared;
  shared.redelivery_delay_ms = 1000;
  MakeShards(1, shared);
  Session* a = Member(0, "a");
  a->set_expiry_interval(3600);
  Publish(0, "jobs/1", "two", QoS::kExactlyOnce);
  Publish(0, "jobs/1", "one", QoS::kAtLeastOnce);
  const std::vector<uint16_t> ids = SendAll(a);
  ASSERT_EQ(ids.size(), 2u);
  Publish(0, "jobs/1", "queued two", QoS::kExactlyOnce);
  Session* b = Member(0, "b");
  Leave(0, a);
  loop_.AdvanceBy(1000);
  link_.RunAll();
  EXPECT_EQ(Drain(b), (std::vector<std::string>{"one", "queued two"}));
  ASSERT_EQ(a->inflight().size(), 1u);
  EXPECT_EQ(*a->inflight().at(ids[0]).delivery.message->payload, "two");
}

TEST_F(SharedGroupTest, APersistentMemberBackWithinTheDelayKeepsThem) {
  SharedGroupConfig shared;
  shared.redelivery_delay_ms = 1000;
  MakeShards(1, shared);
  Session* a = Member(0, "a");
  a->set_expiry_interval(3600);
  Publish(0, "jobs/1", "m");
  SendAll(a);
  Session* b = Member(0, "b");
  Leave(0, a);
  loop_.AdvanceBy(500);
  NullSink again;
  EXPECT_TRUE(shards_[0]->Attach("a", false, &again).session_present);
  loop_.AdvanceBy(2000);
  EXPECT_FALSE(b->HasQueued());
  EXPECT_EQ(a->inflight().size(), 1u);
}

TEST_F(SharedGroupTest, APersistentMemberAloneInItsGroupKeepsThem) {
  SharedGroupConfig shared;
  shared.redelivery_delay_ms = 0;
  MakeShards(1, shared);
  Session* a = Member(0, "a");
  a->set_expiry_interval(3600);
  Publish(0, "jobs/1", "m");
  SendAll(a);
  Leave(0, a);
  loop_.AdvanceBy(10);
  EXPECT_EQ(a->inflight().size(), 1u);
  EXPECT_EQ(metrics_[0].shared_dropped_no_member.load(), 0u);
}

TEST_F(SharedGroupTest, ARestoredSessionsDeliveriesAreTaggedFromItsSubscriptionsAndMove) {
  SharedGroupConfig shared;
  shared.redelivery_delay_ms = 100;
  MakeShards(1, shared);
  Session* a = Member(0, "a");
  SubscriptionOptions options;
  options.max_qos = QoS::kAtLeastOnce;
  shards_[0]->Subscribe(a, "plain/#", options);
  a->set_expiry_interval(3600);
  Leave(0, a);
  // As a restore from a store or a partition leaves them: no shared tag.
  for (const char* topic : {"jobs/1", "plain/x", "jobs/2"}) {
    Delivery delivery;
    delivery.message = Make(topic, topic);
    delivery.qos = QoS::kAtLeastOnce;
    a->RestoreQueued(std::move(delivery));
  }
  Session* b = Member(0, "b");
  shards_[0]->SharedSessionRestored(*a, /*disconnected_member=*/true);
  loop_.AdvanceBy(100);
  EXPECT_EQ(Drain(b), (std::vector<std::string>{"jobs/1", "jobs/2"}));
  EXPECT_EQ(a->queued_messages(), 1u);  // the plain one stays
}

TEST_F(SharedGroupTest, AForwardWhoseGroupLeftThisNodeGoesOnToAnotherNodeOnce) {
  MakeShards(1);
  RecordingPort port;
  shards_[0]->set_cluster(&port);
  const std::string key = SharedKey("g", "jobs/+");
  shards_[0]->ApplyRouteUpdate(RouteUpdate{true, "jobs/+", key, NodeDestination(9)});
  // No member here any more: sent on to node 9, marked.
  shards_[0]->DeliverFromNode(Make("jobs/1", "late"), false, {key}, [] {});
  ASSERT_EQ(port.forwards.size(), 1u);
  EXPECT_EQ(port.forwards[0].first, 9);
  std::string sent = port.forwards[0].second.shared_keys.at(0);
  EXPECT_TRUE(StripRerouted(sent));
  EXPECT_EQ(sent, key);
  // A marked one is never sent on again: dropped and counted.
  shards_[0]->DeliverFromNode(Make("jobs/1", "again"), false, {MarkRerouted(key)}, [] {});
  EXPECT_EQ(port.forwards.size(), 1u);
  EXPECT_EQ(metrics_[0].shared_dropped_no_member.load(), 1u);
  // A marked one whose group is here is delivered here.
  Session* a = Member(0, "a");
  shards_[0]->DeliverFromNode(Make("jobs/1", "here"), false, {MarkRerouted(key)}, [] {});
  EXPECT_EQ(Drain(a), std::vector<std::string>{"here"});
}

// The 5-node fault suite's shared-group losses: a member taken over from a
// dead node (disconnected) filled its queue while the other nodes kept
// picking its node, and what came after was dropped. Now a node whose
// members are all full sends the message on to another node holding the
// group, once.
TEST_F(SharedGroupTest, AForwardToANodeWhoseMembersAreAllFullGoesOnToAnotherNodeOnce) {
  BrokerLimits limits;
  limits.session.max_queued_messages = 2;
  MakeShards(1, {}, limits);
  RecordingPort port;
  shards_[0]->set_cluster(&port);
  const std::string key = SharedKey("g", "jobs/+");
  shards_[0]->ApplyRouteUpdate(RouteUpdate{true, "jobs/+", key, NodeDestination(9)});
  Session* member = Member(0, "member");  // it reads nothing: its queue fills
  for (int i = 0; i < 2; ++i) shards_[0]->DeliverFromNode(Make("jobs/1", "q" + std::to_string(i)), false, {key}, [] {});
  EXPECT_EQ(member->queued_messages(), 2u);
  EXPECT_TRUE(port.forwards.empty());
  shards_[0]->DeliverFromNode(Make("jobs/1", "more"), false, {key}, [] {});
  ASSERT_EQ(port.forwards.size(), 1u);
  EXPECT_EQ(port.forwards[0].first, 9);
  std::string sent = port.forwards[0].second.shared_keys.at(0);
  EXPECT_TRUE(StripRerouted(sent));
  EXPECT_EQ(sent, key);
  // Sent on once only: a marked one finding every member full is dropped, as any full queue's.
  shards_[0]->DeliverFromNode(Make("jobs/1", "again"), false, {MarkRerouted(key)}, [] {});
  EXPECT_EQ(port.forwards.size(), 1u);
  EXPECT_EQ(metrics_[0].messages_dropped.load(), 1u);
  EXPECT_EQ(member->queued_messages(), 2u);
}

// Issue 7, the kill of two of five with a fast down: a member session
// taken over from a dead node (which remembers what it holds, so that a
// replayed forward is not queued twice) gave its messages to another node
// after the redelivery delay; that node's only member could not take one
// and sent it back. It came back to the same session, which took it for a
// replay of what it had held and dropped it: acknowledged and lost. What
// leaves a session is forgotten there.
TEST_F(SharedGroupTest, AMessageTakenFromASessionTakenOverMayComeBackToIt) {
  SharedGroupConfig shared;
  shared.redelivery_delay_ms = 100;
  MakeShards(1, shared);
  RecordingPort port;
  shards_[0]->set_cluster(&port);
  const std::string key = SharedKey("g", "jobs/+");
  Session* a = Member(0, "a");
  a->set_expiry_interval(3600);
  Publish(0, "jobs/1", "m");
  Leave(0, a);
  a->MarkTakenFrom(3, loop_.clock().WallMs() + 60'000);  // adopted from gone node 3, holding m
  shards_[0]->ApplyRouteUpdate(RouteUpdate{true, "jobs/+", key, NodeDestination(9)});
  loop_.AdvanceBy(100);
  link_.RunAll();
  ASSERT_EQ(port.forwards.size(), 1u);  // m went to node 9's member
  EXPECT_FALSE(a->HasQueued());
  const MessagePtr m = port.forwards[0].second.message;
  // Node 9 turned it away (its member full): back here, the group's only other holder.
  shards_[0]->DeliverFromNode(m, false, {MarkRerouted(key)}, [] {});
  EXPECT_EQ(Drain(a), std::vector<std::string>{"m"});
  EXPECT_EQ(metrics_[0].replayed_duplicates_skipped.load(), 0u);
  // A replay of a message it was given (and sent) is still dropped.
  shards_[0]->DeliverFromNode(m, false, {key}, [] {});
  shards_[0]->DeliverFromNode(Make("jobs/1", "n"), false, {key}, [] {});
  EXPECT_EQ(Drain(a), std::vector<std::string>{"n"});
  EXPECT_EQ(metrics_[0].replayed_duplicates_skipped.load(), 1u);
}

TEST_F(SharedGroupTest, AShardForwardWhoseGroupLeftGoesToAnotherShard) {
  MakeShards(3);
  Session* b = Member(1, "b");
  Session* c = Member(2, "c");
  // Shard 0 forwards to shard 1 and b leaves before it arrives: shard 1
  // sends it on to shard 2.
  shards_[0]->Publish(Make("jobs/1", "m"));  // round robin: shard 1 first
  shards_[1]->Disconnect(b, b->sink(), false);
  link_.RunAll();
  EXPECT_EQ(Drain(c), std::vector<std::string>{"m"});
  EXPECT_EQ(metrics_[1].shared_redelivered.load(), 1u);
}

// --- strategies ---------------------------------------------------------------

TEST_F(SharedGroupTest, AMemberWithAFullQueueIsPassedOver) {
  BrokerLimits limits;
  limits.session.max_queued_messages = 3;
  MakeShards(1, {}, limits);
  Session* stuck = Member(0, "stuck");
  Session* b = Member(0, "b");
  size_t taken_by_b = 0;
  for (int i = 0; i < 10; ++i) {
    Publish(0, "jobs/1", std::to_string(i));
    taken_by_b += Drain(b).size();  // b keeps up; stuck takes nothing
  }
  EXPECT_EQ(stuck->queued_messages(), 3u);  // full after its turns 0, 2, 4: then passed over
  EXPECT_EQ(taken_by_b, 7u);
  EXPECT_EQ(metrics_[0].messages_dropped.load(), 0u);
  // Both full: dropped, as for any full queue.
  for (int i = 0; i < 4; ++i) Publish(0, "jobs/1", "over");
  EXPECT_EQ(metrics_[0].messages_dropped.load(), 1u);
}

TEST_F(SharedGroupTest, RoundRobinAlternatesMembers) {
  MakeShards(1);
  Session* a = Member(0, "a");
  Session* b = Member(0, "b");
  for (int i = 0; i < 6; ++i) Publish(0, "jobs/1", std::to_string(i));
  EXPECT_EQ(Drain(a), (std::vector<std::string>{"0", "2", "4"}));
  EXPECT_EQ(Drain(b), (std::vector<std::string>{"1", "3", "5"}));
}

TEST_F(SharedGroupTest, LeastOutstandingPicksTheMemberWithFewestUnacknowledged) {
  SharedGroupConfig shared;
  shared.strategy = SharedStrategy::kLeastOutstanding;
  MakeShards(1, shared);
  Session* a = Member(0, "a");
  for (int i = 0; i < 3; ++i) Publish(0, "jobs/1", "early" + std::to_string(i));
  SendAll(a);  // a: 3 in flight
  Session* b = Member(0, "b");
  // b has none: the next three go to b, then they alternate.
  for (int i = 0; i < 5; ++i) Publish(0, "jobs/1", std::to_string(i));
  EXPECT_EQ(b->queued_messages(), 4u);  // 0 1 2, then 3 to a (tie 3-3 taken in turn), 4 to b
  EXPECT_EQ(a->queued_messages(), 1u);
}

TEST_F(SharedGroupTest, LeastOutstandingCountsQueuedAndInFlight) {
  SharedGroupConfig shared;
  shared.strategy = SharedStrategy::kLeastOutstanding;
  MakeShards(1, shared);
  Session* a = Member(0, "a");
  Session* b = Member(0, "b");
  Session* c = Member(0, "c");
  for (int i = 0; i < 30; ++i) Publish(0, "jobs/1", std::to_string(i));
  EXPECT_EQ(a->queued_messages(), 10u);
  EXPECT_EQ(b->queued_messages(), 10u);
  EXPECT_EQ(c->queued_messages(), 10u);
  SendAll(a);    // a: 10 in flight
  Drain(b);      // b: 0 (taken and sent as QoS 0 would be)
  for (int i = 0; i < 10; ++i) Publish(0, "jobs/1", "x");
  EXPECT_EQ(b->queued_messages(), 10u);  // every one to b until it is level with a and c
  EXPECT_EQ(a->queued_messages(), 0u);
  EXPECT_EQ(c->queued_messages(), 10u);
}

TEST_F(SharedGroupTest, StickyTopicKeepsATopicOnOneMemberAndMovesOnlyTheDepartedOnesTopics) {
  SharedGroupConfig shared;
  shared.strategy = SharedStrategy::kStickyTopic;
  MakeShards(1, shared);
  std::vector<Session*> members = {Member(0, "a"), Member(0, "b"), Member(0, "c")};
  auto owner_of = [&](const std::string& topic) -> std::string {
    Publish(0, topic, topic);
    for (Session* member : members) {
      if (member->HasQueued()) {
        Drain(member);
        return member->client_id();
      }
    }
    return "";
  };
  std::map<std::string, std::string> owners;
  std::set<std::string> used;
  for (int i = 0; i < 30; ++i) {
    const std::string topic = "jobs/" + std::to_string(i);
    owners[topic] = owner_of(topic);
    used.insert(owners[topic]);
    for (int again = 0; again < 3; ++again) EXPECT_EQ(owner_of(topic), owners[topic]) << topic;
  }
  EXPECT_EQ(used.size(), 3u);  // spread over all three
  // c leaves: its topics move, the others' stay where they were.
  Session* c = members[2];
  members.pop_back();
  Leave(0, c);
  for (const auto& [topic, owner] : owners) {
    const std::string now = owner_of(topic);
    if (owner != "c") {
      EXPECT_EQ(now, owner) << topic;
    }
    EXPECT_NE(now, "c");
  }
}

TEST(SharedStrategyTest, StickyDestinationIsStableAndSpreads) {
  std::vector<Destination> destinations = {NodeDestination(3), 0, NodeDestination(2), 1};
  std::set<Destination> chosen;
  for (int i = 0; i < 64; ++i) {
    const std::string topic = "t/" + std::to_string(i);
    uint32_t turn = 0;
    std::vector<Destination> copy = destinations;
    const Destination first = PickSharedDestination(SharedStrategy::kStickyTopic, copy, topic, turn);
    std::vector<Destination> reordered = {1, NodeDestination(2), 0, NodeDestination(3)};
    EXPECT_EQ(PickSharedDestination(SharedStrategy::kStickyTopic, reordered, topic, turn), first);
    chosen.insert(first);
  }
  EXPECT_EQ(chosen.size(), 4u);
}

TEST(SharedStrategyTest, RoundRobinDestinationTakesTurns) {
  std::vector<Destination> destinations = {NodeDestination(2), 0};
  uint32_t turn = 0;
  EXPECT_EQ(PickSharedDestination(SharedStrategy::kRoundRobin, destinations, "t", turn), 0u);
  EXPECT_EQ(PickSharedDestination(SharedStrategy::kRoundRobin, destinations, "t", turn), NodeDestination(2));
  EXPECT_EQ(PickSharedDestination(SharedStrategy::kRoundRobin, destinations, "t", turn), 0u);
}

TEST(SharedStrategyTest, NamesParseBothWays) {
  for (SharedStrategy strategy :
       {SharedStrategy::kRoundRobin, SharedStrategy::kLeastOutstanding, SharedStrategy::kStickyTopic}) {
    EXPECT_EQ(ParseSharedStrategy(SharedStrategyName(strategy)), strategy);
  }
  EXPECT_FALSE(ParseSharedStrategy("random").has_value());
}


// Issue 7: a member's group deliveries keep their group's key in their
// stored records, so a restart (or an adoption, which restores the same
// records) gives them back the group that made them, whatever the member
// subscribes to by then.
class SharedGroupRestartTest : public test_support::DurableBrokerTest {
 protected:
  // A persistent member, connected (so its groups pick it before an
  // offline member).
  Session* ConnectedMember(const std::string& id, const std::vector<std::string>& filters) {
    Session* session = brokers_[0]->Attach(id, false, &sink_).session;
    session->set_expiry_interval(3600);
    SubscriptionOptions options;
    options.max_qos = QoS::kAtLeastOnce;
    for (const std::string& filter : filters) brokers_[0]->Subscribe(session, filter, options);
    Settle();
    return session;
  }
  // Sends what is queued as a frontend would, leaving it unacknowledged.
  size_t SendAll(Session* session) {
    // The first look stages the queue (in-flight records written); it is
    // shown once they are durable.
    (void)session->HasQueued();
    Settle();
    size_t sent = 0;
    while (session->HasQueued()) {
      const uint16_t packet_id = session->NextPacketId();
      Delivery delivery = session->PopQueued();
      brokers_[0]->OnDequeued(*session);
      ShardMetrics::Add(metrics_[0].inflight_messages);
      session->AddInflight(packet_id, InflightDelivery{std::move(delivery), InflightPhase::kAwaitingPuback,
                                                       session->NextSendOrder()});
      ++sent;
    }
    Settle();
    return sent;
  }
};

TEST_F(SharedGroupRestartTest, Issue7InFlightGroupMessagesMoveAfterARestartThoughTheMemberLeftTheGroup) {
  Start(1);
  OfflineSubscriber("b", "$share/g/jobs/+");
  Session* a = ConnectedMember("a", {"$share/g/jobs/+"});
  for (int i = 0; i < 3; ++i) brokers_[0]->Publish(Make("jobs/1", "m" + std::to_string(i)), [] {});
  Settle();
  ASSERT_EQ(SendAll(a), 3u);  // in flight at a, never PUBACKed
  // In flight, they are completed with a [MQTT-3.10.4-3]: they stay.
  EXPECT_EQ(brokers_[0]->Unsubscribe(a, "$share/g/jobs/+"), UnsubscribeOutcome::kRemoved);
  Settle();
  ASSERT_EQ(a->inflight().size(), 3u);

  EXPECT_EQ(Restart().inflight, 3u);
  a = brokers_[0]->FindSession("a");
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(a->subscriptions().empty());
  // a's session ends. When the key was rebuilt from the subscriptions, the
  // restored a had no $share subscription left to rebuild it from: its
  // deliveries were plain ones, ended with the session, and b got nothing.
  brokers_[0]->Attach("a", /*clean_start=*/true, &sink_);
  Settle();
  EXPECT_EQ(metrics_[0].shared_redelivered.load(), 3u);
  EXPECT_EQ(QueuedPayloads(brokers_[0]->FindSession("b")), (std::vector<std::string>{"m0", "m1", "m2"}));
}

TEST_F(SharedGroupRestartTest, Issue7AfterARestartOnlyTheGroupsCopyMovesWhenAPlainSubscriptionAlsoMatched) {
  Start(1);
  OfflineSubscriber("b", "$share/g/jobs/+");
  Session* a = ConnectedMember("a", {"$share/g/jobs/+", "jobs/#"});
  brokers_[0]->Publish(Make("jobs/1", "both"), [] {});
  Settle();
  ASSERT_EQ(SendAll(a), 2u);  // the group's copy and the plain one
  // A clean restart leaves a disconnected: after the redelivery delay what
  // the group gave it goes to b, back by then (so b's own delay, which
  // would give b's messages to a, no longer runs).
  EXPECT_EQ(Restart().inflight, 2u);
  a = brokers_[0]->FindSession("a");
  ASSERT_NE(a, nullptr);
  Session* b = brokers_[0]->Attach("b", false, &sink_).session;
  loop_.AdvanceBy(SharedGroupConfig{}.redelivery_delay_ms);
  Settle();
  // The rebuild kept both with a (the topic matched a plain subscription,
  // so either copy might have been the plain one): b got nothing.
  EXPECT_EQ(metrics_[0].shared_redelivered.load(), 1u);
  EXPECT_EQ(Drain(b), (std::vector<std::string>{"both"}));
  ASSERT_EQ(a->inflight().size(), 1u);
  EXPECT_EQ(a->inflight().begin()->second.delivery.shared_key, nullptr);  // the plain one stays
}

// A restored key is the group's own string when the group has a member on
// the shard, one string per group otherwise. (The rebuild from the
// subscriptions tagged h's deliveries with g's key: same filter, and g was
// the only group a still subscribed to.)
TEST_F(SharedGroupRestartTest, Issue7RestoredKeysShareTheGroupsKey) {
  Start(1);
  OfflineSubscriber("b", "$share/g/jobs/+");
  Session* a = ConnectedMember("a", {"$share/g/jobs/+", "$share/h/jobs/+"});
  for (int i = 0; i < 2; ++i) brokers_[0]->Publish(Make("jobs/1", "m" + std::to_string(i)), [] {});
  Settle();
  ASSERT_EQ(SendAll(a), 4u);  // two from g, two from h
  EXPECT_EQ(brokers_[0]->Unsubscribe(a, "$share/h/jobs/+"), UnsubscribeOutcome::kRemoved);  // h has no member left
  Restart();
  a = brokers_[0]->FindSession("a");
  ASSERT_NE(a, nullptr);
  MatchResult match;
  brokers_[0]->router().Match("jobs/1", match);
  ASSERT_EQ(match.local_shared.size(), 1u);  // g (b is its member here), not h
  const SharedGroup* g = match.local_shared[0];
  ASSERT_EQ(g->key, SharedKey("g", "jobs/+"));
  std::set<const std::string*> h_keys;
  for (const auto& [packet_id, inflight] : a->inflight()) {
    const auto& key = inflight.delivery.shared_key;
    ASSERT_NE(key, nullptr);
    if (*key == g->key) {
      EXPECT_EQ(key, g->key_ref);
    } else {
      EXPECT_EQ(*key, SharedKey("h", "jobs/+"));
      h_keys.insert(key.get());
    }
  }
  EXPECT_EQ(h_keys.size(), 1u);
}

}  // namespace
}  // namespace estuary::core
