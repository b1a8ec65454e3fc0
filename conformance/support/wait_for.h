#pragma once
// WaitFor: checks a condition until it holds or a deadline passes. Tests
// wait on observed state this way, never on a sleep of a guessed length.
// The pause between checks only sets how often the state is asked for.
#include <poll.h>

#include <chrono>
#include <functional>

namespace estuary::testing {

// Checks `condition` (at least once) every `interval` until it holds
// (true) or `deadline` has passed (false).
inline bool WaitUntil(const std::function<bool()>& condition, std::chrono::steady_clock::time_point deadline,
                      std::chrono::milliseconds interval = std::chrono::milliseconds(20)) {
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    ::poll(nullptr, 0, static_cast<int>(interval.count()));
  }
  return true;
}

// The same with a deadline `timeout` from now.
inline bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
                    std::chrono::milliseconds interval = std::chrono::milliseconds(20)) {
  return WaitUntil(condition, std::chrono::steady_clock::now() + timeout, interval);
}

}  // namespace estuary::testing
