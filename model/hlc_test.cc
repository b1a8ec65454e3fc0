#include "model/hlc.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <random>

namespace estuary {
namespace {

using Hlc = HybridLogicalClock;

TEST(HybridLogicalClockTest, PackRoundTrips) {
  const uint64_t timestamp = Hlc::Pack(1'700'000'000'123, 42);
  EXPECT_EQ(Hlc::PhysicalMs(timestamp), 1'700'000'000'123u);
  EXPECT_EQ(Hlc::Counter(timestamp), 42u);
  EXPECT_LT(Hlc::Pack(5, 0xFFFF), Hlc::Pack(6, 0));
}

TEST(HybridLogicalClockTest, NowFollowsAdvancingWallClock) {
  Hlc clock;
  EXPECT_EQ(clock.Now(100), Hlc::Pack(100, 0));
  EXPECT_EQ(clock.Now(101), Hlc::Pack(101, 0));
  EXPECT_EQ(clock.last(), Hlc::Pack(101, 0));
}

TEST(HybridLogicalClockTest, NowInSameMillisecondCounts) {
  Hlc clock;
  clock.Now(100);
  EXPECT_EQ(clock.Now(100), Hlc::Pack(100, 1));
  EXPECT_EQ(clock.Now(100), Hlc::Pack(100, 2));
}

TEST(HybridLogicalClockTest, WallClockSteppingBackDoesNotGoBackwards) {
  Hlc clock;
  clock.Now(500);
  EXPECT_EQ(clock.Now(400), Hlc::Pack(500, 1));
  EXPECT_EQ(clock.Now(499), Hlc::Pack(500, 2));
  EXPECT_EQ(clock.Now(501), Hlc::Pack(501, 0));
}

TEST(HybridLogicalClockTest, UpdateFromAheadTakesReceivedTime) {
  Hlc clock;
  clock.Now(100);
  const uint64_t received = Hlc::Pack(200, 7);
  EXPECT_EQ(clock.Update(150, received), Hlc::Pack(200, 8));
  EXPECT_EQ(clock.Now(150), Hlc::Pack(200, 9));
}

TEST(HybridLogicalClockTest, UpdateFromBehindKeepsLocalTime) {
  Hlc clock;
  clock.Now(300);
  EXPECT_EQ(clock.Update(300, Hlc::Pack(100, 50)), Hlc::Pack(300, 1));
  EXPECT_EQ(clock.Update(400, Hlc::Pack(100, 50)), Hlc::Pack(400, 0));
}

TEST(HybridLogicalClockTest, CounterOverflowCarriesIntoMilliseconds) {
  Hlc clock;
  clock.Update(5, Hlc::Pack(5, 0xFFFE));
  EXPECT_EQ(clock.last(), Hlc::Pack(5, 0xFFFF));
  EXPECT_EQ(clock.Now(5), Hlc::Pack(6, 0));
}

uint64_t SeedFromEnvironment() {
  const char* text = std::getenv("ESTUARY_SEED");
  return text != nullptr ? std::strtoull(text, nullptr, 10) : 20240611;
}

// Property: whatever the wall clock and peers say, every timestamp exceeds
// every earlier one and every timestamp received.
TEST(HybridLogicalClockTest, StrictlyIncreasingUnderSkewProperty) {
  const uint64_t seed = SeedFromEnvironment();
  std::cout << "seed=" << seed << " (replay with ESTUARY_SEED=" << seed << ")\n";
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<uint64_t> jitter(0, 40);
  Hlc clock;
  uint64_t wall = 1'000'000;
  uint64_t previous = 0;
  for (int step = 0; step < 100'000; ++step) {
    wall = wall + jitter(random) - 20;  // the wall clock wanders both ways
    uint64_t timestamp = 0;
    if (random() % 3 == 0) {
      const uint64_t received = Hlc::Pack(wall + jitter(random) - 20, random() % 8);
      timestamp = clock.Update(wall, received);
      ASSERT_GT(timestamp, received) << "step " << step;
    } else {
      timestamp = clock.Now(wall);
    }
    ASSERT_GT(timestamp, previous) << "step " << step;
    ASSERT_GE(Hlc::PhysicalMs(timestamp), wall) << "step " << step;
    previous = timestamp;
  }
}

}  // namespace
}  // namespace estuary
