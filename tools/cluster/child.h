#pragma once
// Child: one program estuary-cluster runs (an estuaryd node or an
// estuary-lb). Its stdout comes back on a pipe, read for the `... ready`
// line and then copied to its log file; its stderr goes straight to the log
// file. The child runs in its own process group (a Ctrl-C in the terminal
// reaches only the launcher, which stops the children in order) and gets
// SIGTERM if the launcher dies. One thread (the launcher's).
#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace estuary::launcher {

using Clock = std::chrono::steady_clock;

class Child {
 public:
  // Starts argv[0] with argv; `log_path` is created or appended to. With
  // `netns_path` (a /var/run/netns/NAME file) the child enters that network
  // namespace before the exec. Returns null and fills `error` when the
  // fork, the pipe, the log or the namespace fails (a failed exec shows as
  // exit status 127).
  static std::unique_ptr<Child> Spawn(std::string name, const std::vector<std::string>& argv,
                                      const std::string& log_path, std::string* error,
                                      const std::string& netns_path = "");
  ~Child();  // SIGKILLs and reaps a child that still runs
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  // Reads stdout until a line that starts with `prefix` (returned), EOF or
  // the deadline (nullopt). Earlier lines are copied to the log.
  std::optional<std::string> WaitForLine(const std::string& prefix, Clock::time_point deadline);
  // Copies whatever stdout has now to the log without blocking; false once
  // stdout reached EOF (the child closed it or exited).
  bool Pump();

  // Reads stdout to EOF (copied to the log) and reaps the child; nullopt
  // if it still runs at the deadline.
  std::optional<int> WaitExit(Clock::time_point deadline);
  // Every stdout line read so far by WaitForLine/WaitExit (kept for tests).
  const std::string& output() const { return output_; }

  void Signal(int signal_number) const;
  // Reaps the child if it exited; returns its status (0..255, 128+signal).
  std::optional<int> TryReap();
  bool running() const { return pid_ > 0; }
  std::optional<int> exit_status() const { return exit_status_; }

  const std::string& name() const { return name_; }
  const std::string& log_path() const { return log_path_; }
  pid_t pid() const { return pid_ > 0 ? pid_ : last_pid_; }
  int stdout_fd() const { return stdout_fd_; }

 private:
  Child() = default;
  void Log(const std::string& text) const;

  std::string name_;
  std::string log_path_;
  pid_t pid_ = -1;
  pid_t last_pid_ = -1;
  int stdout_fd_ = -1;
  int log_fd_ = -1;
  std::string buffered_;
  std::string output_;
  std::optional<int> exit_status_;
};

// "value" of the word `key=value` in `line`, or "".
std::string WordValue(const std::string& line, const std::string& key);

}  // namespace estuary::launcher
