#pragma once
// ChildProcess: one program started for a test, its stdout read line by line
// with deadlines (the ready line and anything printed later), stopped by pid.
// The child dies with the test process (PR_SET_PDEATHSIG) and holds none of
// the test's file descriptors beyond 0-2 (client sockets must not stay open
// in it). Stop() sends SIGTERM and returns the exit status; Kill() is
// kill -9. BrokerProcess, LbProcess and NodeProcess are built on it.
// Test support only; one thread.
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace estuary::testing {

class ChildProcess {
 public:
  struct Options {
    // argv[0] is a path, or a name looked up in PATH (e.g. {"ip", "netns",
    // "exec", "ns", "/path/estuary-lb", ...}).
    std::vector<std::string> argv;
    // Empty: the child writes to the test's stderr; else appended to this file.
    std::string stderr_path;
  };
  // Forks and executes; returns null and fills `error` if that fails.
  static std::unique_ptr<ChildProcess> Spawn(const Options& options, std::string* error);
  ~ChildProcess();  // SIGKILL and reap if still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // The next stdout line (without its newline) within `timeout`, or nullopt
  // on timeout or EOF.
  std::optional<std::string> NextLine(std::chrono::milliseconds timeout);
  // Reads lines until one contains `needle` and returns it; nullopt if none
  // came within `timeout`. Earlier lines are dropped.
  std::optional<std::string> WaitForLine(const std::string& needle, std::chrono::milliseconds timeout);

  // SIGTERM, then waits up to `timeout` for the exit. Returns the exit
  // status (0..255), 128+signal if a signal ended it, or -1 if it did not
  // exit in time (it is then killed). Once the child is reaped, returns the
  // status it ended with: safe to call twice.
  int Stop(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Waits up to `timeout` for an exit the test caused otherwise (a signal
  // of its own); like Stop() without the SIGTERM.
  int Reap(std::chrono::milliseconds timeout);
  void Kill();  // SIGKILL and reap; nothing if already reaped

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }

 private:
  ChildProcess() = default;
  // Reads what stdout has within `wait_ms` into buffered_; false on EOF or
  // nothing.
  bool ReadMore(int wait_ms);
  void Record(int wait_status);

  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  int exit_status_ = -1;
  std::string buffered_;
};

// The "value" of a `key=value` word in a line of words (a ready line), or "".
std::string WordValue(const std::string& line, const std::string& key);
// The port of "HOST:PORT", or 0.
uint16_t PortOf(const std::string& address);

}  // namespace estuary::testing
