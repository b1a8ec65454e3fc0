// ClusterAgent + ShardBroker across "nodes" in one process (the fixture:
// cluster_agent_fixture_for_tests.h; routes through its RouteBoard):
// routing and forwarding at every QoS, safe frames, held forwards, shared
// groups, a gone node's routes, flow control, order, reports, pending
// forwards. Peers that go down, membership, the takeover replay and the
// version gates: cluster_agent_peers_test.cc; retained messages and
// client-id takeover, which need partitions: cluster_agent_full_test.cc.
#include "cluster-core/cluster/cluster_agent.h"

#include <gtest/gtest.h>

#include "cluster-core/cluster/cluster_agent_fixture_for_tests.h"

namespace estuary::cluster {
namespace {

using namespace test_support;  // NOLINT(google-build-using-namespace): the fixture's fakes
using core::ShardBroker;

TEST_F(ClusterAgentTest, DeliversAcrossNodesAtEveryQosWithWildcards) {
  AddNode(1);
  AddNode(2);
  ConnectAll();
  core::Session* plus = Subscriber(2, "sub-plus", "s/+/x", QoS::kExactlyOnce);
  core::Session* hash = Subscriber(2, "sub-hash", "s/#", QoS::kAtLeastOnce);
  for (QoS qos : {QoS::kAtMostOnce, QoS::kAtLeastOnce, QoS::kExactlyOnce}) {
    Publish(1, Make(1, "s/a/x", std::to_string(int(qos)), qos));
  }
  Publish(1, Make(1, "other", "no"));
  loop_.RunUntilIdle();
  using Got = std::vector<std::pair<std::string, QoS>>;
  EXPECT_EQ(Drain(plus), (Got{{"0", QoS::kAtMostOnce}, {"1", QoS::kAtLeastOnce}, {"2", QoS::kExactlyOnce}}));
  EXPECT_EQ(Drain(hash), (Got{{"0", QoS::kAtMostOnce}, {"1", QoS::kAtLeastOnce}, {"2", QoS::kAtLeastOnce}}));
  // One forward per publish with matching routes, whatever the subscriber count.
  EXPECT_EQ(nodes_[1]->agent->counters().forwards_out, 3u);
  EXPECT_EQ(nodes_[2]->agent->counters().forwards_in, 3u);
  EXPECT_EQ(nodes_[1]->agent->remote_route_count(), 2u);
}

TEST_F(ClusterAgentTest, ReceivingNodeNeverForwardsToAThirdNode) {
  AddNode(1);
  AddNode(2);
  AddNode(3);
  ConnectAll();
  core::Session* on2 = Subscriber(2, "a", "t");
  core::Session* on3 = Subscriber(3, "b", "t");
  Publish(1, Make(1, "t", "m"));
  loop_.RunUntilIdle();
  EXPECT_EQ(Drain(on2).size(), 1u);
  EXPECT_EQ(Drain(on3).size(), 1u);
  EXPECT_EQ(nodes_[2]->agent->counters().forwards_out, 0u);
  EXPECT_EQ(nodes_[3]->agent->counters().forwards_out, 0u);
}

TEST_F(ClusterAgentTest, PublisherAcknowledgementWaitsForTheRemoteSafeFrame) {
  AddNode(1);
  AddNode(2);
  ConnectAll();
  Subscriber(2, "sub", "t");
  network_.paused = true;  // frames between nodes wait
  auto safe = Publish(1, Make(1, "t", "m", QoS::kAtLeastOnce));
  loop_.RunUntilIdle();
  EXPECT_FALSE(*safe);
  network_.Resume();
  loop_.RunUntilIdle();
  EXPECT_TRUE(*safe);
  // Without remote subscribers the acknowledgement does not wait.
  network_.paused = true;
  auto local_only = Publish(1, Make(1, "nobody", "m", QoS::kAtLeastOnce));
  loop_.RunUntilIdle();
  EXPECT_TRUE(*local_only);
  network_.Resume();
}

TEST_F(ClusterAgentTest, AnUnconfirmedForwardIsNeverAcknowledgedByADeadline) {
  // A cut between two nodes only: the peer is not unreachable (no
  // membership says so), yet its confirmation cannot arrive. Acknowledging
  // the publisher at a deadline would lose the message (issue 29).
  AddNode(1);
  AddNode(2);
  ConnectAll();
  core::Session* sub = Subscriber(2, "sub", "t");
  network_.Cut(1, 2);
  auto safe = Publish(1, Make(1, "t", "m", QoS::kAtLeastOnce));
  auto qos0 = Publish(1, Make(1, "t", "m0", QoS::kAtMostOnce));
  loop_.RunUntilIdle();
  EXPECT_FALSE(*safe);
  EXPECT_TRUE(*qos0);
  EXPECT_EQ(nodes_[1]->agent->counters().forwards_dropped, 1u);  // QoS 0 without a link
  loop_.AdvanceBy(config_.forward_timeout_ms + config_.tick_ms);
  EXPECT_FALSE(*safe);
  EXPECT_EQ(nodes_[1]->agent->counters().forwards_expired, 1u);
  EXPECT_EQ(nodes_[1]->agent->counters().forwards_parked, 1u);
  // Still cut at the park deadline: parked once more, still not acknowledged.
  loop_.AdvanceBy(config_.park_timeout_ms + config_.tick_ms);
  EXPECT_FALSE(*safe);
  EXPECT_EQ(nodes_[1]->agent->counters().forwards_parked, 1u);
  EXPECT_GE(nodes_[1]->agent->counters().forwards_parked_again, 1u);
  // The link heals: the new link sends the parked forward again at once;
  // it is delivered, confirmed, and only then acknowledged.
  network_.Connect(1, 2);
  loop_.RunUntilIdle();
  EXPECT_TRUE(*safe);
  EXPECT_EQ(nodes_[1]->agent->counters().forwards_parked, 0u);
  auto got = Drain(sub);
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.front().first, "m");
}

TEST_F(ClusterAgentTest, HeldForwardsAreSentWhenTheLinkComesBackInTime) {
  AddNode(1);
  AddNode(2);
  ConnectAll();
  core::Session* sub = Subscriber(2, "sub", "t");
  network_.Cut(1, 2);
  auto safe = Publish(1, Make(1, "t", "held", QoS::kAtLeastOnce));
  loop_.RunUntilIdle();
  EXPECT_EQ(nodes_[1]->agent->counters().forwards_held, 1u);
  network_.Connect(1, 2);
  loop_.RunUntilIdle();
  EXPECT_TRUE(*safe);
  ASSERT_EQ(Drain(sub).size(), 1u);
  EXPECT_EQ(nodes_[1]->agent->counters().forwards_expired, 0u);
}

TEST_F(ClusterAgentTest, SharedGroupAcrossNodesGivesEachMessageToExactlyOneMember) {
  AddNode(1);
  AddNode(2);
  AddNode(3);
  ConnectAll();
  std::vector<core::Session*> members{Subscriber(1, "m1", "$share/g/job/+"), Subscriber(2, "m2", "$share/g/job/+"),
                                      Subscriber(2, "m3", "$share/g/job/+"), Subscriber(3, "m4", "$share/g/job/+")};
  const int count = 60;
  for (int i = 0; i < count; ++i) Publish(1, Make(1, "job/x", std::to_string(i)));
  loop_.RunUntilIdle();
  std::multiset<std::string> seen;
  for (core::Session* member : members) {
    auto got = Drain(member);
    EXPECT_FALSE(got.empty()) << member->client_id();
    for (auto& [payload, qos] : got) seen.insert(payload);
  }
  ASSERT_EQ(seen.size(), size_t(count));
  for (int i = 0; i < count; ++i) EXPECT_EQ(seen.count(std::to_string(i)), 1u) << i;
}

// A lost link is no verdict: the routes stay until the node is declared
// gone, and the shards keep them replay_grace_ms longer.
TEST_F(ClusterAgentTest, RoutesOfAGoneNodeAreForgottenAfterTheReplayGrace) {
  AddNode(1);
  AddNode(2);
  ConnectAll();
  Subscriber(2, "sub", "t");
  network_.Cut(1, 2);
  loop_.AdvanceBy(60'000);
  EXPECT_EQ(nodes_[1]->shards[1]->router().RoutesOf(core::NodeDestination(2)).size(), 1u);
  EXPECT_EQ(nodes_[1]->agent->remote_route_count(), 1u);
  DeclareGoneEverywhere(2);
  EXPECT_EQ(nodes_[1]->agent->remote_route_count(), 0u);
  // The shards keep them for replay_grace_ms more (forwards on them are
  // replayed to the nodes that take the gone node's sessions over).
  for (auto& shard : nodes_[1]->shards) EXPECT_EQ(shard->router().RoutesOf(core::NodeDestination(2)).size(), 1u);
  loop_.AdvanceBy(config_.replay_grace_ms);
  for (auto& shard : nodes_[1]->shards) EXPECT_TRUE(shard->router().RoutesOf(core::NodeDestination(2)).empty());
}

TEST_F(ClusterAgentTest, NodeRouteIsOneRouteWhateverTheShardsHoldingIt) {
  AddNode(1, 4);
  AddNode(2);
  ConnectAll();
  for (int i = 0; i < 8; ++i) Subscriber(1, "c" + std::to_string(i), "same");
  EXPECT_EQ(nodes_[1]->agent->local_route_count(), 1u);
  EXPECT_EQ(nodes_[2]->agent->remote_route_count(), 1u);
}

TEST_F(ClusterAgentTest, FullLinkHoldsABoundedQueueAndPausesThePublisher) {
  config_.max_held_bytes = 64 * 1024;
  AddNode(1);
  AddNode(2);
  ConnectAll();
  core::Session* sub = Subscriber(2, "sub", "t", QoS::kAtMostOnce);
  auto flow = std::make_shared<CountingFlow>();
  ShardBroker& origin = nodes_[1]->ShardOf("pub");
  const core::FlowId id = origin.RegisterFlow(flow);
  nodes_[1]->transport.full.insert(2);
  const int count = 1000;
  for (int i = 0; i < count; ++i) Publish(1, Make(1, "t", std::string(200, 'p'), QoS::kAtMostOnce), id);
  loop_.RunUntilIdle();
  const ClusterCounters& c = nodes_[1]->agent->counters();
  EXPECT_GE(flow->paused, 1);  // the forward window stops the publisher
  EXPECT_GT(c.forwards_held, 0u);
  EXPECT_LE(c.forwards_held * 200, config_.max_held_bytes);
  EXPECT_EQ(c.forwards_held + c.forwards_dropped, uint64_t(count));
  nodes_[1]->transport.full.clear();
  nodes_[1]->agent->OnWritable(2);
  loop_.RunUntilIdle();
  EXPECT_EQ(c.forwards_held, 0u);
  EXPECT_EQ(flow->resumed, flow->paused);
  EXPECT_EQ(Drain(sub).size(), count - c.forwards_dropped);
}

TEST_F(ClusterAgentTest, OrderPerPublisherHoldsAcrossNodes) {
  AddNode(1, 3);
  AddNode(2, 3);
  ConnectAll();
  core::Session* sub = Subscriber(2, "sub", "seq/#", QoS::kAtLeastOnce);
  for (int i = 0; i < 50; ++i) Publish(1, Make(1, "seq/" + std::to_string(i % 3), std::to_string(i)));
  loop_.RunUntilIdle();
  auto got = Drain(sub);
  ASSERT_EQ(got.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(got[i].first, std::to_string(i));
}

TEST_F(ClusterAgentTest, ReportsRoutesAsJsonAndMetrics) {
  AddNode(1);
  AddNode(2);
  ConnectAll();
  Subscriber(2, "sub", "$share/grp/a/#");
  const std::string json = nodes_[1]->agent->RoutesJson();
  EXPECT_NE(json.find("\"share\":\"grp\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"link\":\"up\""), std::string::npos) << json;
  const std::string metrics = nodes_[1]->agent->MetricsText();
  EXPECT_NE(metrics.find("estuary_cluster_peer_up{node=\"1\",peer=\"2\"} 1"), std::string::npos) << metrics;
}

TEST(PendingForwardsTest, ConsecutiveIdsHolesExpiryAndRelease) {
  PendingForwards pending;
  const uint64_t a = pending.Add(2, 0, 10, 100);
  const uint64_t b = pending.Add(3, 1, 11, 110);
  const uint64_t c = pending.Add(2, 0, 12, 120);
  EXPECT_EQ(a, 1u);
  EXPECT_EQ(b, 2u);
  EXPECT_EQ(c, 3u);
  EXPECT_EQ(pending.size(), 3u);
  // Taken out of order: a hole in the middle, then the front.
  ASSERT_TRUE(pending.Take(b).has_value());
  EXPECT_FALSE(pending.Take(b).has_value());  // once only
  EXPECT_FALSE(pending.Take(0).has_value());
  EXPECT_FALSE(pending.Take(99).has_value());
  EXPECT_EQ(pending.size(), 2u);
  auto expired = pending.TakeExpired(115);  // a (100) only: b is gone, c is not due
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].token, 10u);
  const uint64_t d = pending.Add(2, 1, 13, 130);
  EXPECT_EQ(d, 4u);  // ids keep counting
  const uint64_t e = pending.Add(3, 1, 14, 140);
  auto for_two = pending.TakeForNode(2);
  ASSERT_EQ(for_two.size(), 2u);
  EXPECT_EQ(for_two[0].token, 12u);
  EXPECT_EQ(for_two[1].token, 13u);
  EXPECT_EQ(pending.size(), 1u);
  auto last = pending.Take(e);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->node, 3);
  EXPECT_EQ(last->shard, 1);
  EXPECT_EQ(pending.size(), 0u);
  EXPECT_EQ(pending.Add(2, 0, 15, 150), 6u);
}

TEST_F(ClusterAgentTest, SysTopicsStayOnTheirNode) {
  AddNode(1);
  AddNode(2);
  ConnectAll();
  core::Session* remote = Subscriber(2, "sys-remote", "$SYS/#");
  core::Session* local = Subscriber(1, "sys-local", "$SYS/#");
  Publish(1, Make(1, "$SYS/broker/uptime", "5 seconds", QoS::kAtMostOnce, true));
  loop_.RunUntilIdle();
  EXPECT_EQ(Drain(local).size(), 1u);
  EXPECT_TRUE(Drain(remote).empty());
  EXPECT_EQ(nodes_[1]->agent->counters().forwards_out, 0u);
}

}  // namespace
}  // namespace estuary::cluster
