// Raft micro benchmarks (issue 5, point 6): entries committed per second
// through a 3-replica group with instant delivery and persistence, message
// handling on a follower, and the same group inside the simulator with a
// zero-latency network.
// Run: cmake --build BUILD --target estuary-raft-bench && BUILD/bin/estuary-raft-bench
#include <benchmark/benchmark.h>

#include <deque>
#include <map>
#include <memory>

#include "cluster-core/raft/raft.h"
#include "cluster-core/sim/scenario.h"
#include "cluster-core/sim/sim_cluster.h"

namespace estuary::raft {
namespace {

// Three bare nodes; every Ready is "persisted" and its messages delivered
// at once, in order. The time is a counter, not a clock.
class Group {
 public:
  explicit Group(Mode mode) {
    for (NodeId id = 1; id <= 3; ++id) {
      Options options;
      options.id = id;
      options.mode = mode;
      options.random_seed = id;
      options.max_append_entries = 256;
      options.max_inflight = 64;
      nodes_[id] = std::make_unique<Raft>(options, Storage{.bootstrap = Config{.voters = {1, 2, 3}}}, 0);
    }
    now_ = 2'000;
    Handle(1, nodes_[1]->Tick(now_));
    Pump();
    now_ += 60;
    Handle(1, nodes_[1]->Tick(now_));  // a heartbeat round: the lease
    Pump();
  }

  Raft& leader() { return *nodes_[1]; }

  void Propose(std::vector<uint8_t> data) {
    auto proposed = nodes_[1]->Propose(std::move(data), now_);
    if (!proposed) std::abort();
    Handle(1, std::move(proposed->ready));
  }

  void Pump() {
    while (!queue_.empty()) {
      Message message = std::move(queue_.front());
      queue_.pop_front();
      Handle(message.to, nodes_[message.to]->Step(message, now_));
    }
  }

  uint64_t applied() const { return applied_; }

 private:
  void Handle(NodeId id, Ready ready) {
    while (!ready.Empty()) {
      for (Message& message : ready.messages) queue_.push_back(std::move(message));
      if (id == 1) applied_ += ready.committed.size();
      ready = nodes_[id]->Advance(ready);
    }
  }

  std::map<NodeId, std::unique_ptr<Raft>> nodes_;
  std::deque<Message> queue_;
  uint64_t now_ = 0;
  uint64_t applied_ = 0;
};

// Entries committed and applied on the leader per second; range(0) entries
// proposed per round, range(1) 0 plain / 1 timestamp.
void BM_GroupCommit(benchmark::State& state) {
  Group group(state.range(1) == 0 ? Mode::kPlain : Mode::kTimestamp);
  const auto batch = static_cast<int>(state.range(0));
  const std::vector<uint8_t> payload(100, 0x5A);
  for (auto _ : state) {
    for (int i = 0; i < batch; ++i) group.Propose(payload);
    group.Pump();
  }
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["applied"] = static_cast<double>(group.applied());
}
BENCHMARK(BM_GroupCommit)->ArgsProduct({{1, 16, 256}, {0, 1}});

// One follower handling an Append of range(0) entries (and its Advance).
void BM_FollowerAppend(benchmark::State& state) {
  Options options;
  options.id = 2;
  Raft follower(options, Storage{.bootstrap = Config{.voters = {1, 2, 3}}}, 0);
  const auto count = static_cast<Index>(state.range(0));
  Index next = 1;
  uint64_t now = 1;
  for (auto _ : state) {
    Message append{.type = MessageType::kAppend, .from = 1, .to = 2, .term = 1,
                   .log_index = next - 1, .log_term = next == 1 ? Term{0} : Term{1}};
    for (Index i = 0; i < count; ++i) {
      append.entries.push_back(Entry{.term = 1, .index = next + i, .data = std::vector<uint8_t>(100)});
    }
    append.commit = next - 1;
    next += count;
    Ready ready = follower.Step(append, ++now);
    benchmark::DoNotOptimize(follower.Advance(ready));
    if (next > 1'000'000) {  // keep the in-memory log bounded
      state.PauseTiming();
      follower.Compact(follower.applied(), {});
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["entries/s"] = benchmark::Counter(
      static_cast<double>(state.iterations() * count), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_FollowerAppend)->Arg(1)->Arg(64);

void BM_FollowerHeartbeat(benchmark::State& state) {
  Options options;
  options.id = 2;
  Raft follower(options, Storage{.bootstrap = Config{.voters = {1, 2, 3}}}, 0);
  uint64_t now = 1;
  for (auto _ : state) {
    Message heartbeat{.type = MessageType::kHeartbeat, .from = 1, .to = 2, .term = 1,
                      .send_time = now};
    benchmark::DoNotOptimize(follower.Step(heartbeat, ++now));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_FollowerHeartbeat);

// The simulator with a zero-latency network and disk: entries acknowledged
// per second of wall time, checks included (range(0): 0 plain, 1 timestamp).
void BM_SimulatedGroup(benchmark::State& state) {
  const raft::Mode mode = state.range(0) == 0 ? Mode::kPlain : Mode::kTimestamp;
  sim::SimOptions options = sim::DefaultSimOptions(1, 3, 0, mode);
  options.drop_per_mille = 0;
  options.duplicate_per_mille = 0;
  options.min_delay_ms = 0;
  options.max_delay_ms = 0;
  options.max_disk_delay_ms = 0;
  options.slow_disk_per_mille = 0;
  options.raft.max_append_entries = 256;
  sim::SimCluster cluster(options);
  cluster.RunUntil([&] { return cluster.Leader().has_value(); }, 10'000);
  cluster.RunFor(200);
  const NodeId leader = *cluster.Leader();
  const size_t acked_before = cluster.acked().size();
  for (auto _ : state) {
    for (int i = 0; i < 64; ++i) cluster.Propose(leader);
    cluster.RunFor(1);
  }
  state.SetItemsProcessed(static_cast<int64_t>(cluster.acked().size() - acked_before));
}
BENCHMARK(BM_SimulatedGroup)->Arg(0)->Arg(1);

}  // namespace
}  // namespace estuary::raft

BENCHMARK_MAIN();
