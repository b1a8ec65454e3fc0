#pragma once
// LbProcess: a real estuary-lb started as a child process for tests. Reads
// its ready line (with a deadline) for the bound ports, then keeps its
// stdout for the role lines (`estuary-lb role=active epoch=2`). Stop()
// sends SIGTERM and returns the exit status; Kill() is kill -9. The child
// dies with the test (PR_SET_PDEATHSIG). Test support only; one thread.
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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
  std::optional<std::string> NextLine(std::chrono::milliseconds timeout);
  // Waits for a line containing `needle`; returns when it came, or nullopt.
  std::optional<std::chrono::steady_clock::time_point> WaitForLine(const std::string& needle,
                                                                   std::chrono::milliseconds timeout);
  int Stop(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  void Kill();  // SIGKILL and reap

  const std::string& ready_line() const { return ready_line_; }
  std::string role() const;  // from the ready line
  uint16_t mqtt_port() const { return mqtt_port_; }
  uint16_t amqp_port() const { return amqp_port_; }
  uint16_t heartbeat_port() const { return heartbeat_port_; }
  uint16_t admin_port() const { return admin_port_; }
  pid_t pid() const { return pid_; }

 private:
  LbProcess() = default;
  bool ParseReadyLine(const std::string& line);
  int Reap(std::chrono::milliseconds timeout);

  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string buffered_;
  std::string ready_line_;
  uint16_t mqtt_port_ = 0;
  uint16_t amqp_port_ = 0;
  uint16_t heartbeat_port_ = 0;
  uint16_t admin_port_ = 0;
};

// "value" of `key=value` in a line of words, or "".
std::string WordValue(const std::string& line, const std::string& key);

// One HTTP request with a method (POST /api/drain ...) on loopback.
struct HttpReply {
  int status = 0;
  std::string body;
};
HttpReply HttpRequest(uint16_t port, const std::string& method, const std::string& path);

}  // namespace estuary::testing
