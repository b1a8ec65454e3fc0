#pragma once
// Clock: the only way Estuary code learns the time. Shells hold one; pure
// cores are handed `now` values. ManualClock drives tests and simulation.
#include <atomic>
#include <cstdint>

namespace estuary::io {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic milliseconds (arbitrary origin) for timeouts and intervals.
  virtual int64_t NowMs() const = 0;
  // Wall-clock milliseconds since the Unix epoch, for expiry and HLC.
  virtual int64_t WallMs() const = 0;
};

// The real clocks (CLOCK_MONOTONIC and CLOCK_REALTIME).
class SystemClock final : public Clock {
 public:
  int64_t NowMs() const override;
  int64_t WallMs() const override;
  static SystemClock& Instance();
};

// A clock tests move by hand. Thread-safe reads.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_ms = 1'000'000, int64_t wall_offset_ms = 1'700'000'000'000)
      : now_ms_(start_ms), wall_offset_ms_(wall_offset_ms) {}
  int64_t NowMs() const override { return now_ms_.load(); }
  int64_t WallMs() const override { return now_ms_.load() + wall_offset_ms_; }
  void Advance(int64_t ms) { now_ms_ += ms; }
  void Set(int64_t now_ms) { now_ms_ = now_ms; }

 private:
  std::atomic<int64_t> now_ms_;
  int64_t wall_offset_ms_;
};

}  // namespace estuary::io
