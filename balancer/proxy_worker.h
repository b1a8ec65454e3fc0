#pragma once
// ProxyWorker: one thread of estuary-lb's data plane. It owns a UvLoop run
// by its own thread and every ProxyConnection handed to it; those
// connections (their sockets, buffers, timers) are touched by no other
// thread, so the byte-copy path takes no lock.
//
// The control plane (the Balancer, on the main loop) talks to a worker only
// through the methods below, which are thread-safe: each sends a function
// to the worker's mailbox. The node table reaches the worker as an
// immutable snapshot (`Publish`); the worker picks nodes from the newest
// one it received, and the connection counters inside it are shared
// atomics (node_table.h), so picks on several workers see each other.
//
// Lifetime: construct and Start() on the control thread; Stop() then the
// destructor (which joins) on the control thread. Connections still open at
// destruction are closed without calling back.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <vector>

#include "balancer/node_table.h"
#include "balancer/proxy_connection.h"
#include "io/uv/uv_loop.h"

namespace estuary::balancer {

// What a worker tells the control plane. Called on the worker's thread:
// implementations must hand the work to the control loop's mailbox.
struct WorkerEvents {
  std::function<void(const std::string& admin, int uv_status)> dial_failed;
};

class ProxyWorker {
 public:
  ProxyWorker(size_t index, WorkerEvents events);
  ~ProxyWorker();  // stops the loop if running, joins, closes what is left
  ProxyWorker(const ProxyWorker&) = delete;
  ProxyWorker& operator=(const ProxyWorker&) = delete;

  void Start();  // starts the thread

  // ---- thread-safe -------------------------------------------------------
  // The node table to pick from from now on.
  void Publish(std::shared_ptr<const NodeTable> nodes);
  // Hands over an accepted client socket; the worker owns it from here (it
  // is closed if the worker stops first). Counted in connections() at once.
  void Adopt(int fd, Service service, const ProxyOptions& options);
  // Resets every connection of this worker; `done` runs on the worker's
  // thread once all of them closed (at once if there were none).
  void AbortAll(std::function<void()> done);
  // Stops the loop; the destructor joins.
  void Stop();

  size_t index() const { return index_; }
  // Connections handed to this worker and not finished yet.
  uint64_t connections() const { return connections_.load(std::memory_order_relaxed); }
  uint64_t adopted_total() const { return adopted_total_.load(std::memory_order_relaxed); }
  // Connections closed before reaching a node (no node, garbage, silence).
  uint64_t refused_total() const { return refused_total_.load(std::memory_order_relaxed); }

 private:
  // Worker thread only.
  void StartConnection(int fd, Service service, const ProxyOptions& options);
  std::optional<Choice> Choose(Service service, std::string_view client_id, const std::vector<std::string>& exclude);
  void OnFinished(ProxyConnection* connection, const ProxyStats& stats);

  const size_t index_;
  WorkerEvents events_;
  std::unique_ptr<io::UvLoop> loop_;  // run by thread_; destroyed after the join
  std::thread thread_;
  std::atomic<uint64_t> connections_{0};
  std::atomic<uint64_t> adopted_total_{0};
  std::atomic<uint64_t> refused_total_{0};
  // Worker thread only:
  ProxyHost host_;
  std::shared_ptr<const NodeTable> nodes_;
  std::unordered_set<ProxyConnection*> open_;
  std::vector<std::function<void()>> on_idle_;  // AbortAll callbacks waiting for open_ to empty
  size_t rotation_ = 0;
};

}  // namespace estuary::balancer
