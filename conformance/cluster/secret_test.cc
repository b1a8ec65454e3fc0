// A node with the wrong cluster secret is refused (issue 6, points 1 and 7):
// it never shows as up in the others' member tables, and the refusal is
// logged by one side or the other.
#include <algorithm>
#include <poll.h>

#include <cctype>
#include <cstdio>
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
