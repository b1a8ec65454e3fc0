#include "tools/bench/pacer.h"

#include <gtest/gtest.h>

namespace estuary::bench {
namespace {

constexpr int64_t kMs = 1'000'000;

TEST(Pacer, FirstMessageDueAtStart) {
  Pacer pacer(1000, 5 * kMs);
  EXPECT_EQ(pacer.Due(4 * kMs), 0u);
  EXPECT_EQ(pacer.DelayMs(4 * kMs), 1);
  EXPECT_EQ(pacer.Due(5 * kMs), 1u);
  EXPECT_EQ(pacer.DelayMs(5 * kMs), 0);
}

TEST(Pacer, SpreadsRateOverTime) {
  Pacer pacer(1000, 0);  // one per ms
  EXPECT_EQ(pacer.Due(10 * kMs - 1), 10u);
  pacer.Take(10);
  EXPECT_EQ(pacer.Due(10 * kMs - 1), 0u);
  EXPECT_EQ(pacer.DelayMs(10 * kMs - 1), 1);
  EXPECT_EQ(pacer.Due(10 * kMs), 1u);
}

TEST(Pacer, HighRateBatchesPerMillisecond) {
  Pacer pacer(250'000, 0);  // 250 per ms
  pacer.Take(pacer.Due(0));
  EXPECT_EQ(pacer.DelayMs(0), 1);
  EXPECT_EQ(pacer.Due(1 * kMs), 250u);
}

TEST(Pacer, LowRateSleepsLong) {
  Pacer pacer(2, 0);  // every 500 ms
  pacer.Take(pacer.Due(0));
  EXPECT_EQ(pacer.DelayMs(0), 500);
  EXPECT_EQ(pacer.DelayMs(499 * kMs + 1), 1);
}

TEST(Pacer, FallingBehindCatchesUp) {
  Pacer pacer(1000, 0);
  pacer.Take(pacer.Due(0));
  EXPECT_EQ(pacer.Due(100 * kMs), 100u);
  EXPECT_EQ(pacer.DelayMs(100 * kMs), 0);
}

TEST(Pacer, TotalOverOneSecondMatchesRate) {
  Pacer pacer(3333, 0);
  for (int64_t t = 0; t < 1000 * kMs; t += kMs) pacer.Take(pacer.Due(t));
  EXPECT_NEAR(static_cast<double>(pacer.taken()), 3333.0, 4.0);
}

}  // namespace
}  // namespace estuary::bench
