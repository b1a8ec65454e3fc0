#include "conformance/support/broker_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <sstream>

#ifndef ESTUARY_BIN_DIR
#error "ESTUARY_BIN_DIR must name the directory that holds estuaryd"
#endif

namespace estuary::testing {
namespace {

using Clock = std::chrono::steady_clock;

int MillisecondsLeft(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

// Reads from `fd` until a newline or EOF or the deadline. Returns the line
// without its newline; `eof` tells whether the writer went away.
std::string ReadLine(int fd, Clock::time_point deadline, bool& eof) {
  std::string line;
  eof = false;
  for (;;) {
    pollfd poll_fd{fd, POLLIN, 0};
    const int ready = ::poll(&poll_fd, 1, MillisecondsLeft(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return line;
    char c = 0;
    const ssize_t n = ::read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      eof = true;
      return line;
    }
    if (c == '\n') return line;
    line.push_back(c);
  }
}

bool ParseEndpoint(const std::string& line, const std::string& key, std::string& host, uint16_t& port) {
  std::istringstream words(line);
  std::string word;
  while (words >> word) {
    if (word.rfind(key + "=", 0) != 0) continue;
    const std::string value = word.substr(key.size() + 1);
    const size_t colon = value.rfind(':');
    if (colon == std::string::npos) return false;
    host = value.substr(0, colon);
    const long number = std::strtol(value.c_str() + colon + 1, nullptr, 10);
    if (number <= 0 || number > 65535) return false;
    port = static_cast<uint16_t>(number);
    return true;
  }
  return false;
}

int DecodeStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

std::string BrokerProcess::DefaultBinary() { return std::string(ESTUARY_BIN_DIR) + "/estuaryd"; }

std::unique_ptr<BrokerProcess> BrokerProcess::Start(const std::vector<std::string>& extra_flags,
                                                    std::string* error, std::chrono::milliseconds timeout,
                                                    const std::string& binary) {
  std::vector<std::string> args = {binary,         "--mqtt",      "127.0.0.1:0", "--amqp",
                                   "127.0.0.1:0",  "--admin",     "127.0.0.1:0", "--cluster",
                                   "127.0.0.1:0"};
  args.insert(args.end(), extra_flags.begin(), extra_flags.end());
  // Everything the child needs is built before fork: after it, only
  // async-signal-safe calls.
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    if (error) *error = "pipe2 failed";
    return nullptr;
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    if (error) *error = "fork failed";
    return nullptr;
  }
  if (pid == 0) {
    // The broker must not outlive a crashed test.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(pipe_fds[1], STDOUT_FILENO);  // dup2 clears O_CLOEXEC on the copy
    // Sockets the test holds (client libraries do not all set CLOEXEC) must
    // not stay open in the broker, or closing them would not end a session.
    if (::close_range(3, ~0U, 0) != 0) {
      for (int fd = 3; fd < 4096; ++fd) ::close(fd);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(pipe_fds[1]);

  std::unique_ptr<BrokerProcess> broker(new BrokerProcess());
  broker->pid_ = pid;
  broker->stdout_fd_ = pipe_fds[0];
  bool eof = false;
  const std::string line = ReadLine(broker->stdout_fd_, Clock::now() + timeout, eof);
  if (!broker->ParseReadyLine(line)) {
    const int status = broker->Stop(std::chrono::seconds(5));
    if (error) {
      *error = "no ready line from " + binary + " (got '" + line + "', exit status " +
               std::to_string(status) + ")";
    }
    return nullptr;
  }
  return broker;
}

BrokerProcess::~BrokerProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
}

bool BrokerProcess::ParseReadyLine(const std::string& line) {
  if (line.rfind("estuaryd ready ", 0) != 0) return false;
  ready_line_ = line;
  std::string admin_host;
  std::string amqp_host;
  return ParseEndpoint(line, "mqtt", host_, mqtt_port_) && ParseEndpoint(line, "admin", admin_host, admin_port_) &&
         ParseEndpoint(line, "amqp", amqp_host, amqp_port_);
}

std::string BrokerProcess::mqtt_uri() const { return "tcp://" + host_ + ":" + std::to_string(mqtt_port_); }

int BrokerProcess::Stop(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return exit_status_;
  ::kill(pid_, SIGTERM);
  exit_status_ = Reap(timeout);
  return exit_status_;
}

int BrokerProcess::Reap(std::chrono::milliseconds timeout) {
  // The child holds the only write end of the pipe: EOF means it exited.
  const auto deadline = Clock::now() + timeout;
  bool exited = stdout_fd_ < 0;
  while (!exited) {
    pollfd poll_fd{stdout_fd_, POLLIN, 0};
    const int ready = ::poll(&poll_fd, 1, MillisecondsLeft(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    char chunk[256];
    const ssize_t n = ::read(stdout_fd_, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) exited = true;
  }
  int status = 0;
  int result = -1;
  if (exited && ::waitpid(pid_, &status, 0) == pid_) {
    result = DecodeStatus(status);
  } else {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
  }
  pid_ = -1;
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
  stdout_fd_ = -1;
  return result;
}

}  // namespace estuary::testing
