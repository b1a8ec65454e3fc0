#pragma once
// BrokerProcess: a real estuaryd started as a child process for tests that
// drive it over the wire. Every listener binds port 0; the endpoints come
// from the ready line, read with a deadline. Stop() sends SIGTERM to the
// child's pid and returns its exit status, so a test can assert a clean
// shutdown. The child is killed (SIGKILL) if the test process dies or the
// object is destroyed while it still runs (ChildProcess does the process
// work). Test support only; one thread.
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "conformance/support/child_process.h"

namespace estuary::testing {

class BrokerProcess {
 public:
  // The estuaryd built next to the tests (ESTUARY_BIN_DIR/estuaryd).
  static std::string DefaultBinary();

  // Starts `binary` with `--mqtt/--amqp/--admin/--cluster 127.0.0.1:0`
  // followed by `extra_flags` (later flags win), and waits up to `timeout`
  // for the ready line. Returns null and fills `error` on failure.
  static std::unique_ptr<BrokerProcess> Start(const std::vector<std::string>& extra_flags,
                                              std::string* error,
                                              std::chrono::milliseconds timeout = std::chrono::seconds(10),
                                              const std::string& binary = DefaultBinary());

  ~BrokerProcess();
  BrokerProcess(const BrokerProcess&) = delete;
  BrokerProcess& operator=(const BrokerProcess&) = delete;

  // SIGTERM, then waits up to `timeout` for the child to exit. Returns the
  // exit status (0..255), 128+signal if a signal ended it, or -1 if it did
  // not exit in time (it is then killed). Safe to call twice.
  int Stop(std::chrono::milliseconds timeout = std::chrono::seconds(10));

  const std::string& host() const { return host_; }
  uint16_t mqtt_port() const { return mqtt_port_; }
  uint16_t admin_port() const { return admin_port_; }
  uint16_t amqp_port() const { return amqp_port_; }
  // "tcp://127.0.0.1:PORT", as Paho wants it.
  std::string mqtt_uri() const;
  const std::string& ready_line() const { return ready_line_; }
  pid_t pid() const { return child_->pid(); }

 private:
  BrokerProcess() = default;
  bool ParseReadyLine(const std::string& line);

  std::unique_ptr<ChildProcess> child_;
  std::string host_ = "127.0.0.1";
  uint16_t mqtt_port_ = 0;
  uint16_t admin_port_ = 0;
  uint16_t amqp_port_ = 0;
  std::string ready_line_;
};

}  // namespace estuary::testing
