#include "tools/bench/sequence_tracker.h"

#include <gtest/gtest.h>

namespace estuary::bench {
namespace {

using Outcome = SequenceTracker::Outcome;

TEST(SequenceTracker, InOrderStream) {
  SequenceTracker t;
  for (uint64_t s = 0; s < 100000; ++s) ASSERT_EQ(t.Record(s), Outcome::kInOrder);
  EXPECT_EQ(t.unique(), 100000u);
  EXPECT_EQ(t.duplicates(), 0u);
  EXPECT_EQ(t.out_of_order(), 0u);
}

TEST(SequenceTracker, GapsAreLossNotReordering) {
  SequenceTracker t;
  t.Record(0);
  t.Record(5);
  t.Record(9);
  EXPECT_EQ(t.unique(), 3u);
  EXPECT_EQ(t.out_of_order(), 0u);
}

TEST(SequenceTracker, LateArrivalIsOutOfOrderOnce) {
  SequenceTracker t;
  t.Record(0);
  t.Record(2);
  EXPECT_EQ(t.Record(1), Outcome::kOutOfOrder);
  EXPECT_EQ(t.Record(1), Outcome::kDuplicate);
  EXPECT_EQ(t.Record(2), Outcome::kDuplicate);
  EXPECT_EQ(t.unique(), 3u);
  EXPECT_EQ(t.out_of_order(), 1u);
  EXPECT_EQ(t.duplicates(), 2u);
}

TEST(SequenceTracker, FirstMessageNeedNotBeZero) {
  SequenceTracker t;
  t.Record(10);
  EXPECT_EQ(t.Record(3), Outcome::kOutOfOrder);
  EXPECT_EQ(t.Record(10), Outcome::kDuplicate);
}

TEST(SequenceTracker, WindowSlidesWithoutStaleBits) {
  SequenceTracker t;
  t.Record(1);
  // 1 + kWindow maps onto 1's slot: it must read as not-yet-seen.
  EXPECT_EQ(t.Record(1 + SequenceTracker::kWindow), Outcome::kInOrder);
  EXPECT_EQ(t.Record(2 + SequenceTracker::kWindow), Outcome::kInOrder);
  EXPECT_EQ(t.Record(SequenceTracker::kWindow), Outcome::kOutOfOrder);
  EXPECT_EQ(t.duplicates(), 0u);
}

TEST(SequenceTracker, BigJumpClearsWindow) {
  SequenceTracker t;
  for (uint64_t s = 0; s < 100; ++s) t.Record(s);
  EXPECT_EQ(t.Record(50 + 3 * SequenceTracker::kWindow), Outcome::kInOrder);
  EXPECT_EQ(t.Record(51 + 2 * SequenceTracker::kWindow + 100), Outcome::kOutOfOrder);
}

TEST(SequenceTracker, OlderThanWindowCountsAsNewAndTooOld) {
  SequenceTracker t;
  t.Record(0);
  t.Record(2 * SequenceTracker::kWindow);
  EXPECT_EQ(t.Record(0), Outcome::kOutOfOrder);
  EXPECT_EQ(t.too_old(), 1u);
  EXPECT_EQ(t.unique(), 3u);
}

}  // namespace
}  // namespace estuary::bench
