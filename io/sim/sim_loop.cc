#include "io/sim/sim_loop.h"

#include <algorithm>

namespace estuary::io {

TimerId SimLoop::AddTimer(int64_t delay_ms, std::function<void()> fn) {
  TimerId id = next_id_++;
  int64_t deadline = clock_.NowMs() + std::max<int64_t>(delay_ms, 0);
  timers_.emplace(std::make_pair(deadline, id), std::move(fn));
  deadlines_.emplace(id, deadline);
  return id;
}

void SimLoop::CancelTimer(TimerId id) {
  auto it = deadlines_.find(id);
  if (it == deadlines_.end()) return;
  timers_.erase(std::make_pair(it->second, id));
  deadlines_.erase(it);
}

void SimLoop::Post(std::function<void()> fn) { posted_.push_back(std::move(fn)); }

bool SimLoop::RunOnePosted() {
  if (posted_.empty()) return false;
  // Popped before the call, since the function may post more work.
  std::function<void()> fn = std::move(posted_.front());
  posted_.pop_front();
  fn();
  return true;
}

void SimLoop::RunAllPosted() {
  while (RunOnePosted()) {
  }
}

bool SimLoop::FireNextDueBy(int64_t limit_ms) {
  if (timers_.empty()) return false;
  auto it = timers_.begin();
  const auto [deadline, id] = it->first;
  if (deadline > limit_ms) return false;
  std::function<void()> fn = std::move(it->second);
  timers_.erase(it);
  deadlines_.erase(id);
  if (deadline > clock_.NowMs()) clock_.Set(deadline);
  fn();
  return true;
}

void SimLoop::RunUntilIdle() {
  do {
    RunAllPosted();
  } while (FireNextDueBy(clock_.NowMs()));
}

void SimLoop::AdvanceTo(int64_t now_ms) {
  RunUntilIdle();
  while (FireNextDueBy(now_ms)) RunAllPosted();
  if (now_ms > clock_.NowMs()) clock_.Set(now_ms);
  RunUntilIdle();
}

void SimLoop::AdvanceBy(int64_t ms) { AdvanceTo(clock_.NowMs() + std::max<int64_t>(ms, 0)); }

}  // namespace estuary::io
