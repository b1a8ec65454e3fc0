#pragma once
// ProxyGate: PROXY protocol v2 acceptance for a shard's listeners
// (--proxy-from, docs/balancer.md). A connection from a configured balancer
// address must begin with a PROXY v2 header; the gate reads exactly the
// header (the protocol bytes behind it stay in the socket), then passes the
// socket on with the client address the header carries. A connection from a
// trusted address without a valid header, or one that sends nothing within
// the timeout, is closed. Connections from other addresses pass through at
// once with no address ("" = use the socket's peer); a PROXY header from
// them reaches the protocol as garbage and is refused there (MQTT: the
// first byte 0x0D is no packet type; AMQP: no protocol header).
//
// Runs on one shard's loop; owns a uv_poll_t per connection being read,
// freed in its close callback.
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "io/uv/uv_loop.h"

namespace estuary::server {

class ProxyGate {
 public:
  using Next = std::function<void(int fd, std::string client_address)>;
  ProxyGate(io::UvLoop& loop, std::vector<std::string> trusted, int64_t timeout_ms = 5000);
  ~ProxyGate();
  ProxyGate(const ProxyGate&) = delete;
  ProxyGate& operator=(const ProxyGate&) = delete;

  // Takes an accepted socket; calls `next` (now or later, on this loop) or
  // closes it.
  void Accept(int fd, Next next);
  bool enabled() const { return !trusted_.empty(); }
  // Counters for /metrics (read from the admin thread).
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  uint64_t proxied() const { return proxied_.load(std::memory_order_relaxed); }

 private:
  struct Pending;
  bool Trusted(int fd) const;
  void OnReadable(Pending* pending);
  void Finish(Pending* pending, std::string client_address);

  io::UvLoop& loop_;
  std::vector<std::string> trusted_;
  int64_t timeout_ms_;
  std::vector<Pending*> pending_;
  std::atomic<uint64_t> refused_{0};  // no valid header from a balancer address
  std::atomic<uint64_t> proxied_{0};  // headers accepted
};

}  // namespace estuary::server
