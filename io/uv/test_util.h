#pragma once
// Helpers for io/uv tests: run a loop until a condition holds (with a
// deadline, never a sleep), a loop on its own thread, and a blocking
// socket client for driving servers from a helper thread.
#include <sys/socket.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "io/uv/uv_loop.h"

namespace estuary::io::testing {

// Runs `loop` on this thread until `done()` or `timeout_ms` passed.
// Returns done(). Wake-ups come from the loop's own events; conditions set
// by other threads should arrive through the mailbox.
bool RunUntil(UvLoop& loop, const std::function<bool()>& done, int64_t timeout_ms = 10'000);

// A UvLoop created, run and destroyed on its own thread.
class LoopThread {
 public:
  LoopThread();
  ~LoopThread();  // stops the loop and joins
  // Runs `fn` on the loop thread and waits for it to return.
  void RunSync(std::function<void(UvLoop&)> fn);
  UvLoop& loop() { return *loop_; }

 private:
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable ready_;
  UvLoop* loop_ = nullptr;
};

// A blocking TCP client socket with receive timeouts, for helper threads.
class BlockingClient {
 public:
  explicit BlockingClient(uint16_t port, int receive_timeout_ms = 10'000);
  ~BlockingClient();
  bool connected() const { return fd_ >= 0; }
  bool SendAll(std::string_view bytes);
  void ShutdownWrite();
  // Reads until EOF, error or timeout; returns what arrived.
  std::string ReadToEnd();
  // Reads until `needle` was seen (or EOF/timeout); returns everything read.
  std::string ReadUntil(std::string_view needle);
  // Reads until `done(everything read so far)` (or EOF/timeout).
  std::string ReadUntil(const std::function<bool(const std::string&)>& done);
  // True once the peer closed (EOF or reset) within the timeout.
  bool WaitForClose();
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

}  // namespace estuary::io::testing
