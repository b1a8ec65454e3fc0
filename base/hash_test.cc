#include "base/hash.h"

#include <gtest/gtest.h>

namespace estuary::base {
namespace {

// Published FNV-1a test vectors (Fowler, Noll, Vo).
TEST(Hash, Fnv1a32MatchesPublishedVectors) {
  EXPECT_EQ(Fnv1a32(""), 0x811c9dc5u);
  EXPECT_EQ(Fnv1a32("a"), 0xe40c292cu);
  EXPECT_EQ(Fnv1a32("foobar"), 0xbf9cf968u);
}

TEST(Hash, Fnv1a64MatchesPublishedVectors) {
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ULL);
}

TEST(Hash, ASeedContinuesAnEarlierCall) {
  EXPECT_EQ(Fnv1a64("bar", Fnv1a64("foo")), Fnv1a64("foobar"));
  EXPECT_EQ(Fnv1a32("bar", Fnv1a32("foo")), Fnv1a32("foobar"));
}

// Pinned: placement depends on these values (docs/placement.md).
TEST(Hash, StableHashIsPinned) {
  static_assert(StableHash("") == Mix64(0xcbf29ce484222325ULL));
  EXPECT_EQ(Mix64(0), 0u);
  EXPECT_EQ(Mix64(1), 0x5692161d100b05e5ULL);
}

}  // namespace
}  // namespace estuary::base
