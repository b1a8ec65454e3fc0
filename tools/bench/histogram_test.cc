#include "tools/bench/histogram.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>

namespace estuary::bench {
namespace {

TEST(LatencyHistogram, EmptyReportsZeros) {
  LatencyHistogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.max(), 0u);
  EXPECT_EQ(h.ValueAtPercentile(50), 0u);
  EXPECT_EQ(h.mean(), 0.0);
}

TEST(LatencyHistogram, SmallValuesAreExact) {
  LatencyHistogram h;
  for (uint64_t v = 1; v <= 100; ++v) h.Record(v);
  EXPECT_EQ(h.ValueAtPercentile(50), 50u);
  EXPECT_EQ(h.ValueAtPercentile(90), 90u);
  EXPECT_EQ(h.ValueAtPercentile(99), 99u);
  EXPECT_EQ(h.ValueAtPercentile(100), 100u);
  EXPECT_EQ(h.min(), 1u);
  EXPECT_DOUBLE_EQ(h.mean(), 50.5);
}

TEST(LatencyHistogram, BucketsTileTheWholeRange) {
  EXPECT_EQ(LatencyHistogram::BucketLowest(0), 0u);
  for (size_t i = 0; i + 1 < LatencyHistogram::kBucketCount; ++i) {
    ASSERT_EQ(LatencyHistogram::BucketHighest(i) + 1, LatencyHistogram::BucketLowest(i + 1)) << i;
    ASSERT_EQ(LatencyHistogram::BucketIndex(LatencyHistogram::BucketLowest(i)), i);
    ASSERT_EQ(LatencyHistogram::BucketIndex(LatencyHistogram::BucketHighest(i)), i);
  }
  EXPECT_EQ(LatencyHistogram::BucketIndex(UINT64_MAX), LatencyHistogram::kBucketCount - 1);
  EXPECT_EQ(LatencyHistogram::BucketHighest(LatencyHistogram::kBucketCount - 1), UINT64_MAX);
}

TEST(LatencyHistogram, RelativeErrorBelowOnePercent) {
  std::mt19937_64 random(42);
  for (int i = 0; i < 100000; ++i) {
    const uint64_t v = random() >> (random() % 64);
    const size_t index = LatencyHistogram::BucketIndex(v);
    const uint64_t low = LatencyHistogram::BucketLowest(index);
    const uint64_t high = LatencyHistogram::BucketHighest(index);
    ASSERT_LE(low, v);
    ASSERT_GE(high, v);
    ASSERT_LE(static_cast<double>(high - low), static_cast<double>(v) / 128.0 + 1) << v;
  }
}

TEST(LatencyHistogram, PercentilesOfUniformNanoseconds) {
  LatencyHistogram h;
  for (uint64_t v = 1; v <= 1'000'000; ++v) h.Record(v * 1000);  // 1 us .. 1 s
  auto near = [](uint64_t got, double want) {
    return static_cast<double>(got) >= want && static_cast<double>(got) <= want * 1.008;
  };
  EXPECT_TRUE(near(h.ValueAtPercentile(50), 500e6)) << h.ValueAtPercentile(50);
  EXPECT_TRUE(near(h.ValueAtPercentile(90), 900e6)) << h.ValueAtPercentile(90);
  EXPECT_TRUE(near(h.ValueAtPercentile(99), 990e6)) << h.ValueAtPercentile(99);
  EXPECT_TRUE(near(h.ValueAtPercentile(99.9), 999e6)) << h.ValueAtPercentile(99.9);
  EXPECT_EQ(h.ValueAtPercentile(100), 1'000'000'000u);
  EXPECT_EQ(h.max(), 1'000'000'000u);
}

TEST(LatencyHistogram, PercentileNeverExceedsMax) {
  LatencyHistogram h;
  h.Record(1'000'001);
  EXPECT_EQ(h.ValueAtPercentile(50), 1'000'001u);
  EXPECT_EQ(h.ValueAtPercentile(0), 1'000'001u);
}

TEST(LatencyHistogram, MergeEqualsRecordingEverything) {
  LatencyHistogram a, b, all;
  for (uint64_t v = 0; v < 5000; ++v) {
    (v % 3 == 0 ? a : b).Record(v * 977);
    all.Record(v * 977);
  }
  a.Merge(b);
  EXPECT_EQ(a.count(), all.count());
  EXPECT_EQ(a.min(), all.min());
  EXPECT_EQ(a.max(), all.max());
  for (double p : {1.0, 50.0, 90.0, 99.0, 99.9, 100.0}) {
    EXPECT_EQ(a.ValueAtPercentile(p), all.ValueAtPercentile(p)) << p;
  }
}

TEST(LatencyHistogram, MergeOfEmptyKeepsMin) {
  LatencyHistogram a, empty;
  a.Record(300);
  a.Merge(empty);
  EXPECT_EQ(a.min(), 300u);
  empty.Merge(a);
  EXPECT_EQ(empty.min(), 300u);
}

}  // namespace
}  // namespace estuary::bench
