#pragma once
// Pacer: spreads a fixed rate of messages evenly over time, for one
// publisher. Pure: the caller passes `now` (monotonic ns) and sleeps on a
// loop timer for DelayMs(); nothing here reads a clock or spins.
//
// Message k is due at start + k / rate. A publisher that falls behind (a
// full in-flight window, a full socket) catches up in a burst, so the
// offered rate over the run stays the configured one.
#include <cstdint>

namespace estuary::bench {

class Pacer {
 public:
  // rate_per_second > 0.
  Pacer(double rate_per_second, int64_t start_ns);

  // Messages due by `now_ns` and not taken yet.
  uint64_t Due(int64_t now_ns) const;
  void Take(uint64_t count) { taken_ += count; }
  uint64_t taken() const { return taken_; }
  // When the next message not yet taken is due, in whole milliseconds from
  // now, rounded up (0 when it is due already).
  int64_t DelayMs(int64_t now_ns) const;

 private:
  double interval_ns_;
  int64_t start_ns_;
  uint64_t taken_ = 0;
};

}  // namespace estuary::bench
