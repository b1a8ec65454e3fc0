#pragma once
// Test support: a ShardLink that carries cross-shard work in one thread, in
// order, when the test says so (RunAll), for tests that drive several
// ShardBrokers on one simulated loop; a null session sink and cluster port.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "cluster-core/broker/shard_broker.h"

namespace estuary::core::test_support {

class QueueLink final : public ShardLink {
 public:
  void Post(uint16_t shard, std::function<void(ShardBroker&)> work) override {
    queue_.emplace_back(shard, std::move(work));
  }
  void RunAll() {
    while (!queue_.empty()) {
      auto [shard, work] = std::move(queue_.front());
      queue_.pop_front();
      work(*shards[shard]);
    }
  }
  void Clear() { queue_.clear(); }  // work lost, as in a crash
  size_t pending() const { return queue_.size(); }
  std::vector<ShardBroker*> shards;

 private:
  std::deque<std::pair<uint16_t, std::function<void(ShardBroker&)>>> queue_;
};

// A session's connection that does nothing.
class NullSink final : public SessionSink {
 public:
  void OnDeliveriesReady() override {}
  void OnDetached(DetachReason) override {}
};

// A cluster port that takes everything and does nothing: the broker acts
// as a cluster node's (it holds recovered sessions for ConfirmRecovered).
// Tests' own ports derive from it and override only what they watch.
class QuietPort : public ClusterPort {
 public:
  void RouteChanged(const RouteUpdate&) override {}
  void Forward(uint16_t, NodeForward) override {}
  void ForwardSafe(uint16_t, uint64_t) override {}
};

}  // namespace estuary::core::test_support
