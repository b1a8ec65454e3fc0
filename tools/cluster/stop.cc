// `estuary-cluster stop`: SIGTERM to the launcher named in DIR/cluster.pid,
// then a wait (on a pidfd, so no polling loop) until it has exited.
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>

#include "tools/cluster/launcher.h"
#include "tools/cluster/netns.h"
#include "tools/cluster/signals.h"

namespace estuary::launcher {

int RunStop(const std::string& dir, uint32_t timeout_ms) {
  const std::string pid_file = dir + "/cluster.pid";
  const pid_t pid = ReadPidFile(pid_file);
  if (pid <= 0 || !IsLauncher(pid)) {
    // A launcher that died (SIGKILL, a crash) leaves its namespaces listed.
    std::string report;
    const bool leftovers = ::access((dir + "/netns.list").c_str(), F_OK) == 0;
    if (leftovers && HostNetwork::RemoveRecorded(dir + "/netns.list", &report)) {
      std::printf("estuary-cluster: no launcher runs in %s; removed what its netns.list named:%s\n", dir.c_str(),
                  report.c_str());
      return 0;
    }
    if (leftovers) std::fprintf(stderr, "estuary-cluster: %s/netns.list:%s\n", dir.c_str(), report.c_str());
    std::fprintf(stderr, "estuary-cluster: no cluster runs in %s (no live launcher in %s)\n", dir.c_str(),
                 pid_file.c_str());
    return 1;
  }
  const int pid_fd = int(::syscall(SYS_pidfd_open, pid, 0));
  if (::kill(pid, SIGTERM) != 0) {
    std::fprintf(stderr, "estuary-cluster: cannot signal launcher pid %d\n", int(pid));
    return 1;
  }
  if (pid_fd >= 0) {
    pollfd poll_fd{pid_fd, POLLIN, 0};
    const int ready = ::poll(&poll_fd, 1, int(timeout_ms));
    ::close(pid_fd);
    if (ready <= 0) {
      std::fprintf(stderr, "estuary-cluster: launcher pid %d still runs after %u ms\n", int(pid), timeout_ms);
      return 1;
    }
  }
  std::printf("estuary-cluster: stopped the cluster in %s (launcher pid %d)\n", dir.c_str(), int(pid));
  return 0;
}

}  // namespace estuary::launcher
