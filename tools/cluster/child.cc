#include "tools/cluster/child.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

namespace estuary::launcher {
namespace {

int MillisecondsLeft(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

int DecodeStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
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

std::unique_ptr<Child> Child::Spawn(std::string name, const std::vector<std::string>& argv_in,
                                    const std::string& log_path, std::string* error,
                                    const std::string& netns_path) {
  std::vector<std::string> args = argv_in;
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);

  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    if (error) *error = "cannot open " + log_path + ": " + std::strerror(errno);
    return nullptr;
  }
  // Opened here: the child may only make async-signal-safe calls.
  const int netns_fd = netns_path.empty() ? -1 : ::open(netns_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (!netns_path.empty() && netns_fd < 0) {
    ::close(log_fd);
    if (error) *error = "cannot open " + netns_path + ": " + std::strerror(errno);
    return nullptr;
  }
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    ::close(log_fd);
    if (netns_fd >= 0) ::close(netns_fd);
    if (error) *error = std::string("pipe2: ") + std::strerror(errno);
    return nullptr;
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log_fd);
    if (netns_fd >= 0) ::close(netns_fd);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    if (error) *error = std::string("fork: ") + std::strerror(errno);
    return nullptr;
  }
  if (pid == 0) {
    // Only async-signal-safe calls from here to exec.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    if (netns_fd >= 0 && ::setns(netns_fd, CLONE_NEWNET) != 0) ::_exit(126);
    ::close_range(3, ~0U, 0);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  if (netns_fd >= 0) ::close(netns_fd);
  ::fcntl(pipe_fds[0], F_SETFL, ::fcntl(pipe_fds[0], F_GETFL) | O_NONBLOCK);
  std::unique_ptr<Child> child(new Child());
  child->name_ = std::move(name);
  child->log_path_ = log_path;
  child->pid_ = pid;
  child->last_pid_ = pid;
  child->stdout_fd_ = pipe_fds[0];
  child->log_fd_ = log_fd;
  return child;
}

Child::~Child() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
  if (log_fd_ >= 0) ::close(log_fd_);
}

void Child::Log(const std::string& text) const {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(log_fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += size_t(n);
  }
}

bool Child::Pump() {
  if (!buffered_.empty()) {
    Log(buffered_);
    buffered_.clear();
  }
  if (stdout_fd_ < 0) return false;
  char chunk[4096];
  for (;;) {
    const ssize_t n = ::read(stdout_fd_, chunk, sizeof(chunk));
    if (n > 0) {
      Log(std::string(chunk, size_t(n)));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    ::close(stdout_fd_);
    stdout_fd_ = -1;
    return false;
  }
}

std::optional<std::string> Child::WaitForLine(const std::string& prefix, Clock::time_point deadline) {
  for (;;) {
    size_t newline;
    while ((newline = buffered_.find('\n')) != std::string::npos) {
      std::string line = buffered_.substr(0, newline);
      buffered_.erase(0, newline + 1);
      Log(line + "\n");
      output_ += line + "\n";
      if (line.rfind(prefix, 0) == 0) return line;
    }
    if (stdout_fd_ < 0) return std::nullopt;
    pollfd poll_fd{stdout_fd_, POLLIN, 0};
    const int ready = ::poll(&poll_fd, 1, MillisecondsLeft(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return std::nullopt;
    char chunk[1024];
    const ssize_t n = ::read(stdout_fd_, chunk, sizeof(chunk));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      Log(buffered_);
      buffered_.clear();
      ::close(stdout_fd_);
      stdout_fd_ = -1;
      return std::nullopt;
    }
    buffered_.append(chunk, size_t(n));
  }
}

std::optional<int> Child::WaitExit(Clock::time_point deadline) {
  while (stdout_fd_ >= 0 && Clock::now() < deadline) WaitForLine(std::string(1, '\0'), deadline);
  if (stdout_fd_ >= 0) return std::nullopt;
  if (pid_ > 0) {
    int status = 0;
    if (::waitpid(pid_, &status, 0) == pid_) exit_status_ = DecodeStatus(status);
    pid_ = -1;
  }
  return exit_status_;
}

void Child::Signal(int signal_number) const {
  if (pid_ > 0) ::kill(pid_, signal_number);
}

std::optional<int> Child::TryReap() {
  if (pid_ <= 0) return exit_status_;
  int status = 0;
  const pid_t done = ::waitpid(pid_, &status, WNOHANG);
  if (done != pid_) return std::nullopt;
  pid_ = -1;
  exit_status_ = DecodeStatus(status);
  Pump();
  return exit_status_;
}

}  // namespace estuary::launcher
