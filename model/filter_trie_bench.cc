// Micro benchmark of FilterTrie: Match and Insert with 100,000 filters of a
// device fleet. Run: build/bin/estuary-trie-bench
#include <benchmark/benchmark.h>

#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "model/filter_trie.h"
#include "model/topic.h"

namespace estuary {
namespace {

constexpr int kSites = 100;
constexpr int kDevicesPerSite = 1000;
constexpr size_t kFilters = 100'000;
constexpr uint64_t kSeed = 7;

std::string DeviceTopic(int site, int device, const char* leaf) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "fleet/site-%03d/dev-%04d/%s", site, device, leaf);
  return buffer;
}

std::string SiteFilter(int site, const char* rest) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "fleet/site-%03d/%s", site, rest);
  return buffer;
}

// The mix a fleet broker sees: mostly one backend subscription per device
// stream, per-device '#', per-site dashboards with '+', a few fleet-wide.
std::vector<std::string> MakeFilters() {
  std::mt19937_64 random(kSeed);
  std::vector<std::string> filters;
  filters.reserve(kFilters);
  for (const char* rest : {"+/telemetry", "+/alerts", "#"}) {
    for (int site = 0; site < kSites; ++site) filters.push_back(SiteFilter(site, rest));
  }
  filters.push_back("fleet/+/+/alerts");
  filters.push_back("fleet/+/+/status");
  filters.push_back("$SYS/#");
  for (int i = 0; filters.size() < kFilters; ++i) {
    const int site = static_cast<int>(random() % kSites);
    const int device = static_cast<int>(random() % kDevicesPerSite);
    const int kind = static_cast<int>(random() % 100);
    const char* leaf = kind < 85 ? "telemetry" : kind < 90 ? "cmd" : kind < 95 ? "status" : "#";
    filters.push_back(DeviceTopic(site, device, leaf));
  }
  return filters;
}

const std::vector<std::string>& Filters() {
  static const std::vector<std::string> filters = MakeFilters();
  return filters;
}

const FilterTrie<int>& FullTrie() {
  static const FilterTrie<int>* trie = [] {
    auto* built = new FilterTrie<int>();
    int value = 0;
    for (const std::string& filter : Filters()) built->Insert(filter, value++);
    return built;
  }();
  return *trie;
}

std::vector<std::string> PublishTopics(size_t count) {
  std::mt19937_64 random(kSeed + 1);
  std::vector<std::string> topics;
  for (size_t i = 0; i < count; ++i) {
    const int site = static_cast<int>(random() % kSites);
    const int device = static_cast<int>(random() % kDevicesPerSite);
    topics.push_back(DeviceTopic(site, device, random() % 10 == 0 ? "alerts" : "telemetry"));
  }
  return topics;
}

void BM_Match(benchmark::State& state) {
  const FilterTrie<int>& trie = FullTrie();
  const std::vector<std::string> topics = PublishTopics(4096);
  size_t next = 0;
  int64_t matched = 0;
  for (auto _ : state) {
    const std::string& topic = topics[next++ & 4095];
    trie.Match(topic, [&](int value) {
      benchmark::DoNotOptimize(value);
      ++matched;
    });
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["matches_per_topic"] =
      static_cast<double>(matched) / static_cast<double>(state.iterations());
  state.counters["filters"] = static_cast<double>(trie.size());
  state.counters["nodes"] = static_cast<double>(trie.node_count());
}
BENCHMARK(BM_Match);

void BM_MatchNoSubscriber(benchmark::State& state) {
  const FilterTrie<int>& trie = FullTrie();
  const std::string topic = "warehouse/dock-7/door/open";
  for (auto _ : state) {
    trie.Match(topic, [](int value) { benchmark::DoNotOptimize(value); });
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MatchNoSubscriber);

// The scan the trie avoids, for scale: TopicMatches against every filter.
void BM_MatchBruteForce(benchmark::State& state) {
  const std::vector<std::string>& filters = Filters();
  const std::vector<std::string> topics = PublishTopics(256);
  size_t next = 0;
  for (auto _ : state) {
    const std::string& topic = topics[next++ & 255];
    int matched = 0;
    for (const std::string& filter : filters) matched += TopicMatches(filter, topic) ? 1 : 0;
    benchmark::DoNotOptimize(matched);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MatchBruteForce)->Unit(benchmark::kMicrosecond);

// Building a 100,000-filter trie from empty; items/s is inserts per second.
void BM_InsertAll(benchmark::State& state) {
  const std::vector<std::string>& filters = Filters();
  for (auto _ : state) {
    auto trie = std::make_unique<FilterTrie<int>>();
    int value = 0;
    for (const std::string& filter : filters) trie->Insert(filter, value++);
    state.PauseTiming();
    trie.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(filters.size()));
}
BENCHMARK(BM_InsertAll)->Unit(benchmark::kMillisecond);

// Subscribe/unsubscribe churn against a full trie: one Insert + one Erase.
void BM_InsertEraseChurn(benchmark::State& state) {
  FilterTrie<int> trie;
  int value = 0;
  for (const std::string& filter : Filters()) trie.Insert(filter, value++);
  const std::vector<std::string> topics = PublishTopics(4096);
  size_t next = 0;
  for (auto _ : state) {
    const std::string& filter = topics[next++ & 4095];
    trie.Insert(filter, -1);
    trie.Erase(filter, -1);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_InsertEraseChurn);

}  // namespace
}  // namespace estuary

BENCHMARK_MAIN();
