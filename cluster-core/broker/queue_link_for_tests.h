#pragma once
// Test support: a ShardLink that carries cross-shard work in one thread, in
// order, when the test says so (RunAll), for tests that drive several
// ShardBrokers on one simulated loop.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
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

}  // namespace estuary::core::test_support
