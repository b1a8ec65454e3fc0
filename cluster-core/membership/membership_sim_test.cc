// Randomised membership runs on simulated time: crashes, restarts, cut and
// healed links; after the faults stop, every running node must see every
// running node up and every crashed node down, with one agreed table.
// A failing seed is printed; MEMBERSHIP_SEED=N replays one, MEMBERSHIP_SEEDS=N
// runs N seeds (default 300).
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <set>

#include <spdlog/spdlog.h>

#include "cluster-core/membership/membership.h"
#include "cluster-core/membership/memory_transport.h"
#include "io/sim/sim_loop.h"

namespace estuary::cluster {
namespace {

using Forwarder = testing::MembershipForwarder;

std::string Address(NodeId id) { return "10.1.0." + std::to_string(id) + ":7000"; }

class SimRun {
 public:
  static constexpr NodeId kNodes = 5;
  explicit SimRun(uint64_t seed) : random_(seed) {}

  void Start(NodeId id, std::vector<std::string> seeds) {
    auto& node = nodes_[id];
    node.transport = std::make_unique<testing::MemoryTransport>(network_, id, Address(id));
    node.membership = std::make_unique<Membership>(
        loop_, *node.transport, MembershipConfig{.self = id, .cluster_address = Address(id)});
    node.forwarder = std::make_unique<Forwarder>(*node.membership);
    node.transport->set_handler(node.forwarder.get());
    node.transport->set_dial_observer(
        [membership = node.membership.get()](const DialFailure& failure) { membership->OnDialFailed(failure); });
    node.membership->Start(seeds);
  }
  void Crash(NodeId id) {
    nodes_[id].membership.reset();
    nodes_.erase(id);
  }
  NodeId Pick() { return static_cast<NodeId>(1 + random_() % kNodes); }
  NodeId PickRunning() {
    std::vector<NodeId> running;
    for (auto& [id, node] : nodes_) running.push_back(id);
    return running[random_() % running.size()];
  }

  // Returns "" or what went wrong.
  std::string Run() {
    Start(1, {});
    for (NodeId id = 2; id <= kNodes; ++id) Start(id, {Address(1)});
    loop_.AdvanceBy(2000);
    std::vector<std::pair<NodeId, NodeId>> cuts;
    for (int step = 0; step < 12; ++step) {
      switch (random_() % 5) {
        case 0:
          if (nodes_.size() > 2) Crash(PickRunning());
          break;
        case 1: {
          NodeId id = Pick();
          if (!nodes_.count(id)) {
            std::vector<std::string> seeds;  // every running node, as an operator would list
            for (auto& [other, node] : nodes_) seeds.push_back(Address(other));
            Start(id, seeds);
            left_.erase(id);  // a new process rejoins after a leave
          }
          break;
        }
        case 4:
          if (nodes_.size() > 2) {
            // A graceful leave, then the process exits.
            NodeId id = PickRunning();
            nodes_[id].membership->Leave(nullptr);
            loop_.AdvanceBy(static_cast<int64_t>(10 + random_() % 3000));
            Crash(id);
            left_.insert(id);
          }
          break;
        case 2: {
          NodeId a = Pick(), b = Pick();
          if (a != b) {
            network_.Cut(Address(a), Address(b));
            cuts.emplace_back(a, b);
          }
          break;
        }
        default:
          if (!cuts.empty()) {
            auto [a, b] = cuts[random_() % cuts.size()];
            network_.Heal(Address(a), Address(b));
          }
      }
      loop_.AdvanceBy(static_cast<int64_t>(random_() % 4000));
    }
    for (auto [a, b] : cuts) network_.Heal(Address(a), Address(b));
    loop_.AdvanceBy(10'000);
    return Check();
  }

  std::string Check() {
    for (auto& [observer, node] : nodes_) {
      for (NodeId id = 1; id <= kNodes; ++id) {
        const Member* seen = node.membership->Find(id);
        const MemberState want = nodes_.count(id) ? MemberState::kUp : MemberState::kDown;
        if (!nodes_.count(id) && seen == nullptr) continue;  // never met it
        // A node that left is left, or down where its leave never arrived
        // (it was cut off from everyone): never live again.
        const bool ok = seen != nullptr && (seen->state == want || (left_.count(id) && seen->state == MemberState::kLeft));
        if (!ok) {
          return "node " + std::to_string(observer) + " sees node " + std::to_string(id) + " " +
                 (seen ? std::string(ToString(seen->state)) : "absent") + ", want " +
                 std::string(ToString(want));
        }
      }
    }
    // One agreed table among the running nodes.
    const auto& first = nodes_.begin()->second.membership->members();
    for (auto& [observer, node] : nodes_) {
      auto table = node.membership->members();
      if (table.size() != first.size()) return "tables differ in size at node " + std::to_string(observer);
      for (size_t i = 0; i < table.size(); ++i) {
        if (table[i].node != first[i].node || table[i].incarnation != first[i].incarnation ||
            table[i].state != first[i].state) {
          return "tables differ at node " + std::to_string(observer) + " about node " +
                 std::to_string(table[i].node);
        }
      }
    }
    return "";
  }

 private:
  struct Node {
    std::unique_ptr<testing::MemoryTransport> transport;
    std::unique_ptr<Membership> membership;
    std::unique_ptr<Forwarder> forwarder;
  };
  std::mt19937_64 random_;
  io::ManualClock clock_;
  io::SimLoop loop_{clock_};
  testing::MemoryNetwork network_{loop_};
  std::map<NodeId, Node> nodes_;
  std::set<NodeId> left_;  // left gracefully and not started again
};

TEST(MembershipSim, ConvergesAfterRandomCrashesRestartsAndCuts) {
  uint64_t first = 1, count = 300;
  if (const char* seeds = std::getenv("MEMBERSHIP_SEEDS")) count = std::strtoull(seeds, nullptr, 10);
  if (const char* seed = std::getenv("MEMBERSHIP_SEED")) first = std::strtoull(seed, nullptr, 10), count = 1;
  const auto level = spdlog::get_level();
  if (count > 1) spdlog::set_level(spdlog::level::off);  // thousands of runs: only the failures
  int failures = 0;
  for (uint64_t seed = first; seed < first + count && failures < 5; ++seed) {
    SimRun run(seed);
    const std::string problem = run.Run();
    if (!problem.empty()) {
      ++failures;
      ADD_FAILURE() << "seed " << seed << ": " << problem << " (replay: MEMBERSHIP_SEED=" << seed << ")";
    }
  }
  spdlog::set_level(level);
}

}  // namespace
}  // namespace estuary::cluster
