// Placement lookups and ring builds per second (issue 5, point 6).
// Run: cmake --build BUILD --target estuary-ring-bench && BUILD/bin/estuary-ring-bench
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "cluster-core/ring/ring.h"

namespace estuary::ring {
namespace {

std::vector<std::string> NodeNames(std::int64_t count) {
  std::vector<std::string> nodes;
  for (std::int64_t i = 1; i <= count; ++i) nodes.push_back("node-" + std::to_string(i));
  return nodes;
}

void BM_PartitionOf(benchmark::State& state) {
  std::vector<std::string> keys;
  for (int i = 0; i < 1024; ++i) keys.push_back("session/client-" + std::to_string(i));
  std::size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(Ring::PartitionOf(keys[i++ & 1023], 256));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PartitionOf);

void BM_Leader(benchmark::State& state) {
  const Ring ring = Ring::Build(NodeNames(10)).value();
  std::uint32_t partition = 0;
  for (auto _ : state) {
    const std::string key = "session/client-" + std::to_string(partition++ & 1023);
    benchmark::DoNotOptimize(ring.Leader(ring.PartitionOf(key)));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Leader);

void BM_Build(benchmark::State& state) {
  const std::vector<std::string> nodes = NodeNames(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(Ring::Build(nodes));
}
BENCHMARK(BM_Build)->Arg(3)->Arg(10)->Arg(20)->Arg(64)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace estuary::ring

BENCHMARK_MAIN();
