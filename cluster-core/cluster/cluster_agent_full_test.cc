// ClusterAgent across three simulated nodes run as estuaryd runs them
// (the fixture's StartFull: membership, the metadata group, partitions,
// durable shards): what only the partitions carry. Retained messages have
// one replication path, their topic's partition; a client id moves
// between nodes by a claim in the registry, which tells only the node
// whose connection it replaced.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cluster-core/cluster/cluster_agent_fixture_for_tests.h"

namespace estuary::cluster {
namespace {

using namespace test_support;  // NOLINT(google-build-using-namespace): the fixture's fakes
using core::ShardBroker;

class ClusterAgentFullTest : public ClusterAgentTest {
 protected:
  // Publishes a retained message on `node` and waits for its acknowledgement
  // (given once the topic's partition committed it).
  void PublishRetained(NodeId node, const std::string& topic, const std::string& payload) {
    auto safe = Publish(node, Make(node, topic, payload, QoS::kAtLeastOnce, true, "pub-" + std::to_string(node)));
    ASSERT_TRUE(RunUntil([&] { return *safe; }, 10'000)) << topic << " on node " << node;
  }
  // A new session on `node` subscribing to `filter`, its retained messages
  // asked for as a SUBSCRIBE does; returns their payloads, sorted.
  std::vector<std::string> RetainedOn(NodeId node, const std::string& client_id, const std::string& filter) {
    ShardBroker& shard = nodes_[node]->ShardOf(client_id);
    core::Session* session = shard.Attach(client_id, true, &sink_).session;
    core::SubscriptionOptions options;
    options.max_qos = QoS::kAtLeastOnce;
    shard.Subscribe(session, filter, options);
    shard.DeliverRetained(session, filter, options, false);
    RunUntil([&] { return session->HasQueued(); }, 5'000);
    loop_.AdvanceBy(200);  // anything more from the same read would be here by now
    std::vector<std::string> got;
    for (auto& [payload, qos] : Drain(session)) got.push_back(payload);
    std::sort(got.begin(), got.end());
    return got;
  }
};

TEST_F(ClusterAgentFullTest, RetainedMessagesAreReadFromTheirPartitionsOnEveryNode) {
  StartFull({1, 2, 3});
  PublishRetained(1, "r/a", "a1");
  PublishRetained(1, "r/b", "b1");
  // Nothing travelled pairwise: node 3's shards hold no copy of their own.
  for (auto& shard : nodes_[3]->shards) EXPECT_EQ(shard->retained().size(), 0u);
  EXPECT_EQ(RetainedOn(3, "late-3", "r/#"), (std::vector<std::string>{"a1", "b1"}));
  EXPECT_EQ(RetainedOn(2, "late-2", "r/b"), (std::vector<std::string>{"b1"}));
  // Cleared on node 2, replaced on node 3: node 1 reads what the partitions hold.
  PublishRetained(2, "r/a", "");
  PublishRetained(3, "r/b", "b2");
  EXPECT_EQ(RetainedOn(1, "late-1", "r/#"), (std::vector<std::string>{"b2"}));
  uint64_t reads = 0;
  uint64_t failed = 0;
  for (NodeId id : {1, 2, 3}) {
    reads += nodes_[id]->agent->retained()->counters().reads;
    failed += nodes_[id]->agent->retained()->counters().reads_failed;
  }
  EXPECT_EQ(reads, 3u);
  EXPECT_EQ(failed, 0u);
}

// The attach broadcast is gone: a client id taken on another node ends the
// connection here because the registry's committed claim names it.
TEST_F(ClusterAgentFullTest, AClaimOnAnotherNodeEndsTheConnectionItReplaced) {
  StartFull({1, 2, 3});
  RecordingSink first;
  RecordingSink second;
  RecordingSink bystander;
  ASSERT_TRUE(Claim(1, "dev"));
  nodes_[1]->ShardOf("dev").Attach("dev", false, &first);
  ASSERT_TRUE(Claim(3, "other"));
  nodes_[3]->ShardOf("other").Attach("other", false, &bystander);
  ASSERT_TRUE(Claim(2, "dev"));
  nodes_[2]->ShardOf("dev").Attach("dev", false, &second);
  ASSERT_TRUE(RunUntil([&] { return !first.detached.empty(); }, 5'000)) << "node 1's connection was not ended";
  EXPECT_EQ(first.detached[0], core::DetachReason::kTakenOver);
  EXPECT_TRUE(second.detached.empty());
  EXPECT_TRUE(bystander.detached.empty());
  EXPECT_EQ(nodes_[1]->ShardOf("dev").FindSession("dev"), nullptr);
  EXPECT_NE(nodes_[2]->ShardOf("dev").FindSession("dev"), nullptr);
  EXPECT_EQ(nodes_[2]->agent->counters().client_takeovers_out, 1u);
  EXPECT_EQ(nodes_[1]->agent->counters().takeovers_in, 1u);
  EXPECT_EQ(nodes_[3]->agent->counters().takeovers_in, 0u);  // told to no one else
}

}  // namespace
}  // namespace estuary::cluster
