#pragma once
// TokenBucket: a rate limit as a value. `rate` tokens per second refill a
// bucket holding at most `burst` tokens; a caller spends tokens for what it
// lets through. Pure: every call is handed `now_ms` (a monotonic
// millisecond clock, io::Clock::NowMs in the shells), so tests drive it
// with any clock they like.
//
// Spending may take the level below zero (Spend): a cost larger than the
// burst (a 1 MiB message under a 64 KiB/s byte rate) then goes through once
// the bucket is positive and is paid back before anything else passes, so
// nothing is ever stuck and the long-run rate is still `rate`.
// Not thread-safe; a value type, owned by whoever limits.
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace estuary::base {

class TokenBucket {
 public:
  TokenBucket() = default;  // unlimited: every check passes
  // `rate` per second > 0; `burst` >= 1 tokens, the bucket starts full.
  TokenBucket(double rate, double burst, int64_t now_ms)
      : rate_per_ms_(rate / 1000.0), burst_(std::max(burst, 1.0)), level_(burst_), at_ms_(now_ms) {}

  bool unlimited() const { return rate_per_ms_ <= 0; }

  // Refills for the time since the last call (time never runs backwards here).
  void Refill(int64_t now_ms) {
    if (now_ms <= at_ms_) return;
    level_ = std::min(burst_, level_ + double(now_ms - at_ms_) * rate_per_ms_);
    at_ms_ = now_ms;
  }
  // True (and `cost` spent) when at least `cost` tokens are there.
  bool TryTake(int64_t now_ms, double cost = 1) {
    if (unlimited()) return true;
    Refill(now_ms);
    if (level_ < cost) return false;
    level_ -= cost;
    return true;
  }
  // True while the level is positive: the caller may go on and Spend.
  bool Available(int64_t now_ms) {
    if (unlimited()) return true;
    Refill(now_ms);
    return level_ > 0;
  }
  // Spends `cost` whatever the level (which may go negative: a debt).
  void Spend(double cost) {
    if (!unlimited()) level_ -= cost;
  }
  // Milliseconds from `now_ms` until the level reaches `level` (0 if it
  // has; at least 1 otherwise). For a timer that resumes the caller.
  int64_t MsUntil(int64_t now_ms, double level) {
    if (unlimited()) return 0;
    Refill(now_ms);
    if (level_ >= level) return 0;
    return std::max<int64_t>(1, int64_t(std::ceil((level - level_) / rate_per_ms_)));
  }
  // True when the bucket is full (nothing spent lately): an idle limiter.
  bool Full(int64_t now_ms) {
    if (unlimited()) return true;
    Refill(now_ms);
    return level_ >= burst_;
  }
  double level() const { return level_; }

 private:
  double rate_per_ms_ = 0;  // 0: unlimited
  double burst_ = 1;
  double level_ = 1;
  int64_t at_ms_ = 0;
};

}  // namespace estuary::base
