#include "tools/cluster/signals.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <iterator>

namespace estuary::launcher {
namespace {

int g_pipe[2] = {-1, -1};
volatile sig_atomic_t g_stop = 0;

void OnSignal(int signal_number) {
  const int saved = errno;
  if (signal_number != SIGCHLD) g_stop = signal_number;
  const char byte = 1;
  [[maybe_unused]] const ssize_t n = ::write(g_pipe[1], &byte, 1);
  errno = saved;
}

}  // namespace

bool InstallSignalHandlers() {
  if (g_pipe[0] < 0 && ::pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return false;
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  for (int signal_number : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) {
    if (::sigaction(signal_number, &action, nullptr) != 0) return false;
  }
  ::signal(SIGPIPE, SIG_IGN);
  return true;
}

bool StopRequested() { return g_stop != 0; }

int SignalFd() { return g_pipe[0]; }

void DrainSignals() {
  char bytes[64];
  while (::read(g_pipe[0], bytes, sizeof(bytes)) > 0) {
  }
}

void WaitForSignal(std::chrono::milliseconds timeout) {
  pollfd poll_fd{g_pipe[0], POLLIN, 0};
  ::poll(&poll_fd, 1, int(timeout.count()));
  DrainSignals();
}

pid_t ReadPidFile(const std::string& path) {
  std::ifstream in(path);
  long pid = 0;
  if (!(in >> pid) || pid <= 0) return 0;
  return pid_t(pid);
}

bool IsLauncher(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
  const std::string command((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string program = command.substr(0, command.find('\0'));
  return program.find("estuary-cluster") != std::string::npos;
}

}  // namespace estuary::launcher
