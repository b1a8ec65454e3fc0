#pragma once
// What the estuaryctl tests share: RunCtl with its output captured, and a
// wait on observed state with a deadline. Test support only; one thread.
#include <chrono>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tools/ctl/ctl.h"

namespace estuary::ctl {

struct Outcome {
  int status = -1;
  std::string out, err;
};

// RunCtl("estuaryctl" + args), its exit status and what it printed.
inline Outcome Ctl(std::vector<std::string> args) {
  args.insert(args.begin(), "estuaryctl");
  std::vector<const char*> argv;
  for (const auto& arg : args) argv.push_back(arg.c_str());
  std::ostringstream out, err;
  Outcome outcome;
  outcome.status = RunCtl(static_cast<int>(argv.size()), argv.data(), out, err);
  outcome.out = out.str();
  outcome.err = err.str();
  return outcome;
}

// Checks `condition` every `interval` (how often to ask, not a wait for
// correctness) until it holds (true) or `timeout` has passed (false).
inline bool WaitUntil(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
                      std::chrono::milliseconds interval) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(interval);
  }
  return false;
}

}  // namespace estuary::ctl
