#include "balancer/node_table.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace estuary::balancer {
namespace {

LoadReport Report(uint32_t id, uint64_t connections, int port) {
  LoadReport report;
  report.node_id = id;
  report.connections = connections;
  report.mqtt = "127.0.0.1:" + std::to_string(port);
  report.amqp = "127.0.0.1:" + std::to_string(port + 1);
  return report;
}

TEST(NodeTableTest, ParsesTheNodesLoadReport) {
  auto report = ParseLoadReport(
      R"({"node":3,"connections":12,"messages_in_per_second":1500.5,"messages_out_per_second":20,)"
      R"("queued_messages":7,"cpu_percent":42.0,"memory_bytes":1048576,"shards":2,)"
      R"("mqtt":"0.0.0.0:1883","amqp":"127.0.0.1:5672","draining":true})");
  ASSERT_TRUE(report) << report.error();
  EXPECT_EQ(report->node_id, 3u);
  EXPECT_EQ(report->connections, 12u);
  EXPECT_DOUBLE_EQ(report->messages_in_per_second, 1500.5);
  EXPECT_EQ(report->queued_messages, 7u);
  EXPECT_EQ(report->mqtt, "0.0.0.0:1883");
  EXPECT_TRUE(report->draining);
  EXPECT_FALSE(ParseLoadReport("not json"));
  EXPECT_FALSE(ParseLoadReport(R"({"connections":1})"));
}

TEST(NodeTableTest, ScoreIsTheDocumentedWeightedSum) {
  LoadReport report;
  report.connections = 10;
  report.messages_in_per_second = 3000;
  report.messages_out_per_second = 1000;
  report.queued_messages = 2000;
  report.cpu_percent = 50;
  report.memory_bytes = 512ull * 1024 * 1024;
  ScoreWeights weights;  // 1, 1, 1, 20, 10
  EXPECT_DOUBLE_EQ(Score(report, 5, weights), 15 + 4 + 2 + 10 + 5);
  weights = {0, 0, 0, 2, 0};
  EXPECT_DOUBLE_EQ(Score(report, 5, weights), 1.0);
}

TEST(NodeTableTest, UnspecifiedHostsBecomeTheAdminHost) {
  NodeState node{.admin = "10.1.2.3:8080"};
  node.report = Report(1, 0, 1883);
  node.report->mqtt = "0.0.0.0:1883";
  EXPECT_EQ(ServiceAddress(node, Service::kMqtt), "10.1.2.3:1883");
  EXPECT_EQ(ServiceAddress(node, Service::kAmqp), "127.0.0.1:1884");
}

TEST(NodeTableTest, LeastScoreWinsAndABurstSpreads) {
  NodeTable table;
  table.OnReport("a:1", Report(1, 10, 1000), 0);
  table.OnReport("b:1", Report(2, 14, 2000), 0);
  std::map<std::string, int> sent;
  for (int i = 0; i < 8; ++i) sent[table.Pick(Service::kAmqp, "", 0)->admin]++;
  // a at 10 takes four until it ties with b at 14, then they alternate.
  EXPECT_EQ(sent["a:1"], 6);
  EXPECT_EQ(sent["b:1"], 2);
  // A fresh report resets the count of connections sent since.
  table.OnReport("a:1", Report(1, 40, 1000), 1);
  EXPECT_EQ(table.Pick(Service::kAmqp, "", 1)->admin, "b:1");
}

// --nodes on SIGHUP (Balancer::ReloadNodes): a node removed gets nothing,
// affinity included (the ring is built again without it).
TEST(NodeTableTest, ARemovedNodeGetsNothing) {
  NodeTable table;
  table.OnReport("a:1", Report(1, 0, 1000), 0);
  table.OnReport("b:1", Report(2, 100, 2000), 0);
  ASSERT_EQ(table.Pick(Service::kAmqp, "", 0)->admin, "a:1");
  EXPECT_TRUE(table.Has("a:1"));
  EXPECT_TRUE(table.RemoveNode("a:1"));
  EXPECT_FALSE(table.RemoveNode("a:1"));
  EXPECT_FALSE(table.Has("a:1"));
  ASSERT_EQ(table.nodes().size(), 1u);
  for (const char* client : {"", "c1", "c2", "c3", "c4"}) {
    auto choice = table.Pick(Service::kMqtt, client, 0);
    ASSERT_TRUE(choice);
    EXPECT_EQ(choice->admin, "b:1") << client;
  }
}

TEST(NodeTableTest, UnhealthyStaleAndDrainedNodesGetNothing) {
  NodeTable table;
  table.OnReport("a:1", Report(1, 0, 1000), 0);
  table.OnReport("b:1", Report(2, 50, 2000), 0);
  table.OnFailure("a:1", "refused");
  EXPECT_EQ(table.Pick(Service::kMqtt, "", 10)->admin, "b:1");
  table.OnReport("a:1", Report(1, 0, 1000), 20);
  EXPECT_EQ(table.Pick(Service::kMqtt, "", 20)->admin, "a:1");
  // b's last report is older than stale_after_ms (1000) at t=1001.
  table.SetDrained("a:1", true);
  EXPECT_FALSE(table.Pick(Service::kMqtt, "", 1001));
  table.SetDrained("a:1", false);
  LoadReport draining = Report(1, 0, 1000);
  draining.draining = true;
  table.OnReport("a:1", draining, 1001);
  table.OnReport("b:1", Report(2, 50, 2000), 1001);
  EXPECT_EQ(table.Pick(Service::kMqtt, "", 1001)->admin, "b:1");
  EXPECT_EQ(table.Pick(Service::kMqtt, "", 1001, {"b:1"}), std::nullopt);
}

TEST(NodeTableTest, MqttAffinityFollowsTheRingLeaderThenReplicas) {
  SelectionOptions options;
  options.ring.replicas = 2;
  NodeTable table(options);
  table.OnReport("a:1", Report(1, 0, 1000), 0);
  table.OnReport("b:1", Report(2, 0, 2000), 0);
  table.OnReport("c:1", Report(3, 0, 3000), 0);
  auto ring = ring::Ring::Build({"1", "2", "3"}, options.ring);
  ASSERT_TRUE(ring);
  const std::map<std::string, std::string> admin_of{{"1", "a:1"}, {"2", "b:1"}, {"3", "c:1"}};
  for (int i = 0; i < 50; ++i) {
    const std::string client = "client-" + std::to_string(i);
    const auto replicas = ring->Replicas(ring->PartitionOf("session/" + client));
    EXPECT_EQ(table.AffinityNode(client), admin_of.at(replicas[0]));
    auto choice = table.Pick(Service::kMqtt, client, 0);
    ASSERT_TRUE(choice);
    EXPECT_TRUE(choice->by_affinity);
    EXPECT_EQ(choice->admin, admin_of.at(replicas[0]));
    // The leader failing: its backup replica takes the client.
    table.OnFailure(admin_of.at(replicas[0]), "down");
    choice = table.Pick(Service::kMqtt, client, 0);
    EXPECT_EQ(choice->admin, admin_of.at(replicas[1]));
    table.OnReport(admin_of.at(replicas[0]), Report(std::stoi(replicas[0]), 0, 1000 * std::stoi(replicas[0])), 0);
  }
  // AMQP and empty client ids go by score.
  EXPECT_FALSE(table.Pick(Service::kAmqp, "client-1", 0)->by_affinity);
  EXPECT_FALSE(table.Pick(Service::kMqtt, "", 0)->by_affinity);
}

TEST(NodeTableTest, AffinityOffGoesByScore) {
  SelectionOptions options;
  options.mqtt_affinity = false;
  NodeTable table(options);
  table.OnReport("a:1", Report(1, 0, 1000), 0);
  table.OnReport("b:1", Report(2, 100, 2000), 0);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(table.Pick(Service::kMqtt, "c" + std::to_string(i), 0)->admin, "a:1");
}

// Several data-plane threads pick from one immutable snapshot at once: the
// counters they share keep a burst spread over the nodes, as one thread would.
TEST(NodeTableTest, ABurstPickedOnSeveralThreadsStillSpreads) {
  NodeTable table;
  for (int i = 0; i < 3; ++i) table.OnReport("n" + std::to_string(i), Report(i + 1, 10, 1000 + 10 * i), 0);
  std::shared_ptr<const NodeTable> snapshot = table.Snapshot();
  constexpr int kThreads = 4;
  constexpr int kPicks = 300;
  std::atomic<int> start{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.fetch_add(1);
      while (start.load() < kThreads) {
      }
      size_t rotation = size_t(t);
      for (int i = 0; i < kPicks; ++i) ASSERT_TRUE(snapshot->Pick(Service::kAmqp, "", 0, {}, rotation++));
    });
  }
  for (auto& thread : threads) thread.join();
  uint64_t total = 0, least = UINT64_MAX, most = 0;
  for (const NodeState& node : table.nodes()) {  // the master sees the snapshot's counts
    total += node.sent_total();
    least = std::min(least, node.sent_since_report());
    most = std::max(most, node.sent_since_report());
  }
  EXPECT_EQ(total, uint64_t(kThreads * kPicks));
  // Two picks at the same instant may read the same counts: at most about
  // one extra per thread on a node, never a pile-up.
  EXPECT_LE(most - least, uint64_t(2 * kThreads)) << least << ".." << most;
}

