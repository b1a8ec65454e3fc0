// A node with the wrong cluster secret is refused (issue 6, points 1 and 7):
// it never shows as up in the others' member tables, and the refusal is
// logged by one side or the other.
#include <algorithm>
#include <poll.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "conformance/cluster/cluster_fixture.h"

namespace estuary::conformance {
namespace {

// Log lines that report a refused peer (wrong secret, failed authentication).
size_t RefusalLines(const std::string& log) {
  size_t count = 0;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    std::string lower = line;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    const bool about_auth = lower.find("secret") != std::string::npos || lower.find("auth") != std::string::npos ||
                            lower.find("mac") != std::string::npos;
    const bool refused = lower.find("refus") != std::string::npos || lower.find("reject") != std::string::npos ||
                         lower.find("denied") != std::string::npos || lower.find("wrong") != std::string::npos ||
                         lower.find("fail") != std::string::npos || lower.find("mismatch") != std::string::npos;
    count += about_auth && refused;
  }
  return count;
}

TEST(ClusterSecretTest, NodeWithWrongSecretIsRefusedAndLogged) {
  ClusterProcess::Options options;
  options.nodes = 2;
  auto cluster = StartCluster(options);
  ASSERT_NE(cluster, nullptr);
  const std::string wrong = cluster->WriteSecret("wrong.secret");
  ASSERT_FALSE(wrong.empty());
  std::string error;
  ASSERT_NE(cluster->AddNode(&error, 3, wrong), nullptr) << error;

  // Until both sides have logged the refusal, and a good node has refused
  // node 3 at least three times (its first dials to nodes 1 and 2, and a
  // redial), node 3 must never be up on nodes 1 and 2.
  const auto deadline = testing::Clock::now() + kConverge;
  size_t refusals = 0;
  size_t refused_by_node_three = 0;
  int observations = 0;
  auto done = [&] { return refusals >= 3 && refused_by_node_three >= 1; };
  while (!done() && testing::Clock::now() < deadline) {
    for (int observer : {1, 2}) {
      auto members = cluster->Members(observer);
      ASSERT_TRUE(members) << "node " << observer << " serves no /api/cluster/members";
      EXPECT_NE((*members)[3], "up") << "node " << observer << " lists the wrong-secret node as up";
      ++observations;
    }
    refusals = RefusalLines(cluster->node(1).Log()) + RefusalLines(cluster->node(2).Log());
    refused_by_node_three = RefusalLines(cluster->node(3).Log());
    if (!done()) ::poll(nullptr, 0, 50);
  }
  EXPECT_TRUE(done()) << refusals << " refusals logged by nodes 1 and 2, " << refused_by_node_three
                      << " by node 3; node 1:\n"
                          << cluster->node(1).Log() << "\nnode 3:\n"
                          << cluster->node(3).Log();
  std::printf("[counts] wrong secret: %zu refusals logged by nodes 1-2, %zu by node 3, %d member-table "
              "observations without node 3 up\n", refusals, refused_by_node_three, observations);
  // The two good nodes still see each other, and node 3 sees nobody up but itself.
  for (int observer : {1, 2}) {
    auto members = cluster->Members(observer);
    ASSERT_TRUE(members);
    EXPECT_EQ((*members)[1], "up");
    EXPECT_EQ((*members)[2], "up");
    EXPECT_NE((*members)[3], "up");
  }
  if (auto members = cluster->Members(3)) {
    EXPECT_NE((*members)[1], "up");
    EXPECT_NE((*members)[2], "up");
  }
  // Node 3 says so on /healthz (503, "refused"), so a balancer sends it
  // no clients; the good nodes stay healthy.
  auto health = testing::AdminGet(cluster->node(3).admin_port(), "/healthz");
  ASSERT_TRUE(health.has_value());
  EXPECT_EQ(health->status, 503) << health->body;
  EXPECT_NE(health->body.find("refused"), std::string::npos) << health->body;
  auto good = testing::AdminGet(cluster->node(1).admin_port(), "/healthz");
  ASSERT_TRUE(good.has_value());
  EXPECT_EQ(good->status, 200) << good->body;
}

}  // namespace
}  // namespace estuary::conformance

namespace estuary::conformance {
namespace {

// --admin-token-file on every node (ClusterProcess::Options::admin_token):
// the helpers send the token, so the cluster forms and is observed as
// usual; a request without it is refused with 401, /healthz is not.
TEST(ClusterSecretTest, ClusterWithAnAdminTokenFormsAndRefusesRequestsWithoutIt) {
  ClusterProcess::Options options;
  options.nodes = 2;
  options.admin_token = true;
  auto cluster = StartCluster(options);
  ASSERT_NE(cluster, nullptr);
  std::string why;
  ASSERT_TRUE(cluster->WaitMembersUp(kConverge, &why)) << why;
  auto with_token = testing::AdminGet(cluster->node(1).admin_port(), "/api/cluster/members");
  ASSERT_TRUE(with_token.has_value());
  EXPECT_EQ(with_token->status, 200);
  std::ifstream in(cluster->dir() + "/admin.token");
  std::string token;
  std::getline(in, token);
  testing::SetAdminToken({});
  auto without = testing::AdminGet(cluster->node(1).admin_port(), "/api/cluster/members");
  auto health = testing::AdminGet(cluster->node(1).admin_port(), "/healthz");
  testing::SetAdminToken(token);
  ASSERT_TRUE(without.has_value());
  EXPECT_EQ(without->status, 401) << without->body;
  ASSERT_TRUE(health.has_value());
  EXPECT_EQ(health->status, 200) << health->body;
  auto metrics = testing::AdminGet(cluster->node(1).admin_port(), "/metrics");
  ASSERT_TRUE(metrics.has_value());
  EXPECT_NE(metrics->body.find("estuary_admin_refused_total{node=\"1\"} 1\n"), std::string::npos);
}

}  // namespace
}  // namespace estuary::conformance
