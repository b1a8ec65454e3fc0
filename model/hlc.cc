#include "model/hlc.h"

#include <algorithm>

namespace estuary {

// In packed form the HLC rules reduce to a maximum: the physical time with
// a zero counter when the wall clock has moved ahead, otherwise one past the
// last timestamp. A counter that overflows carries into the millisecond
// field, which keeps timestamps strictly increasing at the cost of running
// up to a millisecond ahead of the wall clock under extreme load.

uint64_t HybridLogicalClock::Now(uint64_t physical_ms) {
  last_ = std::max(Pack(physical_ms, 0), last_ + 1);
  return last_;
}

uint64_t HybridLogicalClock::Update(uint64_t physical_ms, uint64_t received) {
  last_ = std::max({Pack(physical_ms, 0), last_ + 1, received + 1});
  return last_;
}

}  // namespace estuary