// The control plane keeps taking reports and publishing snapshots while
// workers pick from older ones (run under TSan for the data-race check).
TEST(NodeTableTest, SnapshotsArePublishedWhileOthersArePicked) {
  NodeTable table;
  table.OnReport("a:1", Report(1, 0, 1000), 0);
  table.OnReport("b:1", Report(2, 0, 2000), 0);
  std::mutex mutex;  // stands for the workers' mailbox
  std::shared_ptr<const NodeTable> published = table.Snapshot();
  std::atomic<bool> done{false};
  std::atomic<uint64_t> picked{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < 3; ++t) {
    workers.emplace_back([&] {
      size_t rotation = 0;
      while (!done.load()) {
        std::shared_ptr<const NodeTable> mine;
        {
          std::lock_guard<std::mutex> lock(mutex);
          mine = published;
        }
        for (int i = 0; i < 50; ++i) {
          if (mine->Pick(Service::kMqtt, "client-" + std::to_string(i), 5, {}, rotation++)) picked.fetch_add(1);
        }
      }
    });
  }
  for (int round = 0; round < 200; ++round) {
    table.OnReport(round % 2 ? "a:1" : "b:1", Report(round % 2 ? 1 : 2, uint64_t(round), round % 2 ? 1000 : 2000), 5);
    if (round % 50 == 0) table.AddNode("c:" + std::to_string(round));
    auto snapshot = table.Snapshot();
    std::lock_guard<std::mutex> lock(mutex);
    published = std::move(snapshot);
  }
  while (picked.load() == 0) {
  }
  done = true;
  for (auto& worker : workers) worker.join();
  uint64_t total = 0;
  for (const NodeState& node : table.nodes()) total += node.sent_total();
  EXPECT_EQ(total, picked.load());
  EXPECT_GT(picked.load(), 0u);
}

}  // namespace
}  // namespace estuary::balancer
