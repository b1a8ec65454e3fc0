#include "conformance/balancer/lb_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "conformance/support/raw_client.h"

#ifndef ESTUARY_BIN_DIR
#error "ESTUARY_BIN_DIR must name the directory that holds estuary-lb"
#endif

namespace estuary::testing {
namespace {

using Clock = std::chrono::steady_clock;

int MillisecondsLeft(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

uint16_t PortOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return 0;
  return static_cast<uint16_t>(std::strtoul(address.c_str() + colon + 1, nullptr, 10));
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

std::string LbProcess::DefaultBinary() { return std::string(ESTUARY_BIN_DIR) + "/estuary-lb"; }

std::unique_ptr<LbProcess> LbProcess::Start(const std::vector<std::string>& flags, std::string* error,
                                            std::chrono::milliseconds timeout,
                                            const std::vector<std::string>& prefix, const std::string& binary) {
  std::vector<std::string> args = prefix;
  args.push_back(binary);
  args.insert(args.end(), flags.begin(), flags.end());
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
    if (error) *error = "fork failed";
    return nullptr;
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    if (::close_range(3, ~0U, 0) != 0) {
      for (int fd = 3; fd < 4096; ++fd) ::close(fd);
    }
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  std::unique_ptr<LbProcess> process(new LbProcess());
  process->pid_ = pid;
  process->stdout_fd_ = pipe_fds[0];
  auto line = process->NextLine(timeout);
  if (!line || !process->ParseReadyLine(*line)) {
    const int status = process->Stop(std::chrono::seconds(5));
    if (error) *error = "no ready line from estuary-lb (got '" + line.value_or("") + "', exit " + std::to_string(status) + ")";
    return nullptr;
  }
  return process;
}

LbProcess::~LbProcess() {
  if (pid_ > 0) Kill();
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
}

bool LbProcess::ParseReadyLine(const std::string& line) {
  const bool node = line.rfind("estuaryd ready ", 0) == 0;
  if (!node && line.rfind("estuary-lb ready ", 0) != 0) return false;
  ready_line_ = line;
  mqtt_port_ = PortOf(WordValue(line, "mqtt"));
  amqp_port_ = PortOf(WordValue(line, "amqp"));
  heartbeat_port_ = PortOf(WordValue(line, "heartbeat"));
  admin_port_ = PortOf(WordValue(line, "admin"));
  return mqtt_port_ != 0 && amqp_port_ != 0 && (node || heartbeat_port_ != 0);
}

std::string LbProcess::role() const { return WordValue(ready_line_, "role"); }

std::optional<std::string> LbProcess::NextLine(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const size_t newline = buffered_.find('\n');
    if (newline != std::string::npos) {
      std::string line = buffered_.substr(0, newline);
      buffered_.erase(0, newline + 1);
      return line;
    }
    if (stdout_fd_ < 0) return std::nullopt;
    pollfd poll_fd{stdout_fd_, POLLIN, 0};
    const int ready = ::poll(&poll_fd, 1, MillisecondsLeft(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return std::nullopt;
    char chunk[512];
    const ssize_t n = ::read(stdout_fd_, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    buffered_.append(chunk, size_t(n));
  }
}

std::optional<Clock::time_point> LbProcess::WaitForLine(const std::string& needle, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    auto line = NextLine(std::chrono::milliseconds(MillisecondsLeft(deadline)));
    if (!line) return std::nullopt;
    if (line->find(needle) != std::string::npos) return Clock::now();
  }
  return std::nullopt;
}

int LbProcess::Stop(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  return Reap(timeout);
}

void LbProcess::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

int LbProcess::Reap(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      pid_ = -1;
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
    }
    if (Clock::now() >= deadline) {
      Kill();
      return -1;
    }
    // Wait for the child's stdout to close (it exited) or the deadline.
    pollfd poll_fd{stdout_fd_, POLLIN, 0};
    if (stdout_fd_ >= 0 && ::poll(&poll_fd, 1, std::min(MillisecondsLeft(deadline), 50)) > 0) {
      char chunk[512];
      const ssize_t n = ::read(stdout_fd_, chunk, sizeof(chunk));
      if (n > 0) {
        buffered_.append(chunk, size_t(n));
      } else if (n == 0) {
        ::close(stdout_fd_);
        stdout_fd_ = -1;
      }
    } else if (stdout_fd_ < 0) {
      // Stdout already closed: waitpid with a bounded blocking wait.
      ::poll(nullptr, 0, std::min(MillisecondsLeft(deadline), 10));
    }
  }
}

HttpReply HttpRequest(uint16_t port, const std::string& method, const std::string& path) {
  HttpReply reply;
  const int fd = ConnectTcp("127.0.0.1", port);
  if (fd < 0) return reply;
  const std::string request = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" +
                              "Content-Length: 0\r\n\r\n";
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string received;
  char chunk[4096];
  for (;;) {
    pollfd poll_fd{fd, POLLIN, 0};
    if (::poll(&poll_fd, 1, 5000) <= 0) break;
    const ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n <= 0) break;
    received.append(chunk, size_t(n));
  }
  ::close(fd);
  if (received.rfind("HTTP/1.1 ", 0) != 0) return reply;
  reply.status = std::atoi(received.c_str() + 9);
  const size_t body = received.find("\r\n\r\n");
  if (body != std::string::npos) reply.body = received.substr(body + 4);
  return reply;
}

}  // namespace estuary::testing
