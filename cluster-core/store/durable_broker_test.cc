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
#include "cluster-core/store/record_codec.h"
#include "cluster-core/store/shard_store.h"
#include "io/file_system.h"
#include "cluster-core/broker/queue_link_for_tests.h"
#include "io/sim/sim_loop.h"
#include "persistence/bitcask/bitcask_engine.h"
#include "persistence/memory_engine.h"

namespace estuary::core {
namespace {

using test_support::QueueLink;

class NullSink final : public SessionSink {
 public:
  void OnDeliveriesReady() override {}
  void OnDetached(DetachReason) override {}
};

enum class EngineKind { kMemory, kBitcask };

class DurableBrokerTest : public ::testing::Test {
 protected:
  void Start(uint16_t shard_count, EngineKind kind = EngineKind::kMemory) {
    kind_ = kind;
    shard_count_ = shard_count;
    for (uint16_t i = 0; i < shard_count; ++i) engines_.push_back(OpenEngine(i));
    Boot();
  }
  std::unique_ptr<persistence::StorageEngine> OpenEngine(uint16_t shard) {
    if (kind_ == EngineKind::kMemory) return std::make_unique<persistence::MemoryEngine>();
    persistence::bitcask::BitcaskOptions options;
    options.sync = persistence::SyncPolicy::kAlways;
    options.loop = &loop_;
    options.clock = &clock_;
    options.log = [](const std::string&) {};
    auto engine = persistence::bitcask::BitcaskEngine::Open(fs_, dir_prefix_ + "shard-" + std::to_string(shard),
                                                            options);
    EXPECT_TRUE(engine) << engine.error().message;
    return std::move(*engine);
  }
  // Builds the brokers on the engines and recovers; returns the counts.
  ShardBroker::RecoveryCounts Boot() {
    metrics_ = std::vector<ShardMetrics>(shard_count_);
    link_.shards.clear();
    ShardBroker::RecoveryCounts total;
    for (uint16_t i = 0; i < shard_count_; ++i) {
      ShardConfig config;
      config.node_id = 7;
      config.shard_id = i;
      config.shard_count = shard_count_;
      config.replication_ack_leader = replication_ack_leader_;
      brokers_.push_back(std::make_unique<ShardBroker>(config, loop_, link_, metrics_[i]));
      if (boot_port_ != nullptr) brokers_.back()->set_cluster(boot_port_);  // a cluster node
      link_.shards.push_back(brokers_.back().get());
      brokers_.back()->AttachStore(*engines_[i]);
    }
    for (auto& broker : brokers_) {
      auto counts = broker->Recover();
      EXPECT_TRUE(counts) << counts.error();
      total.sessions += counts->sessions;
      total.queued += counts->queued;
      total.inflight += counts->inflight;
      total.retained += counts->retained;
      total.wills += counts->wills;
    }
    Settle();
    return total;
  }
  void Settle() {
    for (int i = 0; i < 10; ++i) {
      link_.RunAll();
      loop_.RunUntilIdle();
    }
  }
  // A clean restart: every broker goes, the engines stay.
  ShardBroker::RecoveryCounts Restart() {
    Settle();
    brokers_.clear();
    return Boot();
  }
  // kill -9 and power loss: unsynced bytes are gone.
  ShardBroker::RecoveryCounts CrashAndRestart() {
    link_.Clear();
    brokers_.clear();
    fs_.Crash();
    engines_.clear();
    for (uint16_t i = 0; i < shard_count_; ++i) engines_.push_back(OpenEngine(i));
    return Boot();
  }
  // A persistent session that subscribed and went away.
  Session* OfflineSubscriber(const std::string& client_id, const std::string& filter,
                             QoS qos = QoS::kAtLeastOnce, uint32_t expiry = 3600) {
    ShardBroker& broker = Owner(client_id);
    Session* session = broker.Attach(client_id, false, &sink_).session;
    session->set_expiry_interval(expiry);
    SubscriptionOptions options;
    options.max_qos = qos;
    broker.Subscribe(session, filter, options);
    broker.Disconnect(session, &sink_, false);
    Settle();
    return session;
  }
  ShardBroker& Owner(const std::string& client_id) {
    return *brokers_[ShardForClientId(client_id, shard_count_)];
  }
  MessagePtr Make(const std::string& topic, const std::string& payload, QoS qos = QoS::kAtLeastOnce,
                  bool retain = false) {
    auto message = std::make_shared<Message>();
    message->id = brokers_[0]->NextMessageId();
    message->topic = topic;
    message->payload = MakePayload(payload);
    message->qos = qos;
    message->retain = retain;
    message->origin = Origin{Protocol::kMqtt, "publisher", 7};
    return message;
  }
  std::vector<std::string> QueuedPayloads(Session* session) {
    std::vector<std::string> out;
    while (session->HasQueued()) out.push_back(*session->PopQueued().message->payload);
    return out;
  }
  size_t KeyCount(uint16_t shard) {
    size_t count = 0;
    (void)engines_[shard]->Scan("", [&](std::string_view, std::string_view) {
      ++count;
      return true;
    });
    return count;
  }

