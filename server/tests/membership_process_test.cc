// Issue 6 leftovers, membership as an operator sees it (docs/cluster.md):
// a restarted node comes back with a higher incarnation, reported by
// /api/cluster/members and the metadata group; a node refused for a node-id
// conflict answers /healthz with 503 and the reason, and logs it at error
// level once.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "server/tests/process_support.h"

namespace estuary::server::testing {
namespace {

// Node `member`'s incarnation as `observer` reports it, or 0.
uint64_t IncarnationSeenBy(const NodeProcess& observer, int member) {
  auto json = AdminJson(observer.admin_port(), "/api/cluster/members");
  if (!json || !json->contains("members")) return 0;
  for (const auto& entry : (*json)["members"]) {
    if (entry.value("node", 0) == member && entry.value("state", "") == "up") return entry.value("incarnation", 0ull);
  }
  return 0;
}

// Node `member`'s incarnation in the metadata group's member table, or 0.
uint64_t MetaIncarnationSeenBy(const NodeProcess& observer, int member) {
  auto json = AdminJson(observer.admin_port(), "/api/cluster/meta");
  if (!json || !json->contains("members")) return 0;
  for (const auto& entry : (*json)["members"]) {
    if (entry.value("node", 0) == member) return entry.value("incarnation", 0ull);
  }
  return 0;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

size_t Count(const std::string& text, const std::string& needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++count;
  return count;
}

// Log lines at error level containing `needle` (estuaryd's pattern:
// "TIME LEVEL [thread] text").
size_t ErrorLines(const std::string& log, const std::string& needle) {
  size_t count = 0;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    count += line.find(" error [") != std::string::npos && line.find(needle) != std::string::npos;
  }
  return count;
}

TEST(MembershipProcessTest, ARestartedNodeComesBackWithAHigherIncarnation) {
  auto cluster = StartCluster(2, /*durable=*/true);
  ASSERT_NE(cluster, nullptr);
  uint64_t first = 0;
  ASSERT_TRUE(WaitUntil([&] { return (first = IncarnationSeenBy(cluster->node(1), 2)) != 0; }, kConverge));
  EXPECT_EQ(IncarnationSeenBy(cluster->node(2), 2), first);
  EXPECT_TRUE(WaitUntil([&] { return MetaIncarnationSeenBy(cluster->node(1), 2) == first; }, kConverge))
      << "the metadata group never recorded incarnation " << first;
  // Persisted in the data dir.
  EXPECT_EQ(ReadFile(cluster->dir() + "/node-2/incarnation"), "incarnation=" + std::to_string(first) + "\n");

  std::string error;
  ASSERT_NE(cluster->Restart(2, &error), nullptr) << error;  // kill -9, then start again
  uint64_t second = 0;
  ASSERT_TRUE(WaitUntil([&] { return (second = IncarnationSeenBy(cluster->node(1), 2)) > first; }, kConverge))
      << "node 1 still reports incarnation " << second << " for node 2 (was " << first << ")";
  EXPECT_TRUE(WaitUntil([&] { return MetaIncarnationSeenBy(cluster->node(1), 2) == second; }, kConverge));
  std::printf("membership: node 2 incarnation %llu -> %llu across kill -9\n",
              static_cast<unsigned long long>(first), static_cast<unsigned long long>(second));
}

// Node 2 is killed and another process takes id 2 on another address while
// node 1 still counts the old one live (a long peer grace, and no early
// down on a refused redial, which would declare the killed node down at
// once): node 1 refuses it. (With the holder's link still up the links
// layer refuses it before membership does; see docs/cluster.md.)
TEST(MembershipProcessTest, ANodeRefusedForItsIdAnswersHealthWith503AndLogsOnce) {
  auto cluster = StartCluster(2, /*durable=*/false,
                              {"--cluster-peer-grace", "60000", "--cluster-down-on-refused", "false"});
  ASSERT_NE(cluster, nullptr);
  const std::string holder = cluster->node(2).cluster_address();
  cluster->node(2).Kill();
  NodeProcess::Options options = cluster->node(2).options();
  options.seeds = {cluster->node(1).cluster_address()};
  options.mqtt = options.amqp = options.admin = options.cluster = "127.0.0.1:0";
  options.log_path = cluster->dir() + "/impostor.log";
  // Its own short grace: it retries its join every 0.5 + 0.6 s.
  options.extra_flags = {"--shards", "1", "--log-level", "info", "--cluster-peer-grace", "600"};
  std::string error;
  auto impostor = NodeProcess::Start(options, &error);
  ASSERT_NE(impostor, nullptr) << error;

  int status = 0;
  std::optional<nlohmann::json> health;
  ASSERT_TRUE(WaitUntil(
      [&] {
        health = AdminJson(impostor->admin_port(), "/healthz", &status);
        return status == 503 && health.has_value();
      },
      kConverge))
      << "the refused node still answers /healthz with " << status;
  EXPECT_EQ((*health)["status"], "refused");
  const std::string reason = (*health)["reason"];
  EXPECT_NE(reason.find("node id 2"), std::string::npos) << reason;
  EXPECT_NE(reason.find(holder), std::string::npos) << reason;

  // Refused again by its retries; logged at error level once all the same.
  ASSERT_TRUE(WaitUntil([&] { return Count(impostor->Log(), "refused this node again") >= 2; }, kConverge))
      << impostor->Log();
  EXPECT_EQ(ErrorLines(impostor->Log(), "refused this node: "), 1u) << impostor->Log();
  auto still = estuary::testing::AdminGet(impostor->admin_port(), "/healthz");
  ASSERT_TRUE(still);
  EXPECT_EQ(still->status, 503);
  auto members = AdminJson(impostor->admin_port(), "/api/cluster/members");
  ASSERT_TRUE(members);
  EXPECT_TRUE(members->contains("refused")) << members->dump();
  // The node that refused it stays healthy, and logged the conflict once.
  auto ok = estuary::testing::AdminGet(cluster->node(1).admin_port(), "/healthz");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->body, "ok\n");
  EXPECT_EQ(ErrorLines(cluster->node(1).Log(), "membership: node id 2 is already a live member"), 1u)
      << cluster->node(1).Log();
  impostor->Kill();
}

// A duplicate id while the rightful node 2 is up and linked: the newcomer is
// refused, /healthz says so, and node 2 stays a healthy member.
TEST(MembershipProcessTest, ADuplicateOfALiveNodeIsRefusedAndUnhealthy) {
  auto cluster = StartCluster(2, /*durable=*/false);
  ASSERT_NE(cluster, nullptr);
  NodeProcess::Options options = cluster->node(2).options();
  options.seeds = {cluster->node(1).cluster_address()};
  options.mqtt = options.amqp = options.admin = options.cluster = "127.0.0.1:0";
  options.log_path = cluster->dir() + "/duplicate.log";
  std::string error;
  auto duplicate = NodeProcess::Start(options, &error);
  ASSERT_NE(duplicate, nullptr) << error;

  int status = 0;
  std::optional<nlohmann::json> health;
  ASSERT_TRUE(WaitUntil(
      [&] {
        health = AdminJson(duplicate->admin_port(), "/healthz", &status);
        return status == 503 && health.has_value();
      },
      kConverge))
      << "the duplicate still answers /healthz with " << status << "\n" << duplicate->Log();
  EXPECT_EQ((*health)["status"], "refused");
  const std::string reason = (*health)["reason"];
  EXPECT_NE(reason.find("node id 2"), std::string::npos) << reason;
  EXPECT_NE(reason.find(cluster->node(2).cluster_address()), std::string::npos) << reason;
  std::string why;
  EXPECT_TRUE(cluster->WaitMembersUp(kConverge, &why)) << why;  // the rightful node 2 stays up
  auto members = cluster->Members(1);
  ASSERT_TRUE(members);
  EXPECT_EQ((*members)[2], "up");
  auto ok = estuary::testing::AdminGet(cluster->node(2).admin_port(), "/healthz");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  duplicate->Kill();
}

}  // namespace
}  // namespace estuary::server::testing
