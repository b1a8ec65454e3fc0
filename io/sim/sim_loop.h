#pragma once
// SimLoop: a Loop on a ManualClock. RunUntilIdle() runs posted work;
// AdvanceTo/AdvanceBy jump the clock and fire due timers in deadline
// order, ties broken by insertion order. Deterministic, single-threaded.
//
// While a timer fires the clock reads exactly its deadline; work the timer
// posts runs before the next timer fires. Posted work runs in FIFO order
// before any due timer. The clock never moves backwards: a timer that came
// due because the ManualClock was moved by hand fires at the current time.
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <utility>

#include "io/loop.h"

namespace estuary::io {

class SimLoop final : public Loop {
 public:
  explicit SimLoop(ManualClock& clock) : clock_(clock) {}
  const Clock& clock() const override { return clock_; }
  TimerId AddTimer(int64_t delay_ms, std::function<void()> fn) override;
  void CancelTimer(TimerId id) override;
  void Post(std::function<void()> fn) override;

  void RunUntilIdle();            // posted work, and timers already due
  void AdvanceBy(int64_t ms);     // moves time, firing timers on the way
  void AdvanceTo(int64_t now_ms); // the same, to an absolute time
  size_t pending_timers() const { return timers_.size(); }
  size_t pending_posted() const { return posted_.size(); }

 private:
  bool RunOnePosted();
  void RunAllPosted();
  bool FireNextDueBy(int64_t limit_ms);

  ManualClock& clock_;
  // (deadline, id) -> fn; id is the insertion order.
  std::map<std::pair<int64_t, TimerId>, std::function<void()>> timers_;
  std::map<TimerId, int64_t> deadlines_;
  std::deque<std::function<void()>> posted_;
  TimerId next_id_ = 1;
};

}  // namespace estuary::io
