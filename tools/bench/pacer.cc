#include "tools/bench/pacer.h"

#include <cmath>

namespace estuary::bench {

Pacer::Pacer(double rate_per_second, int64_t start_ns)
    : interval_ns_(1e9 / rate_per_second), start_ns_(start_ns) {}

uint64_t Pacer::Due(int64_t now_ns) const {
  if (now_ns < start_ns_) return 0;
  const double elapsed = static_cast<double>(now_ns - start_ns_);
  // Message 0 is due at start, so floor(elapsed / interval) + 1 are due.
  const auto due = static_cast<uint64_t>(std::floor(elapsed / interval_ns_)) + 1;
  return due > taken_ ? due - taken_ : 0;
}

int64_t Pacer::DelayMs(int64_t now_ns) const {
  const double next_ns = static_cast<double>(start_ns_) + static_cast<double>(taken_) * interval_ns_;
  const double wait_ns = next_ns - static_cast<double>(now_ns);
  if (wait_ns <= 0) return 0;
  return static_cast<int64_t>(std::ceil(wait_ns / 1e6));
}

}  // namespace estuary::bench
