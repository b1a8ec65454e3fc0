#pragma once
// LogBudget: for a log line a remote peer can cause at will (a socket that
// never finishes its CONNECT or SASL, ...): at most `burst` lines at once
// and `rate` a second after that; the lines not written are counted and
// named by the next one written. Its metric, not the log, counts every
// event. Not thread-safe: a call site keeps one per thread
// (`thread_local`), so a node logs at most shards x rate such lines a
// second.
#include <cstdint>

#include "base/token_bucket.h"

namespace estuary::io {

class LogBudget {
 public:
  LogBudget(double rate, double burst) : rate_(rate), burst_(burst) {}

  // True: write the line now; `skipped` is how many were not written since
  // the last one (0 usually). False: skip it (counted).
  bool Take(int64_t now_ms, uint64_t& skipped) {
    if (!started_) {
      bucket_ = base::TokenBucket(rate_, burst_, now_ms);
      started_ = true;
    }
    if (!bucket_.TryTake(now_ms)) {
      ++skipped_;
      return false;
    }
    skipped = skipped_;
    skipped_ = 0;
    return true;
  }

 private:
  double rate_;
  double burst_;
  bool started_ = false;
  base::TokenBucket bucket_;
  uint64_t skipped_ = 0;
};

}  // namespace estuary::io
