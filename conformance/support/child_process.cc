#include "conformance/support/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <sstream>

namespace estuary::testing {
namespace {

using Clock = std::chrono::steady_clock;

int MillisecondsLeft(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

}  // namespace

std::string WordValue(const std::string& line, const std::string& key) {
  std::istringstream words(line);
  std::string word;
  while (words >> word) {
    if (word.rfind(key + "=", 0) == 0) return word.substr(key.size() + 1);
  }
  return {};
}

uint16_t PortOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return 0;
  const unsigned long port = std::strtoul(address.c_str() + colon + 1, nullptr, 10);
  return port > 65535 ? 0 : static_cast<uint16_t>(port);
}

std::unique_ptr<ChildProcess> ChildProcess::Spawn(const Options& options, std::string* error) {
  // Everything the child needs is built before fork: after it, only
  // async-signal-safe calls.
  std::vector<std::string> args = options.argv;
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  if (args.empty()) {
    if (error) *error = "no program to start";
    return nullptr;
  }
  int stderr_fd = -1;
  if (!options.stderr_path.empty()) {
    stderr_fd = ::open(options.stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (stderr_fd < 0) {
      if (error) *error = "cannot open " + options.stderr_path;
      return nullptr;
    }
  }
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    if (stderr_fd >= 0) ::close(stderr_fd);
    if (error) *error = "pipe2 failed";
    return nullptr;
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // The child must not outlive a crashed test.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(pipe_fds[1], STDOUT_FILENO);  // dup2 clears O_CLOEXEC on the copy
    if (stderr_fd >= 0) ::dup2(stderr_fd, STDERR_FILENO);
    // Sockets the test holds (client libraries do not all set CLOEXEC) must
    // not stay open in the child, or closing them would not end a session.
    if (::close_range(3, ~0U, 0) != 0) {
      for (int fd = 3; fd < 4096; ++fd) ::close(fd);
    }
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  if (stderr_fd >= 0) ::close(stderr_fd);
  if (pid < 0) {
    ::close(pipe_fds[0]);
    if (error) *error = "fork failed";
    return nullptr;
  }
  std::unique_ptr<ChildProcess> child(new ChildProcess());
  child->pid_ = pid;
  child->stdout_fd_ = pipe_fds[0];
  return child;
}

ChildProcess::~ChildProcess() {
  Kill();
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
}

bool ChildProcess::ReadMore(int wait_ms) {
  if (stdout_fd_ < 0) return false;
  for (;;) {
    pollfd poll_fd{stdout_fd_, POLLIN, 0};
    const int ready = ::poll(&poll_fd, 1, wait_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    char chunk[512];
    const ssize_t n = ::read(stdout_fd_, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // The child holds the only write end: EOF means it exited (or closed
      // its stdout, which the programs under test do not).
      ::close(stdout_fd_);
      stdout_fd_ = -1;
      return false;
    }
    buffered_.append(chunk, static_cast<size_t>(n));
    return true;
  }
}

std::optional<std::string> ChildProcess::NextLine(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const size_t newline = buffered_.find('\n');
    if (newline != std::string::npos) {
      std::string line = buffered_.substr(0, newline);
      buffered_.erase(0, newline + 1);
      return line;
    }
    if (!ReadMore(MillisecondsLeft(deadline))) return std::nullopt;
  }
}

std::optional<std::string> ChildProcess::WaitForLine(const std::string& needle, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    auto line = NextLine(std::chrono::milliseconds(MillisecondsLeft(deadline)));
    if (!line) return std::nullopt;
    if (line->find(needle) != std::string::npos) return line;
    if (Clock::now() >= deadline) return std::nullopt;
  }
}

void ChildProcess::Record(int wait_status) {
  if (WIFEXITED(wait_status)) {
    exit_status_ = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    exit_status_ = 128 + WTERMSIG(wait_status);
  } else {
    exit_status_ = -1;
  }
  pid_ = -1;
}

int ChildProcess::Stop(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return exit_status_;
  ::kill(pid_, SIGTERM);
  return Reap(timeout);
}

void ChildProcess::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  if (::waitpid(pid_, &status, 0) == pid_) {
    Record(status);
  } else {
    pid_ = -1;
  }
}

int ChildProcess::Reap(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return exit_status_;
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      Record(status);
      return exit_status_;
    }
    if (Clock::now() >= deadline) {
      Kill();
      exit_status_ = -1;
      return -1;
    }
    // Keep what it still prints (a test may read it later) and notice its
    // exit by EOF; once stdout is closed, ask again in a short while.
    if (stdout_fd_ >= 0) {
      ReadMore(std::min(MillisecondsLeft(deadline), 50));
    } else {
      ::poll(nullptr, 0, std::min(MillisecondsLeft(deadline), 10));
    }
  }
}

}  // namespace estuary::testing
