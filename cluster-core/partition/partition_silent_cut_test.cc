// Issue 29 in simulation: a silent two-way cut (SimNetwork holds the
// frames; both sides see the link lost after dead_after_ms, nothing is
// refused) between a taker and the rest. The taker read the owner of a
// client id before the cut (as a task transfer does) and keeps proposing
// its claim through the cut, as the takeover's retries do; meanwhile the
// client, on the majority side, reconnects (its owner renews). When the cut
// heals the taker's retry reaches a leader: the claim is guarded by the
// owner it read, so the client keeps its session - checked on every replica
// after every 10 ms of simulated time. (Before issue 29 the claim checked
// only the owner's node, and the retry after the heal took the session;
// UNGUARDED=1 runs that form to show the check fails then.)
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>

#include "cluster-core/partition/client_registry.h"
#include "cluster-core/partition/partition_sim_cluster.h"

namespace estuary::partition {
namespace {

using sim::PartitionCluster;
using sim::Seeds;
using sim::StartAll;

TEST(PartitionSilentCut, Issue29ATakeoverRetriedAcrossACutNeverTakesARenewedSession) {
  const bool unguarded = std::getenv("UNGUARDED") != nullptr;
  for (uint64_t seed : Seeds({11, 12, 13, 14, 15, 16})) {
    SCOPED_TRACE(seed);
    PartitionCluster cluster(seed);
    StartAll(cluster, 3);
    cluster.LinksTellHosts(true);
    const std::string client = "sensor-29";
    const PartitionId partition = cluster.partitions(3).PartitionOf(client);
    cluster.ClaimOk(3, client, 1);  // connected to node 3
    ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Voters(partition).size() == 3; }, 5'000));
    ASSERT_TRUE(cluster.RunUntil(
        [&] {
          const ClientRegistry* registry = cluster.registry(1, partition);
          return registry != nullptr && registry->owners().count(client) != 0;
        },
        5'000));
    const ClientOwner read = cluster.registry(1, partition)->owners().at(client);  // what the taker read
    ASSERT_EQ(read.node, 3);

    // The owner a live, connected client holds never changes node.
    auto connected_session_kept = [&] {
      for (NodeId id : cluster.ids()) {
        const ClientRegistry* registry = cluster.registry(id, partition);
        if (registry == nullptr) continue;
        auto owner = registry->owners().find(client);
        if (owner != registry->owners().end() && owner->second.node != 3) {
          ADD_FAILURE() << "node " << id << " sees the id taken by node " << owner->second.node << " at "
                        << cluster.now_ms() << " ms";
          return false;
        }
      }
      return true;
    };
    auto run_checking = [&](int64_t ms, const std::function<bool()>& until) {
      const int64_t end = cluster.now_ms() + ms;
      while (cluster.now_ms() < end && !(until && until())) {
        cluster.RunFor(10);
        if (!connected_session_kept()) return false;
      }
      return true;
    };

    cluster.network().Partition(1, 2);
    cluster.network().Partition(1, 3);
    auto renewal = cluster.Claim(3, client, 2);  // the client reconnects to node 3
    // The taker's claim, tried again every second until a leader answers it.
    const ClientOwner expected = unguarded ? ClientOwner{} : read;
    std::shared_ptr<sim::Outcome> takeover;
    int attempts = 0;
    auto attempt = [&] {
      ++attempts;
      takeover = cluster.ClaimFrom(1, client, 99, /*from=*/3, expected);
    };
    attempt();
    const int64_t heal_at = cluster.now_ms() + 8'000;
    bool healed = false;
    while (attempts < 30) {
      ASSERT_TRUE(run_checking(1'000, [&] { return takeover->done; }));
      if (!healed && cluster.now_ms() >= heal_at) {
        cluster.network().HealAll();
        healed = true;
      }
      if (takeover->done && takeover->result.status == meta::ProposeStatus::kOk && healed) break;
      if (takeover->done) attempt();
    }
    ASSERT_TRUE(healed);
    ASSERT_TRUE(run_checking(10'000, nullptr));
    ASSERT_TRUE(renewal->done);
    EXPECT_EQ(renewal->result.status, meta::ProposeStatus::kOk) << "the majority side could not renew";
    ASSERT_TRUE(takeover->done && takeover->result.status == meta::ProposeStatus::kOk)
        << "the taker's claim was never answered after " << attempts << " attempts";
    ASSERT_TRUE(takeover->result.result.has_value());
    EXPECT_TRUE(takeover->result.result->empty()) << "the guarded claim applied";
    for (NodeId id : cluster.ids()) {
      const ClientRegistry* registry = cluster.registry(id, partition);
      ASSERT_NE(registry, nullptr);
      EXPECT_EQ(registry->owners().at(client), (ClientOwner{3, cluster.boot(3), 2})) << "node " << id;
    }
  }
}

}  // namespace
}  // namespace estuary::partition
