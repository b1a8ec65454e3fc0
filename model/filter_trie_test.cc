#include "model/filter_trie.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "model/topic.h"

namespace estuary {
namespace {

template <typename V>
std::vector<V> MatchAll(const FilterTrie<V>& trie, std::string_view topic) {
  std::vector<V> found;
  trie.Match(topic, [&](const V& value) { found.push_back(value); });
  std::sort(found.begin(), found.end());
  return found;
}

using Ints = std::vector<int>;

TEST(FilterTrieTest, EmptyTrieMatchesNothing) {
  FilterTrie<int> trie;
  EXPECT_TRUE(trie.empty());
  EXPECT_EQ(trie.node_count(), 1u);
  EXPECT_EQ(MatchAll(trie, "a/b"), Ints{});
}

TEST(FilterTrieTest, ExactFilterMatchesOnlyItsTopic) {
  FilterTrie<int> trie;
  ASSERT_TRUE(trie.Insert("fleet/s1/d1/telemetry", 1));
  EXPECT_EQ(MatchAll(trie, "fleet/s1/d1/telemetry"), Ints{1});
  EXPECT_EQ(MatchAll(trie, "fleet/s1/d1"), Ints{});
  EXPECT_EQ(MatchAll(trie, "fleet/s1/d1/telemetry/x"), Ints{});
  EXPECT_EQ(MatchAll(trie, "fleet/s1/d2/telemetry"), Ints{});
}

TEST(FilterTrieTest, DuplicateInsertIsRejected) {
  FilterTrie<int> trie;
  EXPECT_TRUE(trie.Insert("a/+", 7));
  EXPECT_FALSE(trie.Insert("a/+", 7));
  EXPECT_EQ(trie.size(), 1u);
  EXPECT_TRUE(trie.Insert("a/+", 8));  // same filter, another value
  EXPECT_TRUE(trie.Insert("a/#", 7));  // same value, another filter
  EXPECT_EQ(trie.size(), 3u);
  // A value under two matching filters is visited once per filter.
  EXPECT_EQ(MatchAll(trie, "a/b"), (Ints{7, 7, 8}));
}

TEST(FilterTrieTest, InsertRejectsInvalidFilters) {
  FilterTrie<int> trie;
  for (const char* filter : {"", "a/#/b", "#/", "a+", "a/b#", "+a/b"}) {
    EXPECT_FALSE(trie.Insert(filter, 1)) << filter;
    EXPECT_FALSE(trie.Erase(filter, 1)) << filter;
    EXPECT_FALSE(trie.Contains(filter, 1)) << filter;
  }
  EXPECT_TRUE(trie.empty());
  EXPECT_EQ(trie.node_count(), 1u);
}

TEST(FilterTrieTest, PlusMatchesExactlyOneLevelIncludingEmpty) {
  FilterTrie<int> trie;
  trie.Insert("a/+/c", 1);
  trie.Insert("+/+", 2);
  trie.Insert("a/+", 3);
  EXPECT_EQ(MatchAll(trie, "a/b/c"), Ints{1});
  EXPECT_EQ(MatchAll(trie, "a//c"), Ints{1});
  EXPECT_EQ(MatchAll(trie, "/"), Ints{2});
  EXPECT_EQ(MatchAll(trie, "a/"), (Ints{2, 3}));
  EXPECT_EQ(MatchAll(trie, "a"), Ints{});
  EXPECT_EQ(MatchAll(trie, "a/b/c/d"), Ints{});
}

TEST(FilterTrieTest, HashMatchesParentAndAllDescendants) {
  FilterTrie<int> trie;
  trie.Insert("a/#", 1);
  trie.Insert("#", 2);
  trie.Insert("a/b/#", 3);
  EXPECT_EQ(MatchAll(trie, "a"), (Ints{1, 2}));
  EXPECT_EQ(MatchAll(trie, "a/b"), (Ints{1, 2, 3}));
  EXPECT_EQ(MatchAll(trie, "a/b/c/d"), (Ints{1, 2, 3}));
  EXPECT_EQ(MatchAll(trie, "ab"), Ints{2});
  EXPECT_EQ(MatchAll(trie, "a/"), (Ints{1, 2}));
}

// [MQTT-4.7.2-1]
TEST(FilterTrieTest, FirstLevelWildcardsSkipDollarTopics) {
  FilterTrie<int> trie;
  trie.Insert("#", 1);
  trie.Insert("+/monitor/Clients", 2);
  trie.Insert("$SYS/#", 3);
  trie.Insert("$SYS/monitor/+", 4);
  trie.Insert("+", 5);
  EXPECT_EQ(MatchAll(trie, "$SYS/monitor/Clients"), (Ints{3, 4}));
  EXPECT_EQ(MatchAll(trie, "$SYS"), Ints{3});
  EXPECT_EQ(MatchAll(trie, "x/monitor/Clients"), (Ints{1, 2}));
  EXPECT_EQ(MatchAll(trie, "x/$SYS"), Ints{1});
}

TEST(FilterTrieTest, EraseRemovesOnlyThatPair) {
  FilterTrie<int> trie;
  trie.Insert("a/b", 1);
  trie.Insert("a/b", 2);
  EXPECT_FALSE(trie.Erase("a/b", 3));
  EXPECT_FALSE(trie.Erase("a/c", 1));
  EXPECT_FALSE(trie.Erase("a/b/c", 1));
  EXPECT_TRUE(trie.Erase("a/b", 1));
  EXPECT_FALSE(trie.Erase("a/b", 1));
  EXPECT_EQ(trie.size(), 1u);
  EXPECT_EQ(MatchAll(trie, "a/b"), Ints{2});
  EXPECT_TRUE(trie.Contains("a/b", 2));
  EXPECT_FALSE(trie.Contains("a/b", 1));
}

TEST(FilterTrieTest, ErasePrunesEmptyBranchesOnly) {
  FilterTrie<int> trie;
  trie.Insert("a/b/c", 1);
  trie.Insert("a/x", 2);
  trie.Insert("+/+/#", 3);
  // root, a, b, c, x, +, +/+ (the '#' lives in its parent node)
  EXPECT_EQ(trie.node_count(), 7u);
  EXPECT_TRUE(trie.Erase("a/b/c", 1));
  EXPECT_EQ(trie.node_count(), 5u);  // c and b gone, a kept for a/x
  EXPECT_EQ(MatchAll(trie, "a/x"), (Ints{2, 3}));
  EXPECT_TRUE(trie.Erase("+/+/#", 3));
  EXPECT_EQ(trie.node_count(), 3u);
  EXPECT_TRUE(trie.Erase("a/x", 2));
  EXPECT_EQ(trie.node_count(), 1u);
  EXPECT_TRUE(trie.empty());
}

TEST(FilterTrieTest, EraseKeepsNodeThatStillEndsAFilter) {
  FilterTrie<int> trie;
  trie.Insert("a", 1);
  trie.Insert("a/b", 2);
  trie.Insert("a/#", 3);
  EXPECT_TRUE(trie.Erase("a/b", 2));
  EXPECT_EQ(trie.node_count(), 2u);
  EXPECT_EQ(MatchAll(trie, "a"), (Ints{1, 3}));
  EXPECT_TRUE(trie.Erase("a", 1));
  EXPECT_EQ(trie.node_count(), 2u);  // "a" still holds a/#
  EXPECT_TRUE(trie.Erase("a/#", 3));
  EXPECT_EQ(trie.node_count(), 1u);
}

TEST(FilterTrieTest, ManyValuesOnOneFilterUseTheIndex) {
  FilterTrie<int> trie;
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(trie.Insert("broadcast/#", i));
  for (int i = 0; i < 1000; i += 7) ASSERT_FALSE(trie.Insert("broadcast/#", i));
  for (int i = 0; i < 1000; i += 2) ASSERT_TRUE(trie.Erase("broadcast/#", i));
  Ints odd;
  for (int i = 1; i < 1000; i += 2) odd.push_back(i);
  EXPECT_EQ(MatchAll(trie, "broadcast/x"), odd);
  for (int i = 1; i < 1000; i += 2) ASSERT_TRUE(trie.Erase("broadcast/#", i));
  EXPECT_EQ(trie.node_count(), 1u);
}

// Past a handful of literal children a node switches to a hash table.
TEST(FilterTrieTest, ManyChildrenOfOneNode) {
  FilterTrie<int> trie;
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(trie.Insert("a/" + std::to_string(i) + "/x", i));
  trie.Insert("a/+/x", 1000);
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(MatchAll(trie, "a/" + std::to_string(i) + "/x"), (Ints{i, 1000}));
  }
  EXPECT_EQ(MatchAll(trie, "a/100/x"), Ints{1000});
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(trie.Erase("a/" + std::to_string(i) + "/x", i));
  EXPECT_TRUE(trie.Erase("a/+/x", 1000));
  EXPECT_EQ(trie.node_count(), 1u);
}

// A value type with == but no std::hash: the linear path.
struct Handle {
  int id;
  friend bool operator==(const Handle&, const Handle&) = default;
};

TEST(FilterTrieTest, WorksWithUnhashableValues) {
  FilterTrie<Handle> trie;
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(trie.Insert("a/+", Handle{i}));
  EXPECT_FALSE(trie.Insert("a/+", Handle{3}));
  EXPECT_TRUE(trie.Erase("a/+", Handle{3}));
  EXPECT_FALSE(trie.Contains("a/+", Handle{3}));
  int count = 0;
  trie.Match("a/b", [&](const Handle&) { ++count; });
  EXPECT_EQ(count, 39);
}

TEST(FilterTrieTest, MovedFromTrieIsEmpty) {
  FilterTrie<int> trie;
  trie.Insert("a/b", 1);
  FilterTrie<int> moved = std::move(trie);
  EXPECT_EQ(MatchAll(moved, "a/b"), Ints{1});
  EXPECT_TRUE(trie.empty());  // NOLINT(bugprone-use-after-move): checking the contract
  EXPECT_EQ(trie.node_count(), 1u);
  trie = std::move(moved);
  EXPECT_EQ(trie.size(), 1u);
}

// A hostile subscriber's deep filter must not exhaust the stack: pending
// branches spill from the inline buffer to the heap.
TEST(FilterTrieTest, VeryDeepFiltersMatchWithoutRecursion) {
  constexpr int kLevels = 30'000;
  std::string filter = "+";
  std::string topic = "x";
  for (int i = 1; i < kLevels; ++i) {
    filter += "/+";
    topic += "/x";
  }
  FilterTrie<int> trie;
  ASSERT_TRUE(trie.Insert(filter, 1));
  ASSERT_TRUE(trie.Insert(topic + "/#", 2));
  EXPECT_EQ(MatchAll(trie, topic), (Ints{1, 2}));
  EXPECT_TRUE(trie.Erase(filter, 1));
  EXPECT_TRUE(trie.Erase(topic + "/#", 2));
  EXPECT_EQ(trie.node_count(), 1u);
}

// Every literal node on the path also has a '+' child, so Match holds more
// pending branches than its inline buffer.
TEST(FilterTrieTest, PendingBranchesSpillPastInlineBuffer) {
  constexpr int kLevels = 4 * FilterTrie<int>::kInlineBranches;
  FilterTrie<int> trie;
  std::string prefix = "x";
  std::string topic = "x";
  for (int i = 1; i < kLevels; ++i) topic += "/x";
  Ints expected;
  for (int i = 1; i < kLevels; ++i) {
    ASSERT_TRUE(trie.Insert(prefix + "/+" + topic.substr(prefix.size() + 2), i));
    expected.push_back(i);
    prefix += "/x";
  }
  ASSERT_TRUE(trie.Insert(topic, 0));
  expected.insert(expected.begin(), 0);
  EXPECT_EQ(MatchAll(trie, topic), expected);
}

// Destroying a trie that still holds a very deep filter must not recurse.
TEST(FilterTrieTest, DeepTrieIsDestroyedWithoutRecursion) {
  std::string filter = "a";
  for (int i = 1; i < 30'000; ++i) filter += "/+";
  auto trie = std::make_unique<FilterTrie<int>>();
  ASSERT_TRUE(trie->Insert(filter, 1));
  EXPECT_EQ(trie->node_count(), 30'001u);
  trie.reset();
}

}  // namespace
}  // namespace estuary
