#include "base/check.h"

#include <gtest/gtest.h>

namespace {

TEST(CheckDeathTest, AFailedCheckAbortsNamingTheCondition) {
  const int answer = 41;
  EXPECT_DEATH(ESTUARY_CHECK(answer == 42), "check failed: answer == 42");
}

TEST(Check, AHoldingCheckDoesNothing) {
  int evaluated = 0;
  ESTUARY_CHECK(++evaluated == 1);
  EXPECT_EQ(evaluated, 1);  // evaluated once, in release builds too
}

}  // namespace
