// Sessions on partitions (docs/partitions.md, "Sessions on partitions"):
// the durable broker's side of replication, adoption and the replayed
// forwards of the takeover gap.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cluster-core/store/durable_broker_fixture_for_tests.h"

namespace estuary::core {
namespace {

using test_support::DurableBrokerTest;

// Sessions on partitions (docs/partitions.md): the node's ClusterPort as
// the store's replication sees it. The "partition" is a map applying the
// changes as SessionMachine does for its owner; each batch's `done` waits
// until the test releases it.
class ReplicatingPort final : public test_support::QuietPort {
 public:
  bool SessionsOnPartitions() const override { return true; }
  bool GroupKeysInRecords() const override { return group_keys; }
  bool RetainedOnPartitions() const override { return retained_on_partitions; }
  void RetainedToPartition(const MessagePtr& message, uint16_t, uint64_t safe_token) override {
    retained_writes.emplace_back(message, safe_token);
  }
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
  void RouteChanged(const RouteUpdate& update) override {
    if (update.shared_key.empty()) route_changes.push_back((update.add ? "+" : "-") + update.filter);
  }
  void MovedStubOpened(uint16_t shard, std::string client_id, uint64_t stub,
                       std::vector<std::string> filters) override {
    stubs_opened.push_back({shard, std::move(client_id), stub, std::move(filters)});
  }
  void MovedStubDeliveries(uint16_t, std::string client_id, std::vector<Delivery> deliveries,
                           std::function<void()> done) override {
    for (const Delivery& delivery : deliveries) {
      stub_deliveries.push_back(client_id + ":" + std::string(*delivery.message->payload));
    }
    stub_waiting.push_back(std::move(done));
  }
  struct StubOpened {
    uint16_t shard;
    std::string client_id;
    uint64_t stub;
    std::vector<std::string> filters;
  };
  std::vector<StubOpened> stubs_opened;
  std::vector<std::string> stub_deliveries;  // "client:payload"
  std::vector<std::function<void()>> stub_waiting;
  std::vector<std::string> route_changes;  // "+filter" / "-filter", plain routes
  void ReleaseLast() {
    auto done = std::move(waiting.back());
    waiting.pop_back();
    done();
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
  bool retained_on_partitions = false;
  bool group_keys = true;
  std::vector<std::pair<MessagePtr, uint64_t>> retained_writes;  // (message, the token the commit releases)
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
    // Another process, started later: its message ids are new ones (a
    // copy adopted from the partition remembers the ids it was offered).
    loop_.AdvanceBy(1);
    brokers_.clear();
    engines_.clear();
    engines_.push_back(OpenEngine(0));
    Boot();
    brokers_[0]->set_cluster(&port_);
  }
  // A node whose offline subscriber "sub" (to "t") holds `payload`, durable
  // on the partition: the keys a node claiming "sub" reads.
  std::vector<std::pair<std::string, std::string>> SubscriberHolding(const std::string& payload) {
    StartNode();
    OfflineSubscriber("sub", "t");
    port_.ReleaseAll();
    brokers_[0]->Publish(Make("t", payload), [] {});
    Settle();
    port_.ReleaseAll();
    Settle();
    return port_.Load("sub");
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

// A node of an older binary in the cluster rejects a delivery record with
// a group key (docs/storage.md, "Older binaries and rolling upgrades"):
// while the agent says so, records are written without it.
TEST_F(SessionReplicationTest, DeliveryRecordsLeaveTheGroupKeyOutWhileTheClusterSaysSo) {
  StartNode();
  OfflineSubscriber("sub", "$share/g/t");
  port_.ReleaseAll();
  auto queued_keys = [this] {
    std::vector<std::string> keys;  // each queued record's group key, "" for none
    for (const auto& [key, value] : port_.Load("sub")) {
      if (key.front() != store::kQueuedTag) continue;
      auto delivery = store::DecodeDelivery(value);
      EXPECT_TRUE(delivery);
      if (delivery) keys.push_back(delivery->shared_key ? *delivery->shared_key : "");
    }
    return keys;
  };
  port_.group_keys = false;
  brokers_[0]->Publish(Make("t", "a"), [] {});
  Settle();
  port_.ReleaseAll();
  EXPECT_EQ(queued_keys(), std::vector<std::string>{""});
  port_.group_keys = true;
  brokers_[0]->Publish(Make("t", "b"), [] {});
  Settle();
  port_.ReleaseAll();
  EXPECT_EQ(queued_keys(), (std::vector<std::string>{"", SharedKey("g", "t")}));
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

// Retained messages on partitions (docs/partitions.md): by default a
// retained QoS 1 publish is acknowledged once its topic's partition has
// committed it (the agent's OnForwardSafe); with replication.ack = "leader"
// on this node's store, the partition written all the same (nobody waits).
TEST_F(SessionReplicationTest, ARetainedPublishIsAcknowledgedOnceItsPartitionHasIt) {
  port_.retained_on_partitions = true;
  StartNode();
  int acked = 0;
  brokers_[0]->Publish(Make("r", "v", QoS::kAtLeastOnce, /*retain=*/true), [&] { ++acked; });
  Settle();
  ASSERT_EQ(port_.retained_writes.size(), 1u);
  EXPECT_EQ(port_.retained_writes[0].first->topic, "r");
  ASSERT_NE(port_.retained_writes[0].second, 0u);
  EXPECT_EQ(acked, 0) << "acknowledged before the partition committed";
  brokers_[0]->OnForwardSafe(port_.retained_writes[0].second);
  Settle();
  EXPECT_EQ(acked, 1);
}

TEST_F(SessionReplicationTest, WithLeaderAcksARetainedPublishIsAcknowledgedBeforeItsPartitionHasIt) {
  port_.retained_on_partitions = true;
  replication_ack_leader_ = true;
  StartNode();
  int acked = 0;
  brokers_[0]->Publish(Make("r", "v", QoS::kAtLeastOnce, /*retain=*/true), [&] { ++acked; });
  Settle();
  EXPECT_EQ(acked, 1) << "waited for the partition";
  ASSERT_EQ(port_.retained_writes.size(), 1u) << "the partition was not written";
  EXPECT_EQ(port_.retained_writes[0].second, 0u) << "a token nobody will release";
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

// A restarted node's recovered shared member turns out stale: the
// messages its group gave it since the restart (its route was back) go to
// the other member; what it recovered stays with the session's new home.
TEST_F(SessionReplicationTest, AStaleRecoveredMemberGivesUpWhatItGotSinceTheRestart) {
  StartNode();
  OfflineSubscriber("m1", "$share/g/t");
  OfflineSubscriber("m2", "$share/g/t");
  for (int i = 0; i < 2; ++i) brokers_[0]->Publish(Make("t", "before" + std::to_string(i)), [] {});
  Settle();
  port_.ReleaseAll();
  Settle();
  boot_port_ = &port_;
  Restart();
  (void)brokers_[0]->TakeUnconfirmed();
  const size_t m1_recovered = brokers_[0]->FindSession("m1")->queued_messages();
  for (int i = 0; i < 4; ++i) brokers_[0]->Publish(Make("t", "after" + std::to_string(i)), [] {});
  Settle();
  port_.ReleaseAll();
  Settle();
  ASSERT_GT(brokers_[0]->FindSession("m1")->queued_messages(), m1_recovered) << "the group never picked m1";
  brokers_[0]->ConfirmRecovered("m1", false);
  Settle();
  port_.ReleaseAll();
  Settle();
  EXPECT_EQ(brokers_[0]->FindSession("m1"), nullptr);
  // m2 has every message published after the restart, and its own recovered
  // ones; m1's recovered ones stayed with m1's session (its new home has them).
  const std::vector<std::string> m2 = QueuedPayloads(brokers_[0]->FindSession("m2"));
  EXPECT_EQ(std::count_if(m2.begin(), m2.end(), [](const std::string& p) { return p.starts_with("after"); }), 4);
  EXPECT_EQ(m2.size(), 4u + (2u - m1_recovered));
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

// The takeover gap (docs/partitions.md): a session adopted as taken from a
// gone node (9) is offered each replayed forward once, also one it held
// already (node 9 had replicated it before it died); a session here that
// was not node 9's gets none, and a replay about another node reaches nobody.
// (The test's brokers are node 7.)
TEST_F(SessionReplicationTest, ASessionTakenFromAGoneNodeGetsEachReplayedMessageOnce) {
  StartNode();
  OfflineSubscriber("sub", "t");
  port_.ReleaseAll();
  const MessagePtr held = Make("t", "held");
  const MessagePtr fresh = Make("t", "fresh");
  const MessagePtr other_node = Make("t", "about node 8");
  brokers_[0]->Publish(held, [] {});
  Settle();
  port_.ReleaseAll();
  Settle();
  const auto keys = port_.Load("sub");
  MoveToAnotherNode();
  brokers_[0]->AdoptSession("sub", keys, /*taken_over=*/true, /*taken_from=*/9);
  Session* bystander = OfflineSubscriber("bystander", "t");
  int done = 0;
  brokers_[0]->DeliverReplayed(held, 9, [&] { ++done; });
  brokers_[0]->DeliverReplayed(fresh, 9, [&] { ++done; });
  brokers_[0]->DeliverReplayed(fresh, 9, [&] { ++done; });
  brokers_[0]->DeliverReplayed(other_node, 8, [&] { ++done; });
  Settle();
  port_.ReleaseAll();
  Settle();
  EXPECT_EQ(done, 4);
  EXPECT_EQ(QueuedPayloads(brokers_[0]->FindSession("sub")), (std::vector<std::string>{"held", "fresh"}));
  EXPECT_EQ(QueuedPayloads(bystander), std::vector<std::string>{});
  EXPECT_EQ(metrics_[0].replayed_duplicates_skipped.load(), 2u);
  EXPECT_EQ(metrics_[0].replayed_delivered.load(), 3u);
  // The window closes (kTakenFromWindowMs): replays then reach nobody.
  clock_.Advance(kTakenFromWindowMs);
  brokers_[0]->DeliverReplayed(Make("t", "late"), 9, [&] { ++done; });
  Settle();
  port_.ReleaseAll();
  Settle();
  EXPECT_EQ(done, 5);
  EXPECT_EQ(QueuedPayloads(brokers_[0]->FindSession("sub")), std::vector<std::string>{});
}

// QoS 2 across a takeover (docs/partitions.md): the gone node delivered two
// messages its publisher's node never saw confirmed, the client PUBREC'd
// one and completed the other. The partition's copy still knows both by
// id, so their replays queue neither again; a third, sent and not yet
// PUBREC'd, is held as in flight and not queued twice either.
TEST_F(SessionReplicationTest, AQos2DeliveryTheClientReceivedIsNotDeliveredAgainByTheReplay) {
  StartNode();
  OfflineSubscriber("sub", "t", QoS::kExactlyOnce);
  const MessagePtr completed = Make("t", "completed", QoS::kExactlyOnce);
  const MessagePtr released = Make("t", "released", QoS::kExactlyOnce);
  const MessagePtr sent = Make("t", "sent", QoS::kExactlyOnce);
  const MessagePtr fresh = Make("t", "fresh", QoS::kExactlyOnce);
  for (const MessagePtr& message : {completed, released, sent}) brokers_[0]->Publish(message, [] {});
  Settle();
  port_.ReleaseAll();
  Session* session = brokers_[0]->Attach("sub", false, &sink_).session;
  (void)session->HasQueued();  // stages the queue
  Settle();
  port_.ReleaseAll();
  Settle();
  std::vector<uint16_t> ids;
  while (session->HasQueued()) {
    Delivery delivery = session->PopQueued();
    const uint16_t id = session->NextPacketId();
    session->AddInflight(id, InflightDelivery{std::move(delivery), InflightPhase::kAwaitingPubrec,
                                              session->NextSendOrder()});
    ids.push_back(id);
  }
  ASSERT_EQ(ids.size(), 3u);
  session->MarkReleased(ids[0]);
  session->MarkReleased(ids[1]);
  EXPECT_TRUE(session->RemoveInflight(ids[0]));  // PUBCOMP
  ASSERT_NE(session->completed(), nullptr);
  ASSERT_EQ(session->completed()->size(), 1u);
  EXPECT_EQ(session->completed()->front().id, completed->id);
  Settle();
  port_.ReleaseAll();
  Settle();
  const auto keys = port_.Load("sub");

  MoveToAnotherNode();
  brokers_[0]->AdoptSession("sub", keys, /*taken_over=*/true, /*taken_from=*/9);
  session = brokers_[0]->FindSession("sub");
  ASSERT_NE(session, nullptr);
  EXPECT_EQ(session->inflight().size(), 2u) << "the PUBREC'd one and the sent one";
  ASSERT_NE(session->completed(), nullptr);
  EXPECT_EQ(session->completed()->size(), 1u);
  int done = 0;
  for (const MessagePtr& message : {completed, released, sent, fresh}) {
    brokers_[0]->DeliverReplayed(message, 9, [&] { ++done; });
  }
  Settle();
  port_.ReleaseAll();
  Settle();
  EXPECT_EQ(done, 4);
  EXPECT_EQ(QueuedPayloads(session), std::vector<std::string>{"fresh"});
  EXPECT_EQ(metrics_[0].replayed_duplicates_skipped.load(), 3u);
}

// The completed deliveries remembered are bounded: past
// kCompletedRemembered the oldest marker's key is deleted, and a packet id
// used again replaces its marker.
TEST_F(SessionReplicationTest, CompletedQos2MarkersAreBoundedAndGiveWayToTheirPacketId) {
  StartNode();
  OfflineSubscriber("sub", "t", QoS::kExactlyOnce);
  port_.ReleaseAll();
  Session* session = brokers_[0]->Attach("sub", false, &sink_).session;
  const size_t rounds = Session::kCompletedRemembered + 5;
  for (size_t i = 0; i < rounds; ++i) {
    brokers_[0]->Publish(Make("t", "m" + std::to_string(i), QoS::kExactlyOnce), [] {});
    Settle();
    port_.ReleaseAll();
    (void)session->HasQueued();
    Settle();
    port_.ReleaseAll();
    Settle();
    ASSERT_TRUE(session->HasQueued()) << i;
    Delivery delivery = session->PopQueued();
    const uint16_t id = session->NextPacketId();
    session->AddInflight(id, InflightDelivery{std::move(delivery), InflightPhase::kAwaitingPubrec,
                                              session->NextSendOrder()});
    session->MarkReleased(id);
    session->RemoveInflight(id);
  }
  Settle();
  port_.ReleaseAll();
  Settle();
  ASSERT_NE(session->completed(), nullptr);
  EXPECT_EQ(session->completed()->size(), Session::kCompletedRemembered);
  size_t markers = 0;
  for (const auto& [key, value] : port_.Load("sub")) {
    if (key[0] == store::kInflightTag && store::DecodeCompleted(value)) ++markers;
  }
  EXPECT_EQ(markers, Session::kCompletedRemembered) << "the partition holds the same bound";
  // A marker under the next fresh packet id gives way when the id is used.
  const auto next = static_cast<uint16_t>(rounds + 1);
  session->RestoreCompleted(next, MessageId{1, 5, 5});
  EXPECT_EQ(session->NextPacketId(), next);
  EXPECT_EQ(session->completed()->size(), Session::kCompletedRemembered);
  for (const Session::Completed& kept : *session->completed()) EXPECT_NE(kept.packet_id, next);
}

// A move's refused writes (docs/partitions.md "Deliveries left behind by a
// move"): the copy the old node drops gives up its plain QoS 1/2
// deliveries, and the new node's session takes each message once: what it
// read from the partition and what reached it directly are not offered
// twice.
TEST_F(SessionReplicationTest, DeliveriesLeftBehindByAMoveReachTheNewCopyOnce) {
  const auto keys = SubscriberHolding("on the partition");  // what the new node reads at its claim
  const MessagePtr both_ways = Make("t", "both ways");
  brokers_[0]->Publish(Make("t", "refused"), [] {});
  brokers_[0]->Publish(both_ways, [] {});
  brokers_[0]->Publish(Make("t", "at most once", QoS::kAtMostOnce), [] {});
  Settle();
  std::vector<Delivery> stale = brokers_[0]->LostToAnotherNode("sub");
  std::vector<std::string> payloads;
  for (const Delivery& delivery : stale) payloads.push_back(std::string(*delivery.message->payload));
  EXPECT_EQ(payloads, (std::vector<std::string>{"on the partition", "refused", "both ways"}));
  EXPECT_EQ(brokers_[0]->FindSession("sub"), nullptr);
  EXPECT_TRUE(brokers_[0]->LostToAnotherNode("sub").empty()) << "gone already: nothing twice";

  MoveToAnotherNode();
  brokers_[0]->AdoptSession("sub", keys, /*taken_over=*/false, /*taken_from=*/9);
  int acked = 0;
  brokers_[0]->Publish(both_ways, [&] { ++acked; });  // its publisher's node routed it here too
  Settle();
  int done = 0;
  EXPECT_FALSE(brokers_[0]->AcceptHandedOff("nobody", stale, [&] { ++done; }));
  EXPECT_TRUE(brokers_[0]->AcceptHandedOff("sub", stale, [&] { ++done; }));
  Settle();
  EXPECT_EQ(done, 0) << "answered only once durable";
  // The hand-off's own batch done, an earlier one still held (as a batch
  // this node holds for a hand-off of its own is): answered all the same.
  port_.ReleaseLast();
  Settle();
  EXPECT_EQ(done, 1);
  EXPECT_EQ(acked, 0);
  port_.ReleaseAll();
  Settle();
  EXPECT_EQ(acked, 1);
  EXPECT_EQ(QueuedPayloads(brokers_[0]->FindSession("sub")),
            (std::vector<std::string>{"on the partition", "both ways", "refused"}));
  EXPECT_EQ(metrics_[0].handed_off_in.load(), 3u);
  EXPECT_EQ(metrics_[0].replayed_duplicates_skipped.load(), 2u);
}

// A copy that lost its client id can have a late write land once this node
// claims the id back (docs/partitions.md "Late writes of a copy that lost
// its client id"): the session read then holds a message both in flight
// (the old copy's record) and queued (the other node's). Issue 29's QoS 2
// duplicate: the adopted copy resent it in flight and then sent the queued
// copy under a new packet id. The queued copy is dropped at the adoption,
// here and in the partition.
TEST_F(SessionReplicationTest, AnAdoptedCopyDropsAQueuedCopyOfAMessageItHoldsInFlight) {
  StartNode();
  OfflineSubscriber("sub", "t", QoS::kExactlyOnce);
  brokers_[0]->Publish(Make("t", "m0", QoS::kExactlyOnce), [] {});
  brokers_[0]->Publish(Make("t", "m1", QoS::kExactlyOnce), [] {});
  brokers_[0]->Publish(Make("t", "m2", QoS::kExactlyOnce), [] {});
  Settle();
  port_.ReleaseAll();
  Settle();
  const auto all_queued = port_.Load("sub");  // the other node's queued records
  Session* session = brokers_[0]->Attach("sub", false, &sink_).session;
  session->set_expiry_interval(3600);
  Delivery first = session->PopQueued();
  const uint16_t id = session->NextPacketId();
  session->AddInflight(id, InflightDelivery{std::move(first), InflightPhase::kAwaitingPubrec, session->NextSendOrder()});
  Settle();
  port_.ReleaseAll();
  Settle();
  // The old copy's in-flight record of m0 together with every queued record.
  std::map<std::string, std::string> merged(all_queued.begin(), all_queued.end());
  for (const auto& [key, value] : port_.Load("sub")) merged.insert_or_assign(key, value);
  auto count_tag = [](const auto& keys, char tag) {
    return std::count_if(keys.begin(), keys.end(), [tag](const auto& kv) { return kv.first[0] == tag; });
  };
  ASSERT_EQ(count_tag(merged, store::kQueuedTag), 3) << "m0 queued as well as in flight";
  ASSERT_EQ(count_tag(merged, store::kInflightTag), 1);

  MoveToAnotherNode();
  std::vector<std::pair<std::string, std::string>> keys;  // in Load's order: record first
  for (char tag : {store::kSessionTag, store::kSubscriptionTag, store::kQueuedTag, store::kInflightTag}) {
    for (const auto& kv : merged) {
      if (kv.first[0] == tag) keys.push_back(kv);
    }
  }
  brokers_[0]->AdoptSession("sub", keys, /*taken_over=*/false, /*taken_from=*/9);
  Settle();
  port_.ReleaseAll();
  Settle();
  session = brokers_[0]->FindSession("sub");
  ASSERT_NE(session, nullptr);
  ASSERT_EQ(session->inflight().count(id), 1u);
  EXPECT_EQ(*session->inflight().at(id).delivery.message->payload, "m0");
  EXPECT_EQ(QueuedPayloads(session), (std::vector<std::string>{"m1", "m2"})) << "m0 once, in flight";
  EXPECT_EQ(count_tag(port_.Load("sub"), store::kQueuedTag), 2) << "the partition's queued copy is gone too";
}

// A copy that lost its client id without hearing of it is replaced when
// this node reads the session back for a reconnect (the claim names
// another node). What it took after the other node's claim may be in no
// other copy: it is offered to the copy read back, once.
TEST_F(SessionReplicationTest, ACopyReadBackTakesWhatTheReplacedCopyHeldOnce) {
  const auto keys = SubscriberHolding("on the partition");  // the session as the other node had it
  int acked = 0;
  brokers_[0]->Publish(Make("t", "held here"), [&] { ++acked; });  // its write not answered yet
  Settle();
  brokers_[0]->AdoptSession("sub", keys, /*taken_over=*/false, /*taken_from=*/9);
  Settle();
  port_.ReleaseAll();
  Settle();
  EXPECT_EQ(QueuedPayloads(brokers_[0]->FindSession("sub")),
            (std::vector<std::string>{"on the partition", "held here"}));
  EXPECT_EQ(metrics_[0].replayed_duplicates_skipped.load(), 1u) << "the one both copies held";
  EXPECT_EQ(acked, 1);
}

// A claim whose result was no longer kept does not name the previous node
// (taken_from 0): the adopted copy still offers a hand-off's message once.
TEST_F(SessionReplicationTest, ACopyAdoptedFromAnUnknownNodeStillTakesAHandedOnMessageOnce) {
  const auto keys = SubscriberHolding("held");
  std::vector<Delivery> stale = brokers_[0]->LostToAnotherNode("sub");
  ASSERT_EQ(stale.size(), 1u);
  MoveToAnotherNode();
  brokers_[0]->AdoptSession("sub", keys, /*taken_over=*/false, /*taken_from=*/0);
  EXPECT_TRUE(brokers_[0]->AcceptHandedOff("sub", stale, [] {}));
  Settle();
  port_.ReleaseAll();
  Settle();
  EXPECT_EQ(QueuedPayloads(brokers_[0]->FindSession("sub")), std::vector<std::string>{"held"});
  EXPECT_EQ(metrics_[0].replayed_duplicates_skipped.load(), 1u);
}

// The route gap of a move (docs/partitions.md, "Deliveries left behind by
// a move"): a copy dropped because its session moved keeps its plain
// subscriptions as a stub until the agent ends it; what they match goes to
// the new node, and its publisher waits until the new node has it.
TEST_F(SessionReplicationTest, AMovedSessionsStubHandsOnWhatItMatchesUntilItEnds) {
  StartNode();
  Session* sub = OfflineSubscriber("sub", "t");
  brokers_[0]->Subscribe(sub, "$share/g/t", SubscriptionOptions{});
  port_.ReleaseAll();
  Settle();
  port_.route_changes.clear();
  EXPECT_TRUE(brokers_[0]->LostToAnotherNode("sub").empty());
  EXPECT_EQ(brokers_[0]->FindSession("sub"), nullptr);
  EXPECT_EQ(brokers_[0]->moved_stub_count(), 1u);
  ASSERT_EQ(port_.stubs_opened.size(), 1u);
  EXPECT_EQ(port_.stubs_opened[0].client_id, "sub");
  EXPECT_EQ(port_.stubs_opened[0].filters, std::vector<std::string>{"t"}) << "the shared one left its group";
  EXPECT_TRUE(port_.route_changes.empty()) << "its plain route stays while the stub does";

  int acked = 0;
  brokers_[0]->Publish(Make("t", "in the gap"), [&] { ++acked; });
  brokers_[0]->Publish(Make("t", "also"), [&] { ++acked; });
  brokers_[0]->Publish(Make("t", "at most once", QoS::kAtMostOnce), [&] { ++acked; });
  Settle();
  port_.ReleaseAll();
  Settle();
  EXPECT_EQ(port_.stub_deliveries, (std::vector<std::string>{"sub:in the gap", "sub:also"}));
  ASSERT_EQ(port_.stub_waiting.size(), 1u) << "one hand-off per loop iteration";
  EXPECT_EQ(acked, 1) << "QoS 0 waits for nothing; the others for the new node";
  EXPECT_EQ(metrics_[0].moved_stub_deliveries.load(), 2u);
  auto taken = std::move(port_.stub_waiting);
  port_.stub_waiting.clear();
  for (auto& done : taken) done();
  Settle();
  EXPECT_EQ(acked, 3);

  brokers_[0]->EndMovedStub("sub", port_.stubs_opened[0].stub + 1);  // not this stub: nothing
  EXPECT_EQ(brokers_[0]->moved_stub_count(), 1u);
  brokers_[0]->EndMovedStub("sub", port_.stubs_opened[0].stub);
  EXPECT_EQ(brokers_[0]->moved_stub_count(), 0u);
  EXPECT_EQ(port_.route_changes, std::vector<std::string>{"-t"});
  EXPECT_EQ(metrics_[0].moved_stubs.load(), 0u);
  brokers_[0]->Publish(Make("t", "after"), [&] { ++acked; });
  Settle();
  port_.ReleaseAll();
  Settle();
  EXPECT_EQ(port_.stub_deliveries.size(), 2u);
  EXPECT_EQ(acked, 4);
}

TEST_F(SessionReplicationTest, AClientBackOnTheOldNodeEndsTheStubWithoutARouteFlap) {
  StartNode();
  OfflineSubscriber("sub", "t");
  port_.ReleaseAll();
  Settle();
  const auto keys = port_.Load("sub");
  (void)brokers_[0]->TakenOverElsewhere("sub");
  EXPECT_EQ(brokers_[0]->moved_stub_count(), 1u);
  port_.route_changes.clear();
  brokers_[0]->AdoptSession("sub", keys, /*taken_over=*/false, /*taken_from=*/2);
  EXPECT_EQ(brokers_[0]->moved_stub_count(), 0u);
  EXPECT_TRUE(port_.route_changes.empty()) << "the adopted copy holds the route before the stub lets it go";
  // A stub the attach finds (no adoption) ends too.
  (void)brokers_[0]->TakenOverElsewhere("sub");
  EXPECT_EQ(brokers_[0]->moved_stub_count(), 1u);
  (void)brokers_[0]->Attach("sub", false, &sink_);
  EXPECT_EQ(brokers_[0]->moved_stub_count(), 0u);
}

}  // namespace
}  // namespace estuary::core
