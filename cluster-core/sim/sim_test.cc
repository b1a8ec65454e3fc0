#include <gtest/gtest.h>

#include "cluster-core/sim/scenario.h"

namespace estuary::sim {
namespace {

void RunSeeds(uint64_t first, uint64_t count, size_t voters, raft::Mode mode, size_t steps) {
  size_t acked = 0;
  for (uint64_t seed = first; seed < first + count; ++seed) {
    ScenarioOptions options{.seed = seed, .voters = voters, .mode = mode, .steps = steps};
    const ScenarioResult result = RunScenario(options);
    ASSERT_TRUE(result.ok) << result.failure << "\nreplay: estuary-sim --seed " << seed
                           << " --voters " << voters << " --mode "
                           << (mode == raft::Mode::kPlain ? "plain" : "timestamp");
    acked += result.acked;
  }
  EXPECT_GT(acked, count);  // the runs did real work
}

// 2,500 seeds in all (the CI floor is 2,000); a few seconds on one core.
TEST(SimSeeds, Plain3Voters) { RunSeeds(1, 1000, 3, raft::Mode::kPlain, 300); }
TEST(SimSeeds, Timestamp3Voters) { RunSeeds(100001, 1000, 3, raft::Mode::kTimestamp, 300); }
TEST(SimSeeds, Plain5Voters) { RunSeeds(200001, 250, 5, raft::Mode::kPlain, 300); }
TEST(SimSeeds, Timestamp5Voters) { RunSeeds(300001, 250, 5, raft::Mode::kTimestamp, 300); }

TEST(SimSeeds, SameSeedReplaysExactly) {
  ScenarioOptions options{.seed = 42, .steps = 200};
  const ScenarioResult a = RunScenario(options);
  const ScenarioResult b = RunScenario(options);
  EXPECT_EQ(a.acked, b.acked);
  EXPECT_EQ(a.committed, b.committed);
  EXPECT_EQ(a.simulated_ms, b.simulated_ms);
}

}  // namespace
}  // namespace estuary::sim
