#include "tools/bench/run_board.h"

#include <algorithm>

namespace estuary::bench {

void RunBoard::ReportReady() {
  {
    std::lock_guard lock(mutex_);
    ++ready_;
  }
  changed_.notify_all();
}

void RunBoard::ReportError(const std::string& error, bool fatal) {
  {
    std::lock_guard lock(mutex_);
    if (first_error_.empty()) first_error_ = error;
    if (fatal && !fatal_error_) fatal_error_ = error;
  }
  changed_.notify_all();
}

void RunBoard::Notify() { changed_.notify_all(); }

bool RunBoard::WaitUntil(Deadline deadline, const std::function<bool()>& done,
                         std::chrono::milliseconds poll) {
  std::unique_lock lock(mutex_);
  while (true) {
    lock.unlock();
    const bool finished = done();
    lock.lock();
    if (finished) return true;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    changed_.wait_until(lock, std::min(deadline, now + poll));
  }
}

uint32_t RunBoard::ready() const {
  std::lock_guard lock(mutex_);
  return ready_;
}

std::optional<std::string> RunBoard::fatal_error() const {
  std::lock_guard lock(mutex_);
  return fatal_error_;
}

std::string RunBoard::first_error() const {
  std::lock_guard lock(mutex_);
  return first_error_;
}

}  // namespace estuary::bench
