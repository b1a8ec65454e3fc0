// Property test: FilterTrie::Match agrees with the brute-force TopicMatches
// over seeded random filters and topics, through inserts and erases.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "model/filter_trie.h"
#include "model/topic.h"

namespace estuary {
namespace {

using Pair = std::pair<std::string, int>;

uint64_t SeedFromEnvironment() {
  const char* text = std::getenv("ESTUARY_SEED");
  return text != nullptr ? std::strtoull(text, nullptr, 10) : 424242;
}

class Generator {
 public:
  explicit Generator(uint64_t seed) : random_(seed) {}

  // Mostly a few literals, so filters and topics collide often; '$'
  // literals exercise [MQTT-4.7.2-1]; "" exercises empty levels; the "n"
  // names give some nodes more children than ChildTable keeps inline.
  std::string Literal() {
    static const char* const kLiterals[] = {"a", "b", "c", "", "$SYS", "$x"};
    if (Below(4) == 0) return "n" + std::to_string(Below(16));
    return kLiterals[Below(6)];
  }
  // Valid names and filters only: an empty result is drawn again.
  std::string Topic() {
    std::string topic = Literal();
    for (int levels = Below(5); levels > 0; --levels) topic += "/" + Literal();
    return topic.empty() ? Topic() : topic;
  }
  std::string Filter() {
    std::string filter = AnyFilter();
    return filter.empty() ? Filter() : filter;
  }
  int Below(int bound) { return static_cast<int>(random_() % static_cast<uint64_t>(bound)); }

 private:
  std::string AnyFilter() {
    const int levels = 1 + Below(5);
    std::string filter;
    for (int i = 0; i < levels; ++i) {
      if (i > 0) filter += "/";
      const int roll = Below(100);
      if (i == levels - 1 && roll < 15) {
        filter += "#";
      } else {
        filter += roll < 40 ? std::string("+") : Literal();
      }
    }
    return filter;
  }

  std::mt19937_64 random_;
};

std::vector<int> Matched(const FilterTrie<int>& trie, const std::string& topic) {
  std::vector<int> found;
  trie.Match(topic, [&](int value) { found.push_back(value); });
  std::sort(found.begin(), found.end());
  return found;
}

std::vector<int> BruteForce(const std::vector<Pair>& stored, const std::string& topic) {
  std::vector<int> found;
  for (const auto& [filter, value] : stored) {
    if (TopicMatches(filter, topic)) found.push_back(value);
  }
  std::sort(found.begin(), found.end());
  return found;
}

void ExpectAgreement(const FilterTrie<int>& trie, const std::vector<Pair>& stored,
                     Generator& generator, uint64_t seed) {
  ASSERT_EQ(trie.size(), stored.size());
  for (int i = 0; i < 3000; ++i) {
    const std::string topic = generator.Topic();
    ASSERT_TRUE(ValidateTopicName(topic)) << "'" << topic << "'";
    ASSERT_EQ(Matched(trie, topic), BruteForce(stored, topic))
        << "topic '" << topic << "', seed " << seed;
  }
}

TEST(FilterTriePropertyTest, MatchAgreesWithTopicMatches) {
  const uint64_t seed = SeedFromEnvironment();
  std::cout << "seed=" << seed << " (replay with ESTUARY_SEED=" << seed << ")\n";
  Generator generator(seed);
  FilterTrie<int> trie;
  std::vector<Pair> stored;
  for (int i = 0; i < 1500; ++i) {
    Pair pair{generator.Filter(), generator.Below(200)};
    ASSERT_TRUE(ValidateTopicFilter(pair.first)) << "'" << pair.first << "'";
    const bool fresh = std::find(stored.begin(), stored.end(), pair) == stored.end();
    ASSERT_EQ(trie.Insert(pair.first, pair.second), fresh) << pair.first << ", seed " << seed;
    if (fresh) stored.push_back(pair);
  }
  ASSERT_NO_FATAL_FAILURE(ExpectAgreement(trie, stored, generator, seed));

  std::shuffle(stored.begin(), stored.end(), std::mt19937_64(seed));
  const size_t half = stored.size() / 2;
  for (size_t i = half; i < stored.size(); ++i) {
    ASSERT_TRUE(trie.Erase(stored[i].first, stored[i].second)) << stored[i].first;
    ASSERT_FALSE(trie.Contains(stored[i].first, stored[i].second));
  }
  stored.resize(half);
  ASSERT_NO_FATAL_FAILURE(ExpectAgreement(trie, stored, generator, seed));

  for (const auto& [filter, value] : stored) ASSERT_TRUE(trie.Erase(filter, value)) << filter;
  EXPECT_TRUE(trie.empty());
  EXPECT_EQ(trie.node_count(), 1u) << "erase must prune every branch, seed " << seed;
}

}  // namespace
}  // namespace estuary
