#pragma once
// RunBoard: where worker threads tell the coordinator thread what happened
// (clients ready, a failure) and where the coordinator waits for it.
// Thread-safe.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

namespace estuary::bench {

class RunBoard {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  // A worker has every client connected (and subscribed); in idle mode,
  // every connection attempt has an answer.
  void ReportReady();
  // A fatal error ends the run; a non-fatal one (idle mode) is only noted.
  // The first error of each kind is kept.
  void ReportError(const std::string& error, bool fatal);
  void Notify();  // wake the coordinator to look at the live counters

  // Waits until `done()` or `deadline`, re-checking on every report and at
  // least every `poll`. Returns done().
  bool WaitUntil(Deadline deadline, const std::function<bool()>& done, std::chrono::milliseconds poll);

  uint32_t ready() const;
  std::optional<std::string> fatal_error() const;
  std::string first_error() const;  // fatal or not; empty if none

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  uint32_t ready_ = 0;
  std::optional<std::string> fatal_error_;
  std::string first_error_;
};

}  // namespace estuary::bench
