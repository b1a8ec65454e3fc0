#pragma once
// LbProcess: a real estuary-lb started as a child process for tests. Reads
// its ready line (with a deadline) for the bound ports, then keeps its
// stdout for the role lines (`estuary-lb role=active epoch=2 silent_ms=1002`). Stop()
// sends SIGTERM and returns the exit status; Kill() is kill -9. The child
// dies with the test (ChildProcess does the process work). Test support
// only; one thread.
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "conformance/support/child_process.h"
#include "conformance/support/raw_client.h"

namespace estuary::testing {

class LbProcess {
 public:
  static std::string DefaultBinary();  // ESTUARY_BIN_DIR/estuary-lb

  // Runs `prefix` + binary + flags (prefix: e.g. {"ip", "netns", "exec", "ns"}).
  // `binary` may also be estuaryd (its ready line gives mqtt, amqp, admin).
  static std::unique_ptr<LbProcess> Start(const std::vector<std::string>& flags, std::string* error,
                                          std::chrono::milliseconds timeout = std::chrono::seconds(10),
                                          const std::vector<std::string>& prefix = {},
                                          const std::string& binary = DefaultBinary());
  ~LbProcess();
  LbProcess(const LbProcess&) = delete;
  LbProcess& operator=(const LbProcess&) = delete;

  // The next stdout line within `timeout`, or nullopt.
  std::optional<std::string> NextLine(std::chrono::milliseconds timeout) { return child_->NextLine(timeout); }
  // Waits for a line containing `needle`; returns when it came (and the
  // line in `line` if given), or nullopt.
  std::optional<std::chrono::steady_clock::time_point> WaitForLine(const std::string& needle,
                                                                   std::chrono::milliseconds timeout,
                                                                   std::string* line = nullptr);
  int Stop(std::chrono::milliseconds timeout = std::chrono::seconds(10)) { return child_->Stop(timeout); }
  void Kill() { child_->Kill(); }  // SIGKILL and reap

  const std::string& ready_line() const { return ready_line_; }
  std::string role() const { return WordValue(ready_line_, "role"); }  // from the ready line
  uint16_t mqtt_port() const { return mqtt_port_; }
  uint16_t amqp_port() const { return amqp_port_; }
  uint16_t heartbeat_port() const { return heartbeat_port_; }
  uint16_t admin_port() const { return admin_port_; }
  pid_t pid() const { return child_->pid(); }

 private:
  LbProcess() = default;
  bool ParseReadyLine(const std::string& line);

  std::unique_ptr<ChildProcess> child_;
  std::string ready_line_;
  uint16_t mqtt_port_ = 0;
  uint16_t amqp_port_ = 0;
  uint16_t heartbeat_port_ = 0;
  uint16_t admin_port_ = 0;
};

// One HTTP request with a method (POST /api/drain ...) on loopback.
using HttpReply = HttpResult;
inline HttpReply HttpRequest(uint16_t port, const std::string& method, const std::string& path) {
  return HttpRequest("127.0.0.1", port, method, path);
}

}  // namespace estuary::testing
