// Issue 7 points 3 and 7, retained messages under a fault: a stream of
// retained QoS 1 PUBLISHes on node 1 while node 2, which leads some of the
// topics' partitions, is killed with kill -9. Every acknowledged value is
// still there afterwards on the surviving nodes and on node 2 once it is
// back with its data; the test prints the longest time the publisher
// waited for an acknowledgement (docs/reliability.md).
#include <gtest/gtest.h>

#include <iostream>

#include "server/tests/process_support.h"

namespace estuary::server::testing {
namespace {

constexpr auto kWait = std::chrono::milliseconds(15'000);

// A clean-session client on `node`, retrying while CONNECTs are refused
// (a restarted node's partitions are still electing).
std::unique_ptr<RawClient> ConnectWhenAccepted(const NodeProcess& node, const std::string& client_id) {
  std::unique_ptr<RawClient> client;
  WaitUntil([&] { return (client = ConnectTo(node, client_id)) != nullptr; }, kWait);
  return client;
}

// Partitions the node leads now (from its /api/cluster/partitions).
int LeadingCount(const NodeProcess& node) {
  auto document = AdminJson(node.admin_port(), "/api/cluster/partitions");
  if (!document || !document->contains("open")) return -1;
  int leading = 0;
  for (const auto& entry : document->at("open")) leading += entry.value("role", "") == "leader" ? 1 : 0;
  return leading;
}

// Everything retained under fault/ on `node`, read by a fresh client: all
// of fault/# comes before the marker's retained message.
std::optional<std::map<std::string, std::string>> RetainedOn(const NodeProcess& node, const std::string& name) {
  auto client = ConnectWhenAccepted(node, name);
  if (!client) return std::nullopt;
  auto got = RetainedUpTo(*client, {"fault/#", "fault-marker/m"}, "fault-marker/m", kWait);
  if (got) got->erase("fault-marker/m");
  return got;
}

TEST(RetainedFaultTest, AcknowledgedValuesSurviveKill9OfAPartitionLeader) {
  auto cluster = StartCluster(3, /*durable=*/true);
  ASSERT_NE(cluster, nullptr);
  auto publisher = ConnectWhenAccepted(cluster->node(1), "fault-publisher");
  ASSERT_NE(publisher, nullptr);

  constexpr int kTopics = 24;
  constexpr int kRounds = 10;
  constexpr int kKillAtRound = 3;
  std::map<std::string, std::string> acknowledged;
  uint16_t packet_id = 1;
  auto last_ack = SteadyClock::now();
  int64_t longest_wait_ms = 0;
  int published = 0;
  for (int round = 0; round < kRounds; ++round) {
    if (round == kKillAtRound) {
      ASSERT_GT(LeadingCount(cluster->node(2)), 0) << "node 2 leads no partition: the kill would test nothing";
      cluster->node(2).Kill();
    }
    for (int t = 0; t < kTopics; ++t) {
      const std::string topic = "fault/t" + std::to_string(t);
      const std::string value = "r" + std::to_string(round);
      const auto sent = SteadyClock::now();
      ASSERT_TRUE(PublishRetained(*publisher, topic, value, packet_id++))
          << "round " << round << ", " << topic << ": no PUBACK within 5 s";
      const auto now = SteadyClock::now();
      longest_wait_ms =
          std::max<int64_t>(longest_wait_ms, std::chrono::duration_cast<std::chrono::milliseconds>(now - sent).count());
      last_ack = now;
      acknowledged[topic] = value;
      ++published;
    }
  }
  ASSERT_TRUE(PublishRetained(*publisher, "fault-marker/m", "end", packet_id++));
  std::cout << "[ figures  ] retained QoS 1 under kill -9 of node 2 (a partition leader), 3 nodes, bitcask: "
            << published << " acknowledged, longest wait for a PUBACK " << longest_wait_ms << " ms\n";

  for (int node : {1, 3}) {
    auto seen = RetainedOn(cluster->node(node), "fault-reader-" + std::to_string(node));
    ASSERT_TRUE(seen.has_value()) << "node " << node << " never answered the SUBSCRIBE";
    EXPECT_EQ(*seen, acknowledged) << "node " << node << " lost or reverted an acknowledged value";
  }
  std::string error;
  ASSERT_NE(cluster->Restart(2, &error), nullptr) << error;
  std::string why;
  ASSERT_TRUE(cluster->WaitMembersUp(kConverge, &why)) << why;
  auto seen = RetainedOn(cluster->node(2), "fault-reader-2");
  ASSERT_TRUE(seen.has_value()) << "node 2 never answered the SUBSCRIBE after its restart";
  EXPECT_EQ(*seen, acknowledged) << "node 2 lost or reverted an acknowledged value";
}

}  // namespace
}  // namespace estuary::server::testing
