#pragma once
// Hybrid logical clock: 48 bits of physical milliseconds and a 16-bit
// logical counter packed into one uint64_t. Timestamps never go backwards,
// even when the physical clock steps back. Not thread-safe: one per shard.
#include <cstdint>

namespace estuary {

class HybridLogicalClock {
 public:
  static constexpr int kCounterBits = 16;
  static constexpr uint64_t kCounterMask = (uint64_t{1} << kCounterBits) - 1;

  static constexpr uint64_t Pack(uint64_t physical_ms, uint64_t counter) {
    return (physical_ms << kCounterBits) | (counter & kCounterMask);
  }
  static constexpr uint64_t PhysicalMs(uint64_t timestamp) { return timestamp >> kCounterBits; }
  static constexpr uint64_t Counter(uint64_t timestamp) { return timestamp & kCounterMask; }

  // A timestamp for a local event; physical_ms is the wall clock now.
  uint64_t Now(uint64_t physical_ms);
  // Merges a timestamp received from elsewhere; returns a timestamp greater
  // than both it and every timestamp issued before.
  uint64_t Update(uint64_t physical_ms, uint64_t received);
  uint64_t last() const { return last_; }

 private:
  uint64_t last_ = 0;
};

}  // namespace estuary
