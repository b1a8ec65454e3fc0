// ClusterAgent across simulated nodes (the fixture:
// cluster_agent_fixture_for_tests.h) when peers change: the version gates
// a node's link minor closes, forwards to a suspect or unreachable peer,
// and the replay of what a dead node never confirmed (the verdict that a
// node is gone is the metadata group's: DeclareGoneEverywhere stands for
// it; cluster_silent_cut_test.cc runs the real one).
#include <gtest/gtest.h>

#include "cluster-core/cluster/cluster_agent_fixture_for_tests.h"

namespace estuary::cluster {
namespace {

using namespace test_support;  // NOLINT(google-build-using-namespace): the fixture's fakes
using core::ShardBroker;

// Rolling upgrades (docs/storage.md): a node whose hello says link minor 0
// is an older binary that rejects delivery records with a group key; the
// shards write them without it until every linked node reads them.
TEST_F(ClusterAgentTest, DeliveryRecordsKeepTheGroupKeyOnlyWhileEveryLinkedNodeReadsThem) {
  AddNode(1);
  AddNode(2);
  ConnectAll();
  core::ClusterPort& port = nodes_[1]->agent->port();
  EXPECT_TRUE(port.GroupKeysInRecords());
  LinkHandler* handler = nodes_[1]->transport.handler();
  handler->OnPeerDown(2);
  handler->OnPeerUp(PeerInfo{2, "fake", 0});  // restarted on an older binary
  loop_.RunUntilIdle();
  EXPECT_FALSE(port.GroupKeysInRecords());
  EXPECT_EQ(nodes_[1]->agent->counters().older_binary_peers, 1u);
  handler->OnPeerDown(2);  // away again: it may come back as it was
  loop_.RunUntilIdle();
  EXPECT_FALSE(port.GroupKeysInRecords());
  handler->OnPeerUp(PeerInfo{2, "fake", kLinkVersionMinor});  // upgraded
  loop_.RunUntilIdle();
  EXPECT_TRUE(port.GroupKeysInRecords());
  EXPECT_TRUE(port.HandsOnGroupQueues());
  EXPECT_EQ(nodes_[1]->agent->counters().older_binary_peers, 0u);
}

// Minor 1 reads keyed records but does not apply the queues' hands: a
// partitioned group's QoS 2 goes without them (at least once) meanwhile.
TEST_F(ClusterAgentTest, QueueHandsAreMadeOnlyWhileEveryLinkedNodeAppliesThem) {
  AddNode(1);
  AddNode(2);
  ConnectAll();
  core::ClusterPort& port = nodes_[1]->agent->port();
  EXPECT_TRUE(port.HandsOnGroupQueues());
  LinkHandler* handler = nodes_[1]->transport.handler();
  handler->OnPeerDown(2);
  handler->OnPeerUp(PeerInfo{2, "fake", kMinorGroupKeyRecords});
  loop_.RunUntilIdle();
  EXPECT_FALSE(port.HandsOnGroupQueues());
  EXPECT_TRUE(port.GroupKeysInRecords());
  EXPECT_EQ(nodes_[1]->agent->counters().older_binary_peers, 1u);
  handler->OnPeerDown(2);
  handler->OnPeerUp(PeerInfo{2, "fake", kMinorQueueHands});
  loop_.RunUntilIdle();
  EXPECT_TRUE(port.HandsOnGroupQueues());
  EXPECT_FALSE(nodes_[1]->agent->claim_guard()) << "minor 2 does not apply guarded takeover claims";
  EXPECT_EQ(nodes_[1]->agent->counters().older_binary_peers, 1u);
  handler->OnPeerDown(2);
  handler->OnPeerUp(PeerInfo{2, "fake", kMinorClaimGuard});
  loop_.RunUntilIdle();
  EXPECT_TRUE(nodes_[1]->agent->claim_guard());
  EXPECT_EQ(nodes_[1]->agent->counters().older_binary_peers, 1u) << "minor 3 takes no session hand-offs";
  handler->OnPeerDown(2);
  handler->OnPeerUp(PeerInfo{2, "fake", kMinorSessionHandOff});
  loop_.RunUntilIdle();
  EXPECT_FALSE(nodes_[1]->agent->copy_fence()) << "minor 4 does not apply fenced claims and writes";
  EXPECT_EQ(nodes_[1]->agent->counters().older_binary_peers, 1u);
  handler->OnPeerDown(2);
  handler->OnPeerUp(PeerInfo{2, "fake", kMinorCopyFence});
  loop_.RunUntilIdle();
  EXPECT_TRUE(nodes_[1]->agent->copy_fence());
  EXPECT_EQ(nodes_[1]->agent->counters().older_binary_peers, 0u);
}

// Issue 6 (TSan churn run) made a forward to a suspect node release its
// publisher at once; issue 7 (the takeover gap) takes that back: the
// publisher waits until the node confirms (it came back) or, once it is
// declared gone, until the nodes that took its sessions over have the
// message (the tests below). Frames held for it no longer count against
// the publisher's forward window either way.
TEST_F(ClusterAgentTest, ForwardToASuspectPeerWaitsUntilItComesBack) {
  const MembershipConfig members = StartTwoWithMembership();
  ASSERT_TRUE(nodes_[1]->agent->membership()->IsLive(2));
  core::Session* sub = Subscriber(2, "sub", "t");
  auto flow = std::make_shared<CountingFlow>();
  ShardBroker& publisher_shard = nodes_[1]->ShardOf("pub");
  const core::FlowId flow_id = publisher_shard.RegisterFlow(flow);
  network_.Cut(1, 2);
  // Held while the link is down but the peer is not suspected yet.
  auto before = Publish(1, Make(1, "t", "before", QoS::kAtLeastOnce), flow_id);
  loop_.RunUntilIdle();
  EXPECT_FALSE(*before);
  loop_.AdvanceBy(members.suspect_after_ms + 200);
  ASSERT_EQ(nodes_[1]->agent->membership()->Find(2)->state, MemberState::kSuspect);
  EXPECT_FALSE(*before);
  auto during = Publish(1, Make(1, "t", "during", QoS::kExactlyOnce), flow_id);
  loop_.RunUntilIdle();
  EXPECT_FALSE(*during);
  const ClusterCounters& c = nodes_[1]->agent->counters();
  EXPECT_EQ(c.forwards_parked_again, 0u);
  EXPECT_EQ(c.forwards_expired, 0u);
  EXPECT_EQ(c.forwards_held, 2u);
  // The link comes back before the peer is declared down: what was held is
  // delivered and confirmed.
  network_.Connect(1, 2);
  loop_.AdvanceBy(1000);
  EXPECT_TRUE(*before);
  EXPECT_TRUE(*during);
  std::vector<std::string> got;
  for (auto& [payload, qos] : Drain(sub)) got.push_back(payload);
  EXPECT_EQ(got, (std::vector<std::string>{"before", "during"}));
  EXPECT_EQ(nodes_[1]->agent->counters().forwards_held, 0u);
  publisher_shard.UnregisterFlow(flow_id);
}

// The churn test's stall after a graceful leave (NodeLeavingDuringTraffic,
// 1 run in 5 once forwards got cheaper): the leaving node's routes linger
// until the metadata group drops them, and every forward to it was held
// with its publisher's window charged. A fast publisher filled the window
// (kForwardWindow) and was paused until the held frames expired, longer
// than its client waited for a PUBACK. Forwards to an unreachable peer are
// held without charging the window.
TEST_F(ClusterAgentTest, ForwardsHeldForAnUnreachablePeerDoNotPauseThePublisher) {
  const MembershipConfig members = StartTwoWithMembership();
  ASSERT_TRUE(nodes_[1]->agent->membership()->IsLive(2));
  core::Session* sub = Subscriber(2, "sub", "t");
  auto flow = std::make_shared<CountingFlow>();
  ShardBroker& publisher_shard = nodes_[1]->ShardOf("pub");
  const core::FlowId flow_id = publisher_shard.RegisterFlow(flow);
  network_.Cut(1, 2);
  loop_.AdvanceBy(members.suspect_after_ms + 200);
  ASSERT_EQ(nodes_[1]->agent->membership()->Find(2)->state, MemberState::kSuspect);
  const int count = 3 * static_cast<int>(core::kForwardWindow);
  std::vector<std::shared_ptr<bool>> safe;
  for (int i = 0; i < count; ++i) {
    safe.push_back(Publish(1, Make(1, "t", std::to_string(i), QoS::kAtLeastOnce), flow_id));
    loop_.RunUntilIdle();
  }
  // Not acknowledged (the node has not confirmed them), but not paused.
  for (const auto& s : safe) EXPECT_FALSE(*s);
  EXPECT_EQ(flow->paused, 0);  // no time passed: only a charged window could have paused it
  const ClusterCounters& c = nodes_[1]->agent->counters();
  EXPECT_EQ(c.forwards_held, uint64_t(count));  // held, in case the suspicion is refuted
  EXPECT_EQ(c.forwards_expired, 0u);
  // The link comes back: the held frames go, in order, and credit nothing twice.
  network_.Connect(1, 2);
  loop_.AdvanceBy(1000);
  for (const auto& s : safe) EXPECT_TRUE(*s);
  const auto got = Drain(sub);
  ASSERT_EQ(got.size(), size_t(count));
  for (int i = 0; i < count; ++i) EXPECT_EQ(got[size_t(i)].first, std::to_string(i));
  EXPECT_EQ(nodes_[1]->agent->counters().forwards_held, 0u);
  // The window is whole: another kForwardWindow forwards over the live link pause nobody.
  for (int i = 0; i + 1 < static_cast<int>(core::kForwardWindow); ++i) {
    Publish(1, Make(1, "t", "after", QoS::kAtLeastOnce), flow_id);
  }
  loop_.RunUntilIdle();
  EXPECT_EQ(flow->paused, 0);
  publisher_shard.UnregisterFlow(flow_id);
}

// The takeover gap (docs/partitions.md): node 2 dies with a session
// subscribed to "t"; node 3 stands for the survivor that takes it over (a
// session marked as taken from node 2, as ShardBroker::AdoptSession marks
// one). A QoS 1 publish made after the death but before anyone noticed is
// not acknowledged until node 2 is declared gone and the forward replayed
// to node 3, which offers it to the taken-over session only; a publish on
// the gone node's lingering route after that reaches the session once, not
// once per path.
TEST_F(ClusterAgentTest, AForwardADeadNodeNeverConfirmedReachesTheSessionTakenFromIt) {
  StartThree();
  Subscriber(2, "victim", "t");
  core::Session* bystander = Subscriber(3, "bystander", "t");
  Crash(2);
  auto lost_before = Publish(1, Make(1, "t", "m1"));
  loop_.AdvanceBy(1500);
  EXPECT_FALSE(*lost_before);  // node 2 has not confirmed: not acknowledged
  // The survivor's copy of the session (adopted while node 2 was gone).
  core::Session* taken = Subscriber(3, "victim", "t");
  taken->MarkTakenFrom(2, loop_.clock().WallMs() + 60'000);
  DeclareGoneEverywhere(2);  // m1 replayed
  EXPECT_TRUE(*lost_before);
  auto after = Publish(1, Make(1, "t", "m2"));  // node 3's route and node 2's lingering one
  loop_.RunUntilIdle();
  EXPECT_TRUE(*after);
  using Got = std::vector<std::pair<std::string, QoS>>;
  EXPECT_EQ(Drain(taken), (Got{{"m1", QoS::kAtLeastOnce}, {"m2", QoS::kAtLeastOnce}}));
  EXPECT_EQ(Drain(bystander), (Got{{"m1", QoS::kAtLeastOnce}, {"m2", QoS::kAtLeastOnce}}));
  const ClusterCounters& c = nodes_[1]->agent->counters();
  EXPECT_EQ(c.forwards_replayed, 2u);
  EXPECT_EQ(c.forwards_expired, 0u);
  EXPECT_EQ(c.forwards_parked_again, 0u);
  EXPECT_EQ(nodes_[3]->agent->counters().replays_in, 2u);
  uint64_t skipped = 0;
  for (const auto& metrics : nodes_[3]->metrics) skipped += metrics.replayed_duplicates_skipped.load();
  EXPECT_EQ(skipped, 1u);  // m2 came both ways
  // After replay_grace_ms the gone node's routes are dropped: nothing more is replayed.
  loop_.AdvanceBy(config_.replay_grace_ms);
  Publish(1, Make(1, "t", "m3"));
  loop_.RunUntilIdle();
  EXPECT_EQ(nodes_[1]->agent->counters().forwards_replayed, 2u);
  EXPECT_EQ(Drain(taken), (Got{{"m3", QoS::kAtLeastOnce}}));
}

// A shared group's message picked for a member on a node that dies is not
// acknowledged on suspicion; once the node is gone the publisher's node
// sends it to the group again, which picks a live member.
TEST_F(ClusterAgentTest, AGroupMessageForADeadNodesMemberGoesToALiveMember) {
  StartThree();
  Subscriber(2, "m2", "$share/g/t");
  core::Session* m3 = Subscriber(3, "m3", "$share/g/t");
  Crash(2);
  std::vector<std::shared_ptr<bool>> safe;
  for (int i = 0; i < 4; ++i) safe.push_back(Publish(1, Make(1, "t", "m" + std::to_string(i))));
  loop_.RunUntilIdle();
  const uint64_t to_dead = std::count_if(safe.begin(), safe.end(), [](const auto& s) { return !*s; });
  EXPECT_GT(to_dead, 0u);  // the group picked node 2 for some: they wait
  loop_.AdvanceBy(3000);
  // Time alone releases none of them: only the verdict does.
  EXPECT_EQ(std::count_if(safe.begin(), safe.end(), [](const auto& s) { return !*s; }), int64_t(to_dead));
  DeclareGoneEverywhere(2);
  for (const auto& s : safe) EXPECT_TRUE(*s);
  std::vector<std::string> got;
  for (auto& [payload, qos] : Drain(m3)) got.push_back(payload);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::string>{"m0", "m1", "m2", "m3"}));
  EXPECT_EQ(nodes_[1]->agent->counters().forwards_replayed, to_dead);
  // Nothing was sent to node 3 as a replay: a group's part is the publisher's node's.
  EXPECT_EQ(nodes_[3]->agent->counters().replays_in, 0u);
}

class ClusterReplayTest : public ClusterAgentTest {
 protected:
  // Node 2, holding the subscriber, dies with a forward from node 1
  // unconfirmed; once node 1 declares it gone the forward is replayed to
  // the others, whose copies wait in the paused network. Returns the
  // publisher's acknowledgement flag.
  std::shared_ptr<bool> ReplayAfterNode2Dies() {
    Subscriber(2, "victim", "t");
    Crash(2);
    auto safe = Publish(1, Make(1, "t", "m1"));
    network_.paused = true;
    DeclareGoneEverywhere(2);
    EXPECT_EQ(nodes_[1]->agent->counters().forwards_replayed, 1u);
    EXPECT_FALSE(*safe);  // node 1 confirmed its own share; the others have not
    return safe;
  }
};

// A replay a live node has not confirmed by replay_timeout_ms is sent to it
// again; its publisher is acknowledged only once that node confirms (issue
// 29: a deadline never acknowledges a message no one may hold).
TEST_F(ClusterReplayTest, AReplayNotConfirmedInTimeIsSentAgainNotAcknowledged) {
  StartThree();
  auto safe = ReplayAfterNode2Dies();
  loop_.AdvanceBy(config_.replay_timeout_ms);
  EXPECT_FALSE(*safe);
  EXPECT_EQ(nodes_[1]->agent->counters().replays_sent_again, 1u);
  network_.Resume();
  loop_.RunUntilIdle();
  EXPECT_TRUE(*safe);
  EXPECT_EQ(nodes_[3]->agent->counters().replays_in, 2u);  // the first and the second copy
}

// A replay in flight on a link that is lost (a cut between the publisher's
// node and one target only: nothing is declared gone) goes again on the
// next link; until then its publisher waits.
TEST_F(ClusterReplayTest, AReplayLostWithItsLinkIsSentAgainOnTheNextLink) {
  StartThree();
  auto safe = ReplayAfterNode2Dies();
  network_.Cut(1, 3);  // the replay frame in flight is lost with the link
  network_.Resume();
  loop_.RunUntilIdle();
  EXPECT_EQ(nodes_[3]->agent->counters().replays_in, 0u);
  EXPECT_FALSE(*safe);
  network_.Connect(1, 3);
  loop_.RunUntilIdle();
  EXPECT_EQ(nodes_[3]->agent->counters().replays_in, 1u);
  EXPECT_TRUE(*safe);
  EXPECT_EQ(nodes_[1]->agent->counters().replays_sent_again, 1u);
}

// A target declared gone before it confirms hands its share on: the replay
// is made again for it, to the nodes live now, and the publisher waits for
// their confirmations.
TEST_F(ClusterReplayTest, AReplayWhoseTargetIsDeclaredGoneGoesOnForIt) {
  for (NodeId id : {1, 2, 3, 4}) AddNode(id);
  ConnectAll();
  auto safe = ReplayAfterNode2Dies();
  Crash(3);  // never confirms
  network_.Resume();
  loop_.RunUntilIdle();
  EXPECT_EQ(nodes_[4]->agent->counters().replays_in, 1u);
  EXPECT_FALSE(*safe);  // node 3 may have held the sessions node 2 had
  DeclareGoneEverywhere(3);
  EXPECT_EQ(nodes_[1]->agent->counters().replays_redirected, 1u);
  EXPECT_TRUE(*safe);
  EXPECT_EQ(nodes_[4]->agent->counters().replays_in, 2u);  // and once for node 3
}

}  // namespace
}  // namespace estuary::cluster
