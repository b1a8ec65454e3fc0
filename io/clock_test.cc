#include "io/clock.h"

#include <gtest/gtest.h>

namespace estuary::io {
namespace {

TEST(SystemClockTest, MonotonicNeverGoesBackwards) {
  const Clock& clock = SystemClock::Instance();
  int64_t previous = clock.NowMs();
  for (int i = 0; i < 1000; ++i) {
    int64_t now = clock.NowMs();
    EXPECT_GE(now, previous);
    previous = now;
  }
}

TEST(SystemClockTest, WallClockIsEpochMilliseconds) {
  int64_t wall = SystemClock::Instance().WallMs();
  EXPECT_GT(wall, int64_t{1'600'000'000'000});  // after 2020
  EXPECT_LT(wall, int64_t{4'000'000'000'000});  // before 2096
}

TEST(ManualClockTest, MovesOnlyByHand) {
  ManualClock clock(500, 1000);
  EXPECT_EQ(clock.NowMs(), 500);
  EXPECT_EQ(clock.WallMs(), 1500);
  clock.Advance(25);
  EXPECT_EQ(clock.NowMs(), 525);
  clock.Set(10);
  EXPECT_EQ(clock.WallMs(), 1010);
}

}  // namespace
}  // namespace estuary::io
