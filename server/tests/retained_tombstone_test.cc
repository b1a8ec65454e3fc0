// Issue 6 leftovers, retained deletions (docs/cluster.md "Retained
// deletions"): a retained topic cleared by an empty retained PUBLISH stays
// cleared after kill -9 and restart, and a node that was down while it was
// cleared does not bring the old value back, even when the node that
// cleared it was restarted meanwhile (so only its disk remembers the clear).
// Three nodes: retained messages live on partitions (docs/partitions.md),
// and a clear made while one node is down is acknowledged by the other two
// (with two nodes it would wait for the second, as it must).
#include <gtest/gtest.h>

#include "server/tests/process_support.h"

namespace estuary::server::testing {
namespace {

constexpr auto kWait = std::chrono::milliseconds(15'000);

// What a fresh client on `node` gets when it subscribes to `topic` and then
// to `marker`: the retained payload of `topic`, "" if none, nullopt if the
// marker never came (the node has not caught up yet).
std::optional<std::string> RetainedBeforeMarker(const NodeProcess& node, const std::string& topic,
                                                const std::string& marker, int attempt) {
  auto client = ConnectTo(node, "probe-" + std::to_string(node.id()) + "-" + std::to_string(attempt));
  if (!client) return std::nullopt;
  auto got = RetainedUpTo(*client, {topic, marker}, marker, std::chrono::milliseconds(1'000));
  if (!got) return std::nullopt;
  auto it = got->find(topic);
  return it == got->end() ? std::string() : it->second;
}

// Polls until `node` has the marker; returns what it held for `topic` then.
std::optional<std::string> SettledRetained(const NodeProcess& node, const std::string& topic,
                                           const std::string& marker) {
  std::optional<std::string> seen;
  int attempt = 0;
  WaitUntil([&] { return (seen = RetainedBeforeMarker(node, topic, marker, attempt++)).has_value(); }, kWait);
  return seen;
}

class RetainedTombstoneProcessTest : public ::testing::Test {
 protected:
  // A durable cluster of `nodes` and a publisher on node 1 that retained
  // "old" on tomb/t (packet id 1). Call with ASSERT_NO_FATAL_FAILURE.
  void StartWithOldValue(int nodes) {
    cluster_ = StartCluster(nodes, /*durable=*/true);
    ASSERT_NE(cluster_, nullptr);
    publisher_ = ConnectTo(cluster_->node(1), "publisher-1");
    ASSERT_NE(publisher_, nullptr);
    ASSERT_TRUE(PublishRetained(*publisher_, "tomb/t", "old", 1));
  }
  // Node 2 holds "old" (marker tomb/m0), is killed, and node 1 clears
  // tomb/t while it is down (marker tomb/m1).
  void ClearWhileNode2IsDown() {
    ASSERT_TRUE(PublishRetained(*publisher_, "tomb/m0", "m0", 2));
    ASSERT_EQ(SettledRetained(cluster_->node(2), "tomb/t", "tomb/m0"), "old");  // node 2 holds it
    cluster_->node(2).Kill();
    ASSERT_TRUE(PublishRetained(*publisher_, "tomb/t", "", 3));  // cleared while node 2 is down
    ASSERT_TRUE(PublishRetained(*publisher_, "tomb/m1", "m1", 4));
  }

  std::unique_ptr<ClusterProcess> cluster_;
  std::unique_ptr<RawClient> publisher_;
};

// Cleared on node 1 while node 2 was down; then node 1 is killed and
// restarted too, and node 2 comes back with the old value on its disk.
TEST_F(RetainedTombstoneProcessTest, AClearMadeWhileANodeWasDownSurvivesRestartsOfBoth) {
  ASSERT_NO_FATAL_FAILURE(StartWithOldValue(3));
  ASSERT_NO_FATAL_FAILURE(ClearWhileNode2IsDown());
  publisher_.reset();
  std::string error;
  // Kill -9 and restart node 1 (no client meanwhile: alone, it may hold
  // attaches until its peer is back), then node 2.
  ASSERT_NE(cluster_->Restart(1, &error), nullptr) << error;
  ASSERT_NE(cluster_->Restart(2, &error), nullptr) << error;
  std::string why;
  ASSERT_TRUE(cluster_->WaitMembersUp(kConverge, &why)) << why;
  // Node 2 learns the clear (tomb/m1 came in the same snapshot) ...
  EXPECT_EQ(SettledRetained(cluster_->node(2), "tomb/t", "tomb/m1"), "") << "node 2 kept the cleared value";
  // ... and node 1 does not take the old value back from node 2's snapshot:
  // a marker published on node 2 after the restart reaches node 1 after it.
  // (A CONNECT is refused while the restarted nodes' partitions elect.)
  std::unique_ptr<RawClient> second;
  ASSERT_TRUE(WaitUntil([&] { return (second = ConnectTo(cluster_->node(2), "publisher-2")) != nullptr; }, kWait));
  ASSERT_TRUE(PublishRetained(*second, "tomb/m2", "m2", 1));
  EXPECT_EQ(SettledRetained(cluster_->node(1), "tomb/t", "tomb/m2"), "")
      << "node 1 lost the clear on restart, or node 2 brought the value back";
}

// The same with node 1 up throughout: only the snapshot carries the clear.
TEST_F(RetainedTombstoneProcessTest, ANodeDownDuringAClearDoesNotServeTheOldValue) {
  ASSERT_NO_FATAL_FAILURE(StartWithOldValue(3));
  ASSERT_NO_FATAL_FAILURE(ClearWhileNode2IsDown());
  std::string error;
  ASSERT_NE(cluster_->Restart(2, &error), nullptr) << error;
  EXPECT_EQ(SettledRetained(cluster_->node(2), "tomb/t", "tomb/m1"), "") << "node 2 kept the cleared value";
  EXPECT_EQ(SettledRetained(cluster_->node(1), "tomb/t", "tomb/m1"), "");
}

// One node, kill -9: the clear is on disk (this passes without tombstones;
// kept to pin it while the store changes).
TEST_F(RetainedTombstoneProcessTest, AClearSurvivesKill9OfTheNode) {
  ASSERT_NO_FATAL_FAILURE(StartWithOldValue(1));
  ASSERT_TRUE(PublishRetained(*publisher_, "tomb/t", "", 2));
  ASSERT_TRUE(PublishRetained(*publisher_, "tomb/m", "m", 3));
  publisher_.reset();
  std::string error;
  ASSERT_NE(cluster_->Restart(1, &error), nullptr) << error;
  EXPECT_EQ(SettledRetained(cluster_->node(1), "tomb/t", "tomb/m"), "");
}

}  // namespace
}  // namespace estuary::server::testing
