#pragma once
// Loop: the seam between Estuary's shells and an event loop. Timers, the
// clock and deferred work all go through it, so the same shell runs on
// libuv (UvLoop) or on simulated time (SimLoop, fires timers in deadline
// order, ties by insertion order).
//
// Threading: a Loop and everything registered on it belong to the thread
// that runs it; only Mailbox (uv/uv_loop.h) crosses threads.
#include <cstdint>
#include <functional>

#include "io/clock.h"

namespace estuary::io {

using TimerId = uint64_t;

class Loop {
 public:
  virtual ~Loop() = default;
  virtual const Clock& clock() const = 0;
  int64_t NowMs() const { return clock().NowMs(); }
  // Runs `fn` once after `delay_ms` (>= 0). Returns an id for CancelTimer.
  virtual TimerId AddTimer(int64_t delay_ms, std::function<void()> fn) = 0;
  // Cancelling an unknown or already-fired timer is a no-op.
  virtual void CancelTimer(TimerId id) = 0;
  // Runs `fn` on this loop soon, after the current callback returns (used
  // for deferred delete and for flushing writes once per loop iteration).
  virtual void Post(std::function<void()> fn) = 0;
};

}  // namespace estuary::io
