#include "cluster-core/ring/ring.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <set>

#include "base/hash.h"

namespace estuary::ring {
namespace {

std::vector<std::string> NodeNames(std::uint32_t count, std::uint32_t first = 1) {
  std::vector<std::string> nodes;
  for (std::uint32_t i = first; i < first + count; ++i) nodes.push_back("node-" + std::to_string(i));
  return nodes;
}

Ring MustBuild(std::vector<std::string> nodes, const RingOptions& options) {
  auto ring = Ring::Build(std::move(nodes), options);
  EXPECT_TRUE(ring.has_value()) << ToString(ring.error());
  return std::move(ring).value();
}

double MaxOverMean(const Ring& ring) {
  const std::vector<std::uint32_t> loads = ring.Loads();
  const double mean = std::accumulate(loads.begin(), loads.end(), 0.0) / loads.size();
  return *std::max_element(loads.begin(), loads.end()) / mean;
}

// Replica copies caused by one membership change, against the least any
// placement could do: the newcomer's fair share on a join, the leaver's
// whole load on a leave.
struct Movement {
  double worst_ratio = 0;     // max over the trials of copied / ideal
  double mean_ratio = 0;      // mean over the trials
  double leaders_changed = 0; // mean fraction of partitions whose leader moved
};

Movement MeasureJoins(std::uint32_t n, const RingOptions& options, std::uint32_t trials = 5) {
  const Ring before = MustBuild(NodeNames(n), options);
  const double ideal = static_cast<double>(options.partitions) * std::min(options.replicas, n + 1) / (n + 1);
  Movement movement;
  for (std::uint32_t t = 0; t < trials; ++t) {
    std::vector<std::string> nodes = NodeNames(n);
    nodes.push_back("joiner-" + std::to_string(t));
    const RingDiff diff = Diff(before, MustBuild(nodes, options));
    movement.worst_ratio = std::max(movement.worst_ratio, diff.replicas_copied / ideal);
    movement.mean_ratio += diff.replicas_copied / ideal / trials;
    movement.leaders_changed += static_cast<double>(diff.leaders_changed) / options.partitions / trials;
  }
  return movement;
}

Movement MeasureLeaves(std::uint32_t n, const RingOptions& options) {
  const Ring before = MustBuild(NodeNames(n), options);
  const std::vector<std::uint32_t> loads = before.Loads();
  Movement movement;
  for (std::uint32_t leaver = 0; leaver < n; ++leaver) {
    std::vector<std::string> nodes = before.Nodes();
    nodes.erase(nodes.begin() + leaver);
    const RingDiff diff = Diff(before, MustBuild(nodes, options));
    // With fewer nodes than R, a leave drops replicas and copies none.
    const double ideal = n > options.replicas ? loads[leaver] : 1.0;
    const double ratio = n > options.replicas ? diff.replicas_copied / ideal : 0.0;
    movement.worst_ratio = std::max(movement.worst_ratio, ratio);
    movement.mean_ratio += ratio / n;
    movement.leaders_changed += static_cast<double>(diff.leaders_changed) / options.partitions / n;
  }
  return movement;
}

TEST(RingHash, PartitionOfSpreadsKeysAndIsStable) {
  std::vector<std::uint32_t> counts(256, 0);
  for (int i = 0; i < 25600; ++i) ++counts[Ring::PartitionOf("session/client-" + std::to_string(i), 256)];
  EXPECT_LT(*std::max_element(counts.begin(), counts.end()), 150u);  // mean 100
  EXPECT_GT(*std::min_element(counts.begin(), counts.end()), 50u);
  const Ring ring = MustBuild(NodeNames(3), {});
  EXPECT_EQ(ring.PartitionOf("retained/a/b"), Ring::PartitionOf("retained/a/b", 4096));
  EXPECT_EQ(ring.PartitionOf("retained/a/b"), base::StableHash("retained/a/b") % 4096);
}

TEST(Ring, RejectsBadMembershipAndOptions) {
  EXPECT_EQ(Ring::Build({}, {}).error(), RingErrc::kNoNodes);
  EXPECT_EQ(Ring::Build({"a", "b", "a"}, {}).error(), RingErrc::kDuplicateNode);
  RingOptions options;
  options.partitions = 0;
  EXPECT_EQ(Ring::Build({"a"}, options).error(), RingErrc::kBadOptions);
}

TEST(Ring, BoundHoldsAndReplicasAreDistinctForManyNodeCountsAndEpsilons) {
  for (double epsilon : {0.05, 0.1, 0.25, 0.5, 1.0}) {
    for (std::uint32_t n = 1; n <= 20; ++n) {
      RingOptions options;
      options.partitions = 256;
      options.epsilon = epsilon;
      const Ring ring = MustBuild(NodeNames(n), options);
      SCOPED_TRACE("n=" + std::to_string(n) + " epsilon=" + std::to_string(epsilon));
      const std::uint32_t r = std::min(3u, n);
      ASSERT_EQ(ring.ReplicaCount(), r);
      const std::vector<std::uint32_t> loads = ring.Loads();
      EXPECT_EQ(std::accumulate(loads.begin(), loads.end(), 0u), 256u * r);
      for (std::uint32_t load : loads) EXPECT_LE(load, ring.Capacity());
      for (std::uint32_t load : ring.LeaderLoads()) EXPECT_LE(load, ring.LeaderCapacity());
      for (std::uint32_t p = 0; p < 256; ++p) {
        const std::vector<std::string> replicas = ring.Replicas(p);
        EXPECT_EQ(std::set<std::string>(replicas.begin(), replicas.end()).size(), r);
        EXPECT_EQ(ring.Leader(p), replicas.front());
      }
    }
  }
}

TEST(Ring, EveryPositiveEpsilonPlacesUpTo64Nodes) {
  for (std::uint32_t partitions : {256u, 1024u}) {
    for (double epsilon : {0.05, 0.1, 0.25}) {
      for (std::uint32_t n = 1; n <= 64; ++n) {
        RingOptions options;
        options.partitions = partitions;
        options.epsilon = epsilon;
        EXPECT_TRUE(Ring::Build(NodeNames(n), options).has_value())
            << "P=" << partitions << " epsilon=" << epsilon << " n=" << n;
      }
    }
  }
  RingOptions exact;  // epsilon 0 leaves no slack: the last replicas can find no room
  exact.epsilon = 0;
  EXPECT_EQ(Ring::Build(NodeNames(4), exact).error(), RingErrc::kUnplaceable);
}

TEST(Ring, UnboundedLeadersStillBoundReplicas) {
  RingOptions options;
  options.partitions = 256;
  options.epsilon = 0.1;
  options.bound_leaders = false;
  const Ring ring = MustBuild(NodeNames(20), options);
  for (std::uint32_t load : ring.Loads()) EXPECT_LE(load, ring.Capacity());
  EXPECT_EQ(ring.LeaderCapacity(), UINT32_MAX);
}

TEST(Ring, CapacityIsCeilingOfOnePlusEpsilonTimesMean) {
  RingOptions options;
  options.partitions = 256;
  options.epsilon = 0.25;
  EXPECT_EQ(MustBuild(NodeNames(4), options).Capacity(), 240u);   // 1.25 * 192
  EXPECT_EQ(MustBuild(NodeNames(10), options).Capacity(), 96u);   // ceil(1.25 * 76.8)
  EXPECT_EQ(MustBuild(NodeNames(10), options).LeaderCapacity(), 32u);  // 1.25 * 25.6
}

TEST(Ring, PlacementIsIndependentOfInsertionOrder) {
  const std::uint32_t seed = 20261129;
  std::printf("seed=%u\n", seed);
  std::mt19937 random(seed);
  for (std::uint32_t n : {2u, 5u, 13u, 20u}) {
    const Ring reference = MustBuild(NodeNames(n), {});  // the defaults: P = 4096
    for (int shuffle = 0; shuffle < 5; ++shuffle) {
      std::vector<std::string> nodes = NodeNames(n);
      std::shuffle(nodes.begin(), nodes.end(), random);
      const Ring other = MustBuild(nodes, {});
      for (std::uint32_t p = 0; p < reference.Options().partitions; ++p) {
        ASSERT_EQ(reference.Replicas(p), other.Replicas(p));
      }
      EXPECT_TRUE(Diff(reference, other).moves.empty());
    }
  }
}

TEST(Ring, DiffPairsDroppedAndGainedReplicas) {
  RingOptions options;
  options.partitions = 64;
  const Ring before = MustBuild({"a", "b", "c"}, options);
  const Ring after = MustBuild({"a", "b", "c", "d"}, options);
  const RingDiff diff = Diff(before, after);
  EXPECT_EQ(diff.replicas_copied, diff.moves.size());  // same R: every move is a copy
  for (const Move& move : diff.moves) {
    EXPECT_FALSE(move.from.empty());
    const std::vector<std::string> replicas = after.Replicas(move.partition);
    EXPECT_NE(std::find(replicas.begin(), replicas.end(), move.to), replicas.end());
  }
  // Growing from 2 nodes to 3 adds a third replica to every partition.
  const RingDiff grow = Diff(MustBuild({"a", "b"}, options), before);
  EXPECT_EQ(grow.replicas_copied, 64u);
}

TEST(Ring, JoinAndLeaveMoveWithinTwiceTheIdeal) {
  for (double epsilon : {0.1, 0.25}) {
    for (std::uint32_t n = 3; n <= 20; ++n) {
      RingOptions options;
      options.partitions = 256;
      options.epsilon = epsilon;
      SCOPED_TRACE("n=" + std::to_string(n) + " epsilon=" + std::to_string(epsilon));
      EXPECT_LE(MeasureJoins(n, options).worst_ratio, 2.0);
      EXPECT_LE(MeasureLeaves(n, options).worst_ratio, 2.0);
    }
  }
}

// Issue 5's placement target at the default options (P = 4096, R = 3,
// epsilon = 0.1): no node above ceil(1.1 * mean), and a single join or
// leave copies at most 1.2x the least possible number of replicas.
TEST(Ring, DefaultsMeetThePlacementTargetUpTo64Nodes) {
  const RingOptions defaults;
  ASSERT_EQ(defaults.partitions, 4096u);
  ASSERT_DOUBLE_EQ(defaults.epsilon, 0.1);
  for (std::uint32_t n : {3u, 10u, 40u, 64u}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const Ring ring = MustBuild(NodeNames(n), defaults);
    const double mean = static_cast<double>(defaults.partitions) * std::min(3u, n) / n;
    EXPECT_LE(ring.Capacity(), static_cast<std::uint32_t>(std::ceil(1.1 * mean)));
    const std::vector<std::uint32_t> loads = ring.Loads();
    EXPECT_LE(*std::max_element(loads.begin(), loads.end()), ring.Capacity());
    EXPECT_LE(MeasureJoins(n, defaults, 2).worst_ratio, 1.2);
    EXPECT_LE(MeasureLeaves(n, defaults).worst_ratio, 1.2);
  }
}

double LeaderMaxOverMean(const Ring& ring) {
  const std::vector<std::uint32_t> loads = ring.LeaderLoads();
  const double mean = std::accumulate(loads.begin(), loads.end(), 0.0) / loads.size();
  return *std::max_element(loads.begin(), loads.end()) / mean;
}

void PrintFigures(std::uint32_t partitions, std::initializer_list<std::uint32_t> node_counts) {
  std::printf("P=%u R=3 virtual_nodes=160\n", partitions);
  std::printf("%-7s %3s %8s %8s %9s %10s %10s %11s %8s\n", "epsilon", "N", "max/mean",
              "leaders", "join mean", "join worst", "leave mean", "leave worst", "join ldr");
  for (double epsilon : {-1.0, 0.25, 0.1}) {
    for (std::uint32_t n : node_counts) {
      RingOptions options;
      options.partitions = partitions;
      options.epsilon = epsilon;
      const Ring ring = MustBuild(NodeNames(n), options);
      const Movement join = MeasureJoins(n, options);
      const Movement leave = MeasureLeaves(n, options);
      std::printf("%-7s %3u %8.3f %8.3f %9.2f %10.2f %10.2f %11.2f %8.3f\n",
                  epsilon < 0 ? "none" : std::to_string(epsilon).substr(0, 4).c_str(), n,
                  MaxOverMean(ring), LeaderMaxOverMean(ring), join.mean_ratio, join.worst_ratio,
                  leave.mean_ratio, leave.worst_ratio, join.leaders_changed);
    }
  }
}

// The figures in docs/placement.md.
TEST(RingFigures, PrintBalanceAndMovement) {
  PrintFigures(256, {3, 5, 10, 20, 40, 64});
  PrintFigures(1024, {20, 64});
}

}  // namespace
}  // namespace estuary::ring
