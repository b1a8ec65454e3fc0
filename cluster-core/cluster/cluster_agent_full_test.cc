// ClusterAgent across three simulated nodes run as estuaryd runs them
// (the fixture's StartFull: membership, the metadata group, partitions,
// durable shards): what only the partitions carry. Retained messages have
// one replication path, their topic's partition; a client id moves
// between nodes by a claim in the registry, which tells only the node
// whose connection it replaced.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cluster-core/cluster/cluster_agent_fixture_for_tests.h"
#include "cluster-core/partition/session_machine.h"
#include "cluster-core/store/record_codec.h"

namespace estuary::cluster {
namespace {

using namespace test_support;  // NOLINT(google-build-using-namespace): the fixture's fakes
using core::ShardBroker;

bool Holds(const std::vector<std::string>& keys, const std::string& key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

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
    shard.DeliverRetained(session, filter, options, core::SubscribeOutcome::kAdded);
    RunUntil([&] { return session->HasQueued(); }, 5'000);
    loop_.AdvanceBy(200);  // anything more from the same read would be here by now
    std::vector<std::string> got;
    for (auto& [payload, qos] : Drain(session)) got.push_back(payload);
    std::sort(got.begin(), got.end());
    return got;
  }
  // The keys of `client_id`'s session in its partition, read through `node`.
  std::vector<std::string> PartitionKeys(NodeId node, const std::string& client_id) {
    std::vector<std::string> keys;
    bool answered = false;
    partition::PartitionHost* host = nodes_[node]->agent->partitions();
    host->Read(host->PartitionOf(client_id), partition::EncodeSessionLoad(client_id),
               [&](partition::PartitionResult result) {
                 answered = true;
                 if (result.status != meta::ProposeStatus::kOk || !result.result) return;
                 if (auto loaded = partition::DecodeSessionLoadResult(*result.result)) {
                   for (auto& [key, value] : *loaded) keys.push_back(key);
                 }
               });
    EXPECT_TRUE(RunUntil([&] { return answered; }, 10'000));
    return keys;
  }
  // A change of `client_id`'s session from its shard on `node`, as its store
  // flushes one.
  void Change(NodeId node, const std::string& client_id, std::string key) {
    std::vector<core::store::SessionChange> changes{{core::store::SessionChange::kPut, std::move(key), "bytes"}};
    nodes_[node]->agent->port().ReplicateSessions(core::ShardForClientId(client_id, 2), std::move(changes), [] {});
  }
  bool Replicated(NodeId node) {
    loop_.RunUntilIdle();  // the changes posted reach the agent first
    return RunUntil([&] { return nodes_[node]->agent->counters().session_batches_pending == 0; }, 10'000);
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

namespace estuary::cluster {
namespace {

// Issue 29, docs/partitions.md "Late writes of a copy that lost its client
// id": node 3's copy of a session lost the id to node 1, and its client
// came back to node 3, which read the session back. A change the replaced
// copy flushed after that claim committed, before the shard had taken the
// copy read back, is written after the claim. Fenced by copy, it is
// dropped and counted, and node 3 serves on (it is not taken for a loss of
// the id); fenced by node only (a node of an older binary linked), it
// lands in the partition, beside the copy read back, which never had it.
TEST_F(ClusterAgentFullTest, Issue29AReplacedCopysLateChangeIsDroppedByTheCopyFence) {
  StartFull({1, 2, 3});
  for (const bool fenced : {true, false}) {
    SCOPED_TRACE(fenced ? "fenced by copy" : "fenced by node only");
    const std::string id = fenced ? "dev" : "dev-unfenced";
    if (!fenced) {
      nodes_[3]->transport.handler()->OnPeerUp(PeerInfo{2, "fake", kMinorSessionHandOff});
      ASSERT_FALSE(nodes_[3]->agent->copy_fence());
    } else {
      ASSERT_TRUE(nodes_[3]->agent->copy_fence());
    }
    ASSERT_TRUE(Connect(3, id));
    core::Session* session = nodes_[3]->ShardOf(id).Attach(id, false, &sink_).session;
    session->set_expiry_interval(3600);
    core::SubscriptionOptions options;
    options.max_qos = QoS::kAtLeastOnce;
    nodes_[3]->ShardOf(id).Subscribe(session, "fleet/#", options);
    ASSERT_TRUE(Replicated(3));
    ASSERT_TRUE(Holds(PartitionKeys(3, id), core::store::SessionKey(id)));
    ASSERT_TRUE(Connect(1, id));  // the client moved to node 1, which read the session back
    const std::string late = core::store::QueuedKey(id, 99);
    ASSERT_TRUE(Connect(3, id, [&] { Change(3, id, late); }));  // and came back
    ASSERT_TRUE(Replicated(3));
    EXPECT_EQ(Holds(PartitionKeys(3, id), late), !fenced);
    EXPECT_NE(nodes_[3]->ShardOf(id).FindSession(id), nullptr) << "node 3 serves the session read back";
    // The copy read back writes on.
    const std::string next = core::store::QueuedKey(id, 100);
    Change(3, id, next);
    ASSERT_TRUE(Replicated(3));
    EXPECT_TRUE(Holds(PartitionKeys(3, id), next));
  }
  EXPECT_EQ(nodes_[3]->agent->counters().session_writes_stale, 1u);
}

}  // namespace
}  // namespace estuary::cluster