  io::ManualClock clock_;
  io::SimLoop loop_{clock_};
  io::SimFileSystem fs_{1};
  QueueLink link_;
  EngineKind kind_ = EngineKind::kMemory;
  std::string dir_prefix_;
  uint16_t shard_count_ = 1;
  bool replication_ack_leader_ = false;  // ShardConfig::replication_ack_leader
  std::vector<std::unique_ptr<persistence::StorageEngine>> engines_;
  std::vector<ShardMetrics> metrics_;
  std::vector<std::unique_ptr<ShardBroker>> brokers_;
  NullSink sink_;
  ClusterPort* boot_port_ = nullptr;
};

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

namespace estuary::core {
namespace {

// Sessions on partitions (docs/partitions.md): the node's ClusterPort as
// the store's replication sees it. The "partition" is a map applying the
// changes as SessionMachine does for its owner; each batch's `done` waits
// until the test releases it.
class ReplicatingPort final : public ClusterPort {
 public:
  void RouteChanged(const RouteUpdate&) override {}
  void Forward(uint16_t, NodeForward) override {}
  void RetainedPublished(const MessagePtr&) override {}
  void ClientAttached(const std::string&) override {}
  void ForwardSafe(uint16_t, uint64_t) override {}
  bool SessionsOnPartitions() const override { return true; }
  void ReplicateSessions(uint16_t, std::vector<store::SessionChange> changes, std::function<void()> done) override {
    for (auto& change : changes) {
      changes_seen.push_back(change);
      switch (change.kind) {
        case store::SessionChange::kPut:
          partition[change.key] = change.value;
          break;
        case store::SessionChange::kDelete:
          partition.erase(change.key);
          break;
        case store::SessionChange::kWipe:
          for (auto it = partition.begin(); it != partition.end();) {
            auto parsed = store::ParseSessionKey(it->first);
            it = parsed && parsed->client_id == change.key ? partition.erase(it) : std::next(it);
          }
          break;
      }
    }
    waiting.push_back(std::move(done));
  }
  void ReleaseAll() {
    for (auto& done : std::exchange(waiting, {})) done();
  }
  // What SessionMachine's Load answers: the client's keys, record first.
  std::vector<std::pair<std::string, std::string>> Load(const std::string& client_id) const {
    std::vector<std::pair<std::string, std::string>> keys;
    for (char tag : {store::kSessionTag, store::kSubscriptionTag, store::kQueuedTag, store::kInflightTag,
                     store::kInboundTag}) {
      const std::string prefix = store::SessionPrefix(tag, client_id);
      for (auto it = partition.lower_bound(prefix); it != partition.end() && it->first.starts_with(prefix); ++it) {
        keys.emplace_back(*it);
      }
    }
    return keys;
  }
  std::map<std::string, std::string> partition;
  std::vector<store::SessionChange> changes_seen;
  std::vector<std::function<void()>> waiting;
};

class SessionReplicationTest : public DurableBrokerTest {
 protected:
  void StartNode() {
    Start(1);
    brokers_[0]->set_cluster(&port_);
  }
  // Another node: new brokers on empty engines.
  void MoveToAnotherNode() {
    Settle();
    brokers_.clear();
    engines_.clear();
    engines_.push_back(OpenEngine(0));
    Boot();
    brokers_[0]->set_cluster(&port_);
  }
  ReplicatingPort port_;
};

TEST_F(SessionReplicationTest, APublishIsAcknowledgedOnlyOnceThePartitionHasItsDelivery) {
  StartNode();
  OfflineSubscriber("sub", "t");
  port_.ReleaseAll();
  EXPECT_EQ(port_.Load("sub").size(), 2u);  // record and subscription
  int acked = 0;
  brokers_[0]->Publish(Make("t", "a"), [&] { ++acked; });
  Settle();
  EXPECT_EQ(acked, 0);  // written locally, not yet replicated
  port_.ReleaseAll();
  Settle();
  EXPECT_EQ(acked, 1);
  EXPECT_EQ(port_.Load("sub").size(), 3u);
  // Retained messages stay on the node's own store.
  brokers_[0]->Publish(Make("r", "v", QoS::kAtLeastOnce, /*retain=*/true), [] {});
  Settle();
  for (const auto& change : port_.changes_seen) EXPECT_NE(change.key.front(), store::kRetainedTag);
}

// replication.ack = "leader": acknowledged on the node's own store; the
// partition still gets the delivery, after.
TEST_F(SessionReplicationTest, WithLeaderAcksAPublishIsAcknowledgedBeforeThePartitionHasIt) {
  replication_ack_leader_ = true;
  StartNode();
  OfflineSubscriber("sub", "t");
  port_.ReleaseAll();
  int acked = 0;
  brokers_[0]->Publish(Make("t", "a"), [&] { ++acked; });
  Settle();
  EXPECT_EQ(acked, 1) << "waited for the partition";
  EXPECT_FALSE(port_.waiting.empty()) << "the partition answered already: the test shows nothing";
  EXPECT_EQ(port_.Load("sub").size(), 3u) << "the delivery was not handed to the partition";
  port_.ReleaseAll();
  Settle();
  EXPECT_EQ(acked, 1);
}

TEST_F(SessionReplicationTest, AnAdoptedSessionResumesWithItsQueueRoutesAndInflightIds) {
  StartNode();
  OfflineSubscriber("sub", "t", QoS::kExactlyOnce);
  for (int i = 0; i < 3; ++i) brokers_[0]->Publish(Make("t", "m" + std::to_string(i), QoS::kExactlyOnce), [] {});
  Settle();
  Session* session = brokers_[0]->Attach("sub", false, &sink_).session;
  session->set_expiry_interval(3600);
  Delivery first = session->PopQueued();
  const uint16_t id = session->NextPacketId();
  session->AddInflight(id, InflightDelivery{std::move(first), InflightPhase::kAwaitingPubrec, session->NextSendOrder()});
  session->AddInboundQos2(9);
  Settle();
  port_.ReleaseAll();
  Settle();

  MoveToAnotherNode();  // the node died; its client connects elsewhere
  const size_t changes_before = port_.changes_seen.size();
  brokers_[0]->AdoptSession("sub", port_.Load("sub"));
  Settle();
  session = brokers_[0]->FindSession("sub");
  ASSERT_NE(session, nullptr);
  EXPECT_EQ(session->expiry_interval(), 3600u);
  ASSERT_EQ(session->inflight().count(id), 1u);
  EXPECT_EQ(*session->inflight().at(id).delivery.message->payload, "m0");
  EXPECT_EQ(session->inbound_qos2(), (std::set<uint16_t>{9}));
  // The route is back on this node, and the queue continues.
  brokers_[0]->Publish(Make("t", "m3", QoS::kExactlyOnce), [] {});
  Settle();
  auto attached = brokers_[0]->Attach("sub", false, &sink_);
  EXPECT_TRUE(attached.session_present);
  // Connected: deliveries are staged (written, and replicated) before they show.
  EXPECT_FALSE(attached.session->HasQueued());
  Settle();
  EXPECT_FALSE(attached.session->HasQueued());
  port_.ReleaseAll();
  Settle();
  EXPECT_EQ(QueuedPayloads(attached.session), (std::vector<std::string>{"m1", "m2", "m3"}));
  // Adopting wrote the keys to this node's store and deleted nothing in the partition.
  EXPECT_GT(KeyCount(0), 0u);
  for (size_t i = changes_before; i < port_.changes_seen.size(); ++i) {
    EXPECT_NE(port_.changes_seen[i].kind, store::SessionChange::kWipe);
  }
  EXPECT_EQ(metrics_[0].sessions_adopted.load(), 1u);
}

TEST_F(SessionReplicationTest, AStaleLocalCopyIsReplacedWithoutTouchingThePartition) {
  StartNode();
  OfflineSubscriber("sub", "old/#");
  port_.ReleaseAll();
  // Meanwhile the session moved on elsewhere: another subscription there.
  ReplicatingPort elsewhere;
  elsewhere.partition = port_.partition;
  elsewhere.partition.erase(store::SubscriptionKey("sub", "old/#"));
  elsewhere.partition[store::SubscriptionKey("sub", "new/#")] = store::EncodeOptions(SubscriptionOptions{QoS::kAtLeastOnce});
  const size_t changes_before = port_.changes_seen.size();
  brokers_[0]->AdoptSession("sub", elsewhere.Load("sub"));
  Settle();
  Session* session = brokers_[0]->FindSession("sub");
  ASSERT_NE(session, nullptr);
  EXPECT_EQ(session->subscriptions().count("old/#"), 0u);
  EXPECT_EQ(session->subscriptions().count("new/#"), 1u);
  brokers_[0]->Publish(Make("old/x", "no"));
  brokers_[0]->Publish(Make("new/x", "yes"));
  Settle();
  EXPECT_EQ(QueuedPayloads(session), (std::vector<std::string>{"yes"}));
  for (size_t i = changes_before; i < port_.changes_seen.size(); ++i) {
    EXPECT_EQ(port_.changes_seen[i].kind, store::SessionChange::kPut) << port_.changes_seen[i].key;
  }
  // After a restart this node recovers the adopted copy, not the stale one.
  Restart();
  session = brokers_[0]->FindSession("sub");
  ASSERT_NE(session, nullptr);
  EXPECT_EQ(session->subscriptions().count("new/#"), 1u);
  EXPECT_EQ(session->subscriptions().count("old/#"), 0u);
}

// A cluster node restarted after its sessions were taken over elsewhere:
// the wills of what it recovered wait for the registry's word; a session
// still its own publishes its will, a stale copy is dropped silently.
TEST_F(SessionReplicationTest, ARestartedNodeHoldsRecoveredWillsUntilTheRegistryAnswers) {
  StartNode();
  OfflineSubscriber("watcher", "will/#");
  for (const std::string id : {"mine", "moved"}) {
    Session* session = brokers_[0]->Attach(id, false, &sink_).session;
    session->set_expiry_interval(600);
    WillMessage will;
    auto message = std::make_shared<Message>();
    message->topic = "will/" + id;
    message->payload = MakePayload(id);
    message->qos = QoS::kAtLeastOnce;
    will.message = message;
    session->set_will(will);  // connected when the node dies
  }
  Settle();
  port_.ReleaseAll();
  boot_port_ = &port_;
  auto counts = Restart();  // (the brokers go as a killed process would: nothing more is written)
  EXPECT_EQ(counts.wills, 2u);
  loop_.AdvanceBy(5'000);
  Session* watcher = brokers_[0]->FindSession("watcher");
  ASSERT_NE(watcher, nullptr);
  EXPECT_EQ(watcher->queued_messages(), 0u);  // held
  auto unconfirmed = brokers_[0]->TakeUnconfirmed();
  std::sort(unconfirmed.begin(), unconfirmed.end());
  EXPECT_EQ(unconfirmed, (std::vector<std::string>{"mine", "moved", "watcher"}));
  EXPECT_TRUE(brokers_[0]->TakeUnconfirmed().empty());

  const size_t changes_before = port_.changes_seen.size();
  brokers_[0]->ConfirmRecovered("watcher", true);
  brokers_[0]->ConfirmRecovered("moved", false);
  brokers_[0]->ConfirmRecovered("mine", true);
  loop_.AdvanceBy(10);  // the will's delay (0) had passed: it goes at once
  Settle();
  EXPECT_EQ(QueuedPayloads(watcher), (std::vector<std::string>{"mine"}));
  EXPECT_EQ(brokers_[0]->FindSession("moved"), nullptr);
  EXPECT_NE(brokers_[0]->FindSession("mine"), nullptr);
  EXPECT_EQ(metrics_[0].sessions_stale_dropped.load(), 1u);
  for (size_t i = changes_before; i < port_.changes_seen.size(); ++i) {
    EXPECT_EQ(port_.changes_seen[i].key.find("moved"), std::string::npos) << "the partition's copy was touched";
  }
  // Gone from this node's store too.
  boot_port_ = nullptr;
  Restart();
  EXPECT_EQ(brokers_[0]->FindSession("moved"), nullptr);
}

TEST_F(SessionReplicationTest, ASessionThatEndsIsWipedFromThePartition) {
  StartNode();
  OfflineSubscriber("sub", "t");
  brokers_[0]->Publish(Make("t", "a"), [] {});
  Settle();
  port_.ReleaseAll();
  EXPECT_EQ(port_.Load("sub").size(), 3u);
  Session* session = brokers_[0]->Attach("sub", true, &sink_).session;
  session->set_expiry_interval(0);
  Settle();
  EXPECT_TRUE(port_.Load("sub").empty());
  EXPECT_TRUE(std::any_of(port_.changes_seen.begin(), port_.changes_seen.end(), [](const auto& change) {
    return change.kind == store::SessionChange::kWipe && change.key == "sub";
  }));
}

}  // namespace
}  // namespace estuary::core
