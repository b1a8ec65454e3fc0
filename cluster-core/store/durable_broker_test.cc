// The durable layer under ShardBroker: restart = new brokers on the same
// engines; crash = SimFileSystem losing what was not synced.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <set>

#include "cluster-core/broker/shard_broker.h"
#include "cluster-core/store/durable_broker_fixture_for_tests.h"
#include "cluster-core/store/record_codec.h"
#include "cluster-core/store/shard_store.h"
#include "io/file_system.h"
#include "io/sim/sim_loop.h"
#include "persistence/bitcask/bitcask_engine.h"
#include "persistence/memory_engine.h"

namespace estuary::core {
namespace {

using test_support::DurableBrokerTest;
using test_support::EngineKind;

TEST_F(DurableBrokerTest, PersistentSessionQueueAndRoutesSurviveRestart) {
  Start(1);
  OfflineSubscriber("sub", "t/+");
  int acked = 0;
  for (int i = 0; i < 3; ++i) brokers_[0]->Publish(Make("t/a", "m" + std::to_string(i)), [&] { ++acked; });
  Settle();
  EXPECT_EQ(acked, 3);

  auto counts = Restart();
  EXPECT_EQ(counts.sessions, 1u);
  EXPECT_EQ(counts.queued, 3u);
  Session* session = brokers_[0]->FindSession("sub");
  ASSERT_NE(session, nullptr);
  EXPECT_EQ(session->expiry_interval(), 3600u);
  EXPECT_EQ(session->subscriptions().count("t/+"), 1u);
  // The route is back: a new publish reaches the restored session.
  brokers_[0]->Publish(Make("t/b", "m3"));
  EXPECT_EQ(QueuedPayloads(session), (std::vector<std::string>{"m0", "m1", "m2", "m3"}));
}

TEST_F(DurableBrokerTest, NonPersistentSessionsAndQos0WriteNothing) {
  Start(1);
  Session* clean = brokers_[0]->Attach("clean", true, &sink_).session;
  clean->set_expiry_interval(0);
  brokers_[0]->Subscribe(clean, "t", SubscriptionOptions{QoS::kAtLeastOnce});
  OfflineSubscriber("sub", "q0", QoS::kAtMostOnce);
  const size_t keys = KeyCount(0);  // the persistent session's record and subscription
  EXPECT_EQ(keys, 2u);
  brokers_[0]->Publish(Make("t", "x"));
  brokers_[0]->Publish(Make("q0", "y", QoS::kAtMostOnce));
  Settle();
  EXPECT_EQ(KeyCount(0), keys);
}

TEST_F(DurableBrokerTest, AcknowledgedDeliveriesAreDeletedAndInflightSurvives) {
  Start(1, EngineKind::kBitcask);
  OfflineSubscriber("sub", "t", QoS::kExactlyOnce);
  for (int i = 0; i < 4; ++i) brokers_[0]->Publish(Make("t", "m" + std::to_string(i), QoS::kExactlyOnce), [] {});
  Settle();
  Session* session = brokers_[0]->Attach("sub", false, &sink_).session;
  session->set_expiry_interval(3600);
  // Sent 0..2 with ids 1..3; 0 acknowledged completely, 1 got PUBREC.
  for (uint16_t id = 1; id <= 3; ++id) {
    Delivery delivery = session->PopQueued();
    session->AddInflight(id, InflightDelivery{std::move(delivery), InflightPhase::kAwaitingPubrec,
                                              session->NextSendOrder()});
  }
  session->MarkReleased(2);
  EXPECT_TRUE(session->RemoveInflight(1));
  session->AddInboundQos2(42);
  Settle();

  auto counts = CrashAndRestart();  // everything was synced by Settle()
  EXPECT_EQ(counts.inflight, 2u);
  EXPECT_EQ(counts.queued, 1u);
  session = brokers_[0]->FindSession("sub");
  ASSERT_NE(session, nullptr);
  ASSERT_EQ(session->inflight().size(), 2u);
  EXPECT_EQ(session->inflight().at(2).phase, InflightPhase::kAwaitingPubcomp);
  EXPECT_EQ(session->inflight().at(2).delivery.message, nullptr);
  EXPECT_EQ(session->inflight().at(3).phase, InflightPhase::kAwaitingPubrec);
  EXPECT_EQ(*session->inflight().at(3).delivery.message->payload, "m2");
  EXPECT_LT(session->inflight().at(2).sent_order, session->inflight().at(3).sent_order);
  EXPECT_EQ(session->inbound_qos2(), (std::set<uint16_t>{42}));
  EXPECT_EQ(QueuedPayloads(session), (std::vector<std::string>{"m3"}));
  // New packet ids do not collide with the restored ones.
  EXPECT_EQ(session->NextPacketId(), 4);
}

TEST_F(DurableBrokerTest, AckWaitsForTheSyncAndAcknowledgedMessagesSurviveACrash) {
  Start(1, EngineKind::kBitcask);
  OfflineSubscriber("sub", "t");
  int acked = 0;
  brokers_[0]->Publish(Make("t", "a"), [&] { ++acked; });
  EXPECT_EQ(acked, 0);  // not before the batch is written and synced
  Settle();
  EXPECT_EQ(acked, 1);
  brokers_[0]->Publish(Make("t", "b"), [&] { ++acked; });  // never flushed: lost, never acked
  EXPECT_EQ(acked, 1);

  auto counts = CrashAndRestart();
  EXPECT_EQ(counts.sessions, 1u);
  EXPECT_EQ(QueuedPayloads(brokers_[0]->FindSession("sub")), (std::vector<std::string>{"a"}));
}

TEST_F(DurableBrokerTest, ForwardedPublishIsAcknowledgedOnlyOnceTheOtherShardHasIt) {
  Start(2, EngineKind::kBitcask);
  // A subscriber on one shard, the publish arriving on the other.
  std::string client;
  for (int suffix = 0; ShardForClientId(client, 2) != 1; ++suffix) client = "sub-" + std::to_string(suffix);
  OfflineSubscriber(client, "t");
  int acked = 0;
  brokers_[0]->Publish(Make("t", "a"), [&] { ++acked; });
  loop_.RunUntilIdle();
  EXPECT_EQ(acked, 0);  // the forward has not even reached shard 1
  link_.RunAll();       // shard 1 enqueues; its batch is not yet synced
  EXPECT_EQ(acked, 0);
  Settle();
  EXPECT_EQ(acked, 1);
  CrashAndRestart();
  EXPECT_EQ(QueuedPayloads(brokers_[1]->FindSession(client)), (std::vector<std::string>{"a"}));
}

TEST_F(DurableBrokerTest, RetainedMessagesLiveOnTheTopicsShardAndReachEveryShard) {
  Start(3, EngineKind::kBitcask);
  int acked = 0;
  for (const char* topic : {"r/1", "r/2", "r/3", "r/4"}) {
    brokers_[0]->Publish(Make(topic, std::string("v-") + topic, QoS::kAtLeastOnce, true), [&] { ++acked; });
  }
  brokers_[0]->Publish(Make("r/4", "", QoS::kAtLeastOnce, true), [&] { ++acked; });  // clears r/4
  Settle();
  EXPECT_EQ(acked, 5);
  for (uint16_t shard = 0; shard < 3; ++shard) {
    size_t stored = 0;
    (void)engines_[shard]->Scan("r", [&](std::string_view key, std::string_view) {
      EXPECT_EQ(ShardForTopic(key.substr(1), 3), shard);
      ++stored;
      return true;
    });
    (void)stored;
  }
  auto counts = CrashAndRestart();
  EXPECT_EQ(counts.retained, 3u);
  for (auto& broker : brokers_) EXPECT_EQ(broker->retained().size(), 3u);
}

TEST_F(DurableBrokerTest, WillDelayAndExpiryContinueFromTheStoredDisconnectTime) {
  Start(1);
  OfflineSubscriber("watcher", "will/#");
  Session* session = brokers_[0]->Attach("dying", false, &sink_).session;
  session->set_expiry_interval(100);
  WillMessage will;
  auto message = std::make_shared<Message>();
  message->topic = "will/dying";
  message->payload = MakePayload("gone");
  message->qos = QoS::kAtLeastOnce;
  will.message = message;
  will.delay_seconds = 30;
  session->set_will(will);
  brokers_[0]->Disconnect(session, &sink_, true);
  Settle();
  clock_.Advance(20'000);  // the node is down for 20 s of the 30 s delay

  auto counts = Restart();
  EXPECT_EQ(counts.wills, 1u);
  Session* watcher = brokers_[0]->FindSession("watcher");
  loop_.AdvanceBy(9'000);
  EXPECT_EQ(watcher->queued_messages(), 0u);
  loop_.AdvanceBy(2'000);
  EXPECT_EQ(QueuedPayloads(watcher), (std::vector<std::string>{"gone"}));
  EXPECT_NE(brokers_[0]->FindSession("dying"), nullptr);
  loop_.AdvanceBy(70'000);  // 100 s after the disconnect the session ends
  EXPECT_EQ(brokers_[0]->FindSession("dying"), nullptr);
  // and with it every key it had.
  Settle();
  auto restarted = Restart();
  EXPECT_EQ(restarted.sessions, 1u);  // the watcher only
}

TEST_F(DurableBrokerTest, ExpiredWhileDownIsRemovedAtStart) {
  Start(1);
  OfflineSubscriber("short", "t", QoS::kAtLeastOnce, 10);
  clock_.Advance(60'000);
  Restart();
  loop_.RunUntilIdle();
  EXPECT_EQ(brokers_[0]->FindSession("short"), nullptr);
  EXPECT_EQ(KeyCount(0), 0u);
}

TEST_F(DurableBrokerTest, CleanStartDiscardsTheStoredSession) {
  Start(1);
  OfflineSubscriber("sub", "t");
  brokers_[0]->Publish(Make("t", "a"), [] {});
  Settle();
  Session* session = brokers_[0]->Attach("sub", true, &sink_).session;
  session->set_expiry_interval(0);
  Settle();
  EXPECT_EQ(KeyCount(0), 0u);
  EXPECT_EQ(Restart().sessions, 0u);
}

}  // namespace
}  // namespace estuary::core

namespace estuary::core {

using test_support::DurableBrokerTest;
using test_support::EngineKind;

// Issue 4, the QoS 2 outbound window: a connection takes a delivery, gives
// it a packet id and writes the PUBLISH, all in one loop iteration; the
// in-flight record of that id must already be durable, or a crash before
// the next sync brings the message back as a new queued delivery (a second
// copy for an exactly-once client) instead of a resend of the same id.
TEST_F(DurableBrokerTest, Issue4PublishLeavesOnlyAfterItsInflightRecordIsSynced) {
  Start(1, EngineKind::kBitcask);
  Session* session = brokers_[0]->Attach("sub", false, &sink_).session;
  session->set_expiry_interval(3600);
  brokers_[0]->Subscribe(session, "t", SubscriptionOptions{QoS::kExactlyOnce});
  Settle();
  int acked = 0;
  brokers_[0]->Publish(Make("t", "m", QoS::kExactlyOnce), [&] { ++acked; });
  EXPECT_FALSE(session->HasQueued());  // staged: its record is not synced yet
  Settle();
  EXPECT_EQ(acked, 1);
  ASSERT_TRUE(session->HasQueued());
  // What a frontend does in one go: take it, number it, write it out.
  Delivery delivery = session->PopQueued();
  const uint16_t packet_id = session->NextPacketId();
  session->AddInflight(packet_id, InflightDelivery{std::move(delivery), InflightPhase::kAwaitingPubrec,
                                                   session->NextSendOrder()});
  CrashAndRestart();  // no loop iteration after the send
  session = brokers_[0]->FindSession("sub");
  ASSERT_NE(session, nullptr);
  ASSERT_EQ(session->inflight().count(packet_id), 1u) << "the PUBLISH sent as id " << packet_id << " is forgotten";
  EXPECT_EQ(*session->inflight().at(packet_id).delivery.message->payload, "m");
  EXPECT_EQ(QueuedPayloads(session), std::vector<std::string>{}) << "it would be delivered a second time";
}

// The other call orders frontends use on a staged delivery: NextPacketId
// before PopQueued (AMQP), a pop never claimed (expired, presettled), and
// an id handed out and then used for another delivery (AMQP re-tagging).
TEST_F(DurableBrokerTest, Issue4StagedIdsFollowEveryFrontendCallOrder) {
  Start(1, EngineKind::kBitcask);
  Session* session = brokers_[0]->Attach("sub", false, &sink_).session;
  session->set_expiry_interval(3600);
  brokers_[0]->Subscribe(session, "t", SubscriptionOptions{QoS::kAtLeastOnce});
  Settle();
  for (const char* payload : {"a", "b", "c"}) brokers_[0]->Publish(Make("t", payload), [] {});
  EXPECT_FALSE(session->HasQueued());
  Settle();
  EXPECT_EQ(session->staged(), 3u);
  // AMQP's order: the id first, then the pop.
  ASSERT_TRUE(session->HasQueued());
  const uint16_t id_a = session->NextPacketId();
  Delivery a = session->PopQueued();
  EXPECT_EQ(*a.message->payload, "a");
  session->AddInflight(id_a, InflightDelivery{std::move(a), InflightPhase::kAwaitingPuback, session->NextSendOrder()});
  // "b" is popped and dropped (say it expired): its record goes.
  ASSERT_TRUE(session->HasQueued());
  const Delivery b = session->PopQueued();
  EXPECT_EQ(*b.message->payload, "b");
  // The head's id handed out, then used for another delivery: "c" gets a
  // new id and waits for that record to be synced.
  ASSERT_TRUE(session->HasQueued());
  const uint16_t id_c = session->NextPacketId();
  session->AddInflight(id_c, InflightDelivery{b, InflightPhase::kAwaitingPuback, session->NextSendOrder()});
  EXPECT_FALSE(session->HasQueued());
  Settle();
  ASSERT_TRUE(session->HasQueued());
  Delivery c = session->PopQueued();
  const uint16_t new_id_c = session->NextPacketId();
  EXPECT_NE(new_id_c, id_c);
  EXPECT_NE(new_id_c, id_a);
  session->AddInflight(new_id_c, InflightDelivery{std::move(c), InflightPhase::kAwaitingPuback,
                                                  session->NextSendOrder()});
  EXPECT_EQ(session->staged(), 0u);
  CrashAndRestart();  // nothing synced after the last send
  session = brokers_[0]->FindSession("sub");
  ASSERT_NE(session, nullptr);
  ASSERT_EQ(session->inflight().size(), 3u);
  EXPECT_EQ(*session->inflight().at(id_a).delivery.message->payload, "a");
  EXPECT_EQ(*session->inflight().at(id_c).delivery.message->payload, "b");
  EXPECT_EQ(*session->inflight().at(new_id_c).delivery.message->payload, "c");
  EXPECT_EQ(QueuedPayloads(session), std::vector<std::string>{});
}

namespace {

// Seeded: a connected subscriber pumps as the frontends do (HasQueued,
// PopQueued, NextPacketId, AddInflight = the PUBLISH is on the wire) with
// QoS 1 and 2, acknowledges some (PUBACK, PUBREC then PUBCOMP), while
// publishes, loop runs and shard links make partial progress; then a
// crash. Every delivery written to the wire and not yet acknowledged must
// come back in flight under its packet id (payload intact unless PUBREC was
// applied), never queued as a new one.
TEST_F(DurableBrokerTest, Issue4SeededCrashesResendSentDeliveriesUnderTheirPacketIds) {
  uint64_t first = 1;
  uint64_t count = 25;
  if (const char* seed = std::getenv("ESTUARY_SEED")) first = std::strtoull(seed, nullptr, 10), count = 1;
  if (const char* seeds = std::getenv("ESTUARY_SEED_COUNT")) count = std::strtoull(seeds, nullptr, 10);
  for (uint64_t seed = first; seed < first + count; ++seed) {
    SCOPED_TRACE("ESTUARY_SEED=" + std::to_string(seed));
    brokers_.clear();
    engines_.clear();
    link_.Clear();
    dir_prefix_ = "sent" + std::to_string(seed) + "-";
    Start(2, EngineKind::kBitcask);
    std::mt19937_64 random(seed);
    Session* sub = Owner("sub").Attach("sub", false, &sink_).session;
    sub->set_expiry_interval(3600);
    Owner("sub").Subscribe(sub, "t", SubscriptionOptions{QoS::kExactlyOnce});
    Settle();
    std::map<uint16_t, std::string> on_wire;  // sent, not completely acknowledged
    std::set<uint16_t> released;              // PUBREC applied
    for (int step = 0; step < 300; ++step) {
      const auto action = random() % 10;
      if (action < 4) {
        const QoS qos = random() % 2 == 0 ? QoS::kAtLeastOnce : QoS::kExactlyOnce;
        brokers_[random() % 2]->Publish(Make("t", "p" + std::to_string(step), qos), [] {});
      } else if (action < 6) {
        for (auto take = random() % 5; take > 0 && sub->HasQueued(); --take) {
          Delivery delivery = sub->PopQueued();
          const uint16_t id = sub->NextPacketId();
          const auto phase = delivery.qos == QoS::kExactlyOnce ? InflightPhase::kAwaitingPubrec
                                                                : InflightPhase::kAwaitingPuback;
          on_wire[id] = *delivery.message->payload;
          sub->AddInflight(id, InflightDelivery{std::move(delivery), phase, sub->NextSendOrder()});
        }
      } else if (action < 7 && !on_wire.empty()) {
        auto it = std::next(on_wire.begin(), static_cast<long>(random() % on_wire.size()));
        const uint16_t id = it->first;
        const auto phase = sub->inflight().at(id).phase;
        if (phase == InflightPhase::kAwaitingPubrec && random() % 2 == 0) {
          sub->MarkReleased(id);
          released.insert(id);
        } else {
          sub->RemoveInflight(id);  // applied lazily: may come back after a crash (allowed)
          on_wire.erase(it);
          released.erase(id);
        }
      } else if (action < 8) {
        link_.RunAll();
      } else {
        loop_.RunUntilIdle();
      }
    }
    CrashAndRestart();
    sub = Owner("sub").FindSession("sub");
    ASSERT_NE(sub, nullptr);
    std::set<std::string> queued;
    for (const auto& payload : QueuedPayloads(sub)) queued.insert(payload);
    for (const auto& [id, payload] : on_wire) {
      auto found = sub->inflight().find(id);
      ASSERT_NE(found, sub->inflight().end()) << payload << " was sent as id " << id << " and is forgotten";
      if (found->second.delivery.message == nullptr) {
        EXPECT_EQ(released.count(id), 1u) << payload << " lost its message before PUBREC";
      } else {
        EXPECT_EQ(*found->second.delivery.message->payload, payload) << "id " << id;
      }
      EXPECT_EQ(queued.count(payload), 0u) << payload << " would be delivered again under a new id";
    }
    if (HasFailure()) return;
  }
}

// Seeded random publishes (on either shard), subscriber sessions taking
// and acknowledging deliveries, partial progress of the loop and the shard
// links, then a crash at a random point: every message whose on_safe ran
// and that the subscriber had not acknowledged must be back, queued or in
// flight. ESTUARY_SEED=n replays one seed; ESTUARY_SEED_COUNT=n runs 1..n.
TEST_F(DurableBrokerTest, SeededCrashesNeverLoseAnAcknowledgedMessage) {
  uint64_t first = 1;
  uint64_t count = 25;
  if (const char* seed = std::getenv("ESTUARY_SEED")) first = std::strtoull(seed, nullptr, 10), count = 1;
  if (const char* seeds = std::getenv("ESTUARY_SEED_COUNT")) count = std::strtoull(seeds, nullptr, 10);
  for (uint64_t seed = first; seed < first + count; ++seed) {
    SCOPED_TRACE("ESTUARY_SEED=" + std::to_string(seed));
    brokers_.clear();
    engines_.clear();
    link_.Clear();
    dir_prefix_ = "seed" + std::to_string(seed) + "-";
    Start(2, EngineKind::kBitcask);
    std::mt19937_64 random(seed);
    OfflineSubscriber("sub", "t");
    std::set<std::string> acknowledged;  // publisher saw on_safe
    std::set<std::string> consumed;      // the subscriber acknowledged it
    auto session = [&] { return Owner("sub").FindSession("sub"); };
    for (int step = 0; step < 300; ++step) {
      const auto action = random() % 10;
      if (action < 5) {
        const std::string payload = "p" + std::to_string(step);
        brokers_[random() % 2]->Publish(Make("t", payload), [&acknowledged, payload] {
          acknowledged.insert(payload);
        });
      } else if (action < 7) {
        Session* sub = Owner("sub").Attach("sub", false, &sink_).session;
        sub->set_expiry_interval(3600);
        for (auto take = random() % 4; take > 0 && sub->HasQueued(); --take) {
          Delivery delivery = sub->PopQueued();
          const uint16_t id = sub->NextPacketId();
          sub->AddInflight(id, InflightDelivery{std::move(delivery), InflightPhase::kAwaitingPuback,
                                                sub->NextSendOrder()});
        }
        std::vector<uint16_t> ids;
        for (const auto& entry : sub->inflight()) ids.push_back(entry.first);
        for (uint16_t id : ids) {
          if (random() % 2 == 0) continue;
          consumed.insert(*sub->inflight().at(id).delivery.message->payload);
          sub->RemoveInflight(id);
        }
        Owner("sub").Disconnect(sub, &sink_, false);
      } else if (action < 8) {
        link_.RunAll();
      } else {
        loop_.RunUntilIdle();
      }
    }
    CrashAndRestart();
    Session* sub = session();
    ASSERT_NE(sub, nullptr);
    std::set<std::string> present;
    for (const auto& entry : sub->inflight()) present.insert(*entry.second.delivery.message->payload);
    for (const auto& payload : QueuedPayloads(sub)) present.insert(payload);
    for (const auto& payload : acknowledged) {
      if (consumed.count(payload) != 0) continue;
      EXPECT_EQ(present.count(payload), 1u) << payload << " was acknowledged and is lost";
    }
    EXPECT_GT(acknowledged.size(), 0u);
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace estuary::core
