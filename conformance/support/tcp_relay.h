#pragma once
// TcpRelay: a loopback TCP relay between a client library and a broker, so
// a test can fail the network under a client it does not control (Paho
// hides its socket): Cut() closes every relayed connection at once, as a
// dropped network would, without either side sending DISCONNECT.
//
// Listens on 127.0.0.1 port 0; each accepted connection is joined to a new
// connection to the target. One background thread moves the bytes (poll,
// no sleeps). Test support only.
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace estuary::testing {

class TcpRelay {
 public:
  // Null if the listener cannot be opened.
  static std::unique_ptr<TcpRelay> Start(const std::string& target_host, uint16_t target_port);
  ~TcpRelay();
  TcpRelay(const TcpRelay&) = delete;
  TcpRelay& operator=(const TcpRelay&) = delete;

  uint16_t port() const { return port_; }
  std::string uri() const { return "tcp://127.0.0.1:" + std::to_string(port_); }
  // Closes both sides of every relayed connection; new ones are still
  // accepted. Returns once the thread has closed them.
  void Cut();

 private:
  struct Pair {
    int client = -1;
    int server = -1;
  };
  TcpRelay() = default;
  void Run();
  void AcceptOne();
  bool Forward(int from, int to);
  void ClosePair(size_t index);
  void Wake(char command);

  std::string target_host_;
  uint16_t target_port_ = 0;
  uint16_t port_ = 0;
  int listen_fd_ = -1;
  int wake_read_ = -1;
  int wake_write_ = -1;
  std::vector<Pair> pairs_;  // owned by the thread
  std::thread thread_;
  std::mutex cut_mutex_;
  uint64_t cuts_requested_ = 0;
  uint64_t cuts_done_ = 0;
  std::condition_variable cut_done_;
};

}  // namespace estuary::testing
