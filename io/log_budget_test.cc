#include "io/log_budget.h"

#include <gtest/gtest.h>

namespace estuary::io {
namespace {

TEST(LogBudgetTest, ABurstThenTheRateAndTheSkippedAreNamed) {
  LogBudget budget(/*rate=*/1, /*burst=*/3);
  uint64_t skipped = 99;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(budget.Take(1000, skipped));
    EXPECT_EQ(skipped, 0u);
  }
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(budget.Take(1000, skipped));
  EXPECT_FALSE(budget.Take(1999, skipped)) << "not a whole token yet";
  ASSERT_TRUE(budget.Take(2000, skipped));
  EXPECT_EQ(skipped, 6u) << "the six not written since";
  EXPECT_FALSE(budget.Take(2000, skipped));
  ASSERT_TRUE(budget.Take(3000, skipped));
  EXPECT_EQ(skipped, 1u);
}

}  // namespace
}  // namespace estuary::io
