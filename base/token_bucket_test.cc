#include "base/token_bucket.h"

#include <gtest/gtest.h>

namespace estuary::base {
namespace {

constexpr int64_t kStart = 1'000'000;  // an arbitrary monotonic origin

TEST(TokenBucket, DefaultIsUnlimited) {
  TokenBucket bucket;
  EXPECT_TRUE(bucket.unlimited());
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(bucket.TryTake(kStart));
  EXPECT_EQ(bucket.MsUntil(kStart, 1e9), 0);
}

TEST(TokenBucket, StartsFullThenRefusesUntilRefilled) {
  TokenBucket bucket(10, 10, kStart);  // 10 per second, burst 10
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(bucket.TryTake(kStart)) << i;
  EXPECT_FALSE(bucket.TryTake(kStart));
  EXPECT_EQ(bucket.MsUntil(kStart, 1), 100);  // one token per 100 ms
  EXPECT_FALSE(bucket.TryTake(kStart + 99));
  EXPECT_TRUE(bucket.TryTake(kStart + 100));
  EXPECT_FALSE(bucket.TryTake(kStart + 100));
}

TEST(TokenBucket, LongRunRateIsTheRate) {
  TokenBucket bucket(50, 50, kStart);
  int passed = 0;
  // Asking every millisecond for 10 s: the burst, then 50 per second.
  for (int64_t t = kStart; t < kStart + 10'000; ++t) {
    while (bucket.TryTake(t)) ++passed;
  }
  EXPECT_GE(passed, 50 + 50 * 10 - 1);
  EXPECT_LE(passed, 50 + 50 * 10);
}

TEST(TokenBucket, NeverHoldsMoreThanTheBurst) {
  TokenBucket bucket(100, 5, kStart);
  EXPECT_TRUE(bucket.Full(kStart + 60'000));
  int passed = 0;
  while (bucket.TryTake(kStart + 60'000)) ++passed;
  EXPECT_EQ(passed, 5);
}

TEST(TokenBucket, SpendingBeyondTheLevelIsADebtPaidBackFirst) {
  TokenBucket bucket(1000, 1000, kStart);  // 1000 bytes per second
  ASSERT_TRUE(bucket.Available(kStart));
  bucket.Spend(5000);  // one 5,000-byte message goes through...
  EXPECT_FALSE(bucket.Available(kStart));
  // ... and nothing else until 4,000 bytes' worth of time has passed.
  EXPECT_EQ(bucket.MsUntil(kStart, 1e-6), 4001);
  EXPECT_FALSE(bucket.Available(kStart + 3999));
  EXPECT_TRUE(bucket.Available(kStart + 4001));
}

TEST(TokenBucket, TimeGoingBackwardsChangesNothing) {
  TokenBucket bucket(1, 1, kStart);
  EXPECT_TRUE(bucket.TryTake(kStart));
  EXPECT_FALSE(bucket.TryTake(kStart - 5000));
  EXPECT_FALSE(bucket.TryTake(kStart + 999));
  EXPECT_TRUE(bucket.TryTake(kStart + 1000));
}

}  // namespace
}  // namespace estuary::base
