#pragma once
// Signals and the pid file of estuary-cluster. SIGINT, SIGTERM and SIGHUP
// ask the launcher to stop; SIGCHLD wakes it so that it reaps at once. The
// handlers only set a flag and write a byte to a self-pipe, which the
// launcher polls. One thread.
#include <sys/types.h>

#include <chrono>
#include <string>

namespace estuary::launcher {

bool InstallSignalHandlers();
bool StopRequested();
int SignalFd();      // read end of the self-pipe
void DrainSignals();
// Waits until a signal arrives or `timeout` passes.
void WaitForSignal(std::chrono::milliseconds timeout);

// The pid in `path`, or 0.
pid_t ReadPidFile(const std::string& path);
// True when `pid` runs an estuary-cluster program (not a recycled pid).
bool IsLauncher(pid_t pid);

}  // namespace estuary::launcher
