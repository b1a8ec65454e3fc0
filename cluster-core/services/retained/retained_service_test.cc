// RetainedService on a simulated five-node cluster with partitions
// (partition_sim_cluster.h: seeded, no sleeps): a write on one node is
// read on every other, exact and wildcard, cleared and replaced; a write
// that cannot commit (its partition's majority cut off) is made again until
// it does, and its `done` waits for that; a read that cannot be answered
// fails; QoS 0 writes past the bound are not made.
#include "cluster-core/services/retained/retained_service.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster-core/partition/partition_sim_cluster.h"
#include "cluster-core/partition/retained_machine.h"
#include "model/hlc.h"

namespace estuary::services {
namespace {

using partition::sim::PartitionCluster;
using NodeId = partition::NodeId;

class RetainedServiceTest : public ::testing::Test {
 protected:
  void Start(RetainedConfig config = {}) {
    partition::sim::StartAll(cluster_, kNodes);
    for (NodeId id = 1; id <= kNodes; ++id) {
      services_[id] =
          std::make_unique<RetainedService>(cluster_.loop(), cluster_.partitions(id), cluster_.meta(id), config);
      services_[id]->Start();
    }
  }
  void TearDown() override { services_.clear(); }  // before the cluster's hosts

  MessagePtr Retained(NodeId on, const std::string& topic, const std::string& payload) {
    auto message = std::make_shared<Message>();
    message->topic = topic;
    message->payload = MakePayload(payload);
    message->retain = true;
    message->qos = QoS::kAtLeastOnce;
    message->id = MessageId{on, HybridLogicalClock::Pack(++clock_ms_, 0), 1};
    return message;
  }
  // Writes and waits for `done`; false if it did not come in time.
  bool Write(NodeId on, const std::string& topic, const std::string& payload, int64_t deadline_ms = 10'000) {
    bool done = false;
    services_[on]->Write(Retained(on, topic, payload), [&] { done = true; });
    return cluster_.RunUntil([&] { return done; }, deadline_ms);
  }
  // The payloads read on `on` for `filter`, sorted; nullopt: the read failed.
  std::optional<std::vector<std::string>> Read(NodeId on, const std::string& filter) {
    bool answered = false;
    std::optional<std::vector<MessagePtr>> messages;
    services_[on]->Read(filter, [&](std::optional<std::vector<MessagePtr>> got) {
      answered = true;
      messages = std::move(got);
    });
    EXPECT_TRUE(cluster_.RunUntil([&] { return answered; }, 15'000)) << "no answer for " << filter;
    if (!messages) return std::nullopt;
    std::vector<std::string> payloads;
    for (const MessagePtr& message : *messages) {
      if (message->PayloadSize() != 0) payloads.push_back(*message->payload);
    }
    std::sort(payloads.begin(), payloads.end());
    return payloads;
  }
  using Payloads = std::optional<std::vector<std::string>>;

  static constexpr NodeId kNodes = 5;
  PartitionCluster cluster_{41};
  std::map<NodeId, std::unique_ptr<RetainedService>> services_;
  uint64_t clock_ms_ = 1'900'000'000'000;
};

TEST_F(RetainedServiceTest, AWriteOnOneNodeIsReadOnEveryNode) {
  Start();
  ASSERT_TRUE(Write(1, "home/kitchen/temp", "21"));
  ASSERT_TRUE(Write(2, "home/hall/temp", "19"));
  ASSERT_TRUE(Write(3, "office/temp", "23"));
  for (NodeId id = 1; id <= kNodes; ++id) {
    EXPECT_EQ(Read(id, "home/kitchen/temp"), (Payloads{{"21"}})) << "node " << id;
    EXPECT_EQ(Read(id, "home/+/temp"), (Payloads{{"19", "21"}})) << "node " << id;
    EXPECT_EQ(Read(id, "#"), (Payloads{{"19", "21", "23"}})) << "node " << id;
  }
  // Cleared on one node, replaced on another: every node reads the newest.
  ASSERT_TRUE(Write(4, "home/kitchen/temp", ""));
  ASSERT_TRUE(Write(5, "office/temp", "24"));
  for (NodeId id = 1; id <= kNodes; ++id) {
    EXPECT_EQ(Read(id, "#"), (Payloads{{"19", "24"}})) << "node " << id;
    EXPECT_EQ(Read(id, "home/kitchen/temp"), (Payloads{std::vector<std::string>{}})) << "node " << id;
  }
  const RetainedCounters& c = services_[1]->counters();
  EXPECT_EQ(c.writes, 1u);
  EXPECT_EQ(c.writes_pending, 0u);
  EXPECT_EQ(c.reads, 5u);
  EXPECT_EQ(c.reads_failed, 0u);
}

// The topic's partition loses its majority: the write is made again until
// the partition is back, and only then is its publisher told.
TEST_F(RetainedServiceTest, AWriteThatCannotCommitIsMadeAgainUntilItDoes) {
  Start();
  const std::string topic = "plant/line-3/state";
  ASSERT_TRUE(Write(1, topic, "running"));  // the partition is open, its voters known
  const auto voters = cluster_.Voters(cluster_.partitions(1).PartitionOf(partition::RetainedKey(topic)));
  ASSERT_EQ(voters.size(), 3u);
  NodeId writer = 0;  // a node outside the partition's replicas
  for (NodeId id = 1; id <= kNodes && writer == 0; ++id) {
    if (std::find(voters.begin(), voters.end(), id) == voters.end()) writer = id;
  }
  ASSERT_NE(writer, 0);
  // The writer can reach no voter: no attempt can commit.
  for (raft::NodeId voter : voters) cluster_.network().Partition(writer, static_cast<NodeId>(voter));
  bool done = false;
  services_[writer]->Write(Retained(writer, topic, "stopped"), [&] { done = true; });
  cluster_.RunFor(8'000);
  EXPECT_FALSE(done) << "acknowledged without a commit";
  EXPECT_GE(services_[writer]->counters().write_retries, 2u);
  EXPECT_EQ(services_[writer]->counters().writes_pending, 1u);
  EXPECT_EQ(Read(writer, topic), std::nullopt) << "a read with no replica reachable must fail";
  EXPECT_GE(services_[writer]->counters().reads_failed, 1u);
  cluster_.network().HealAll();
  ASSERT_TRUE(cluster_.RunUntil([&] { return done; }, 15'000)) << "not written once the cut healed";
  EXPECT_EQ(services_[writer]->counters().writes_pending, 0u);
  for (NodeId id = 1; id <= kNodes; ++id) EXPECT_EQ(Read(id, topic), (Payloads{{"stopped"}})) << "node " << id;
}

TEST_F(RetainedServiceTest, UnacknowledgedWritesPastTheBoundAreNotMade) {
  RetainedConfig config;
  config.max_unacknowledged_pending = 2;
  Start(config);
  RetainedService& service = *services_[1];
  // Four at once: two are pending when the third and fourth come.
  EXPECT_TRUE(service.WriteUnacknowledged(Retained(1, "q0/a", "1")));
  EXPECT_TRUE(service.WriteUnacknowledged(Retained(1, "q0/b", "2")));
  EXPECT_FALSE(service.WriteUnacknowledged(Retained(1, "q0/c", "3")));
  EXPECT_FALSE(service.WriteUnacknowledged(Retained(1, "q0/d", "4")));
  EXPECT_EQ(service.counters().writes_dropped, 2u);
  ASSERT_TRUE(cluster_.RunUntil([&] { return service.counters().writes_pending == 0; }, 10'000));
  EXPECT_EQ(Read(2, "q0/#"), (Payloads{{"1", "2"}}));
  EXPECT_TRUE(service.WriteUnacknowledged(Retained(1, "q0/c", "3"))) << "room again once they committed";
}

}  // namespace
}  // namespace estuary::services
