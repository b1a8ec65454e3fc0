#pragma once
// ProxyConnection: one client connection through estuary-lb, from accept to
// close: read the client's first bytes (the MQTT CONNECT, bounded in size
// and time), ask the host for a node, dial it (trying other nodes if the dial
// fails), send the PROXY v2 header and the bytes read so far, then copy
// bytes both ways.
//
// Copying: each direction has its own bounded write queue; while the queue
// towards one side is above the high watermark the other side is not read
// (backpressure both ways, memory per connection <= 2 * (high + 64 KiB)).
// An EOF from one side is passed on as a shutdown of the other side's
// write half once its queue is written; the other direction goes on (half
// close). The connection ends when both directions have ended; a reset or
// error on either side resets the other.
//
// Ownership (STYLE.md, libuv): each side's uv_tcp_t lives in its own heap
// object freed in its close callback; the ProxyConnection is freed after the
// last of them closed. Created and used on one UvLoop's thread only; the
// host is told once through on_finished (not during loop shutdown).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "balancer/node_table.h"
#include "io/uv/uv_loop.h"

namespace estuary::balancer {

struct ProxyOptions {
  size_t high_watermark = 256 * 1024;
  size_t low_watermark = 64 * 1024;
  uint32_t connect_max_bytes = 256 * 1024;  // MQTT CONNECT bound
  int64_t connect_timeout_ms = 5000;        // time allowed for the whole CONNECT
  int64_t dial_timeout_ms = 2000;
  uint32_t dial_attempts = 3;               // nodes tried before giving up
  bool send_proxy_header = true;
};

class ProxyConnection;

struct ProxyStats {
  uint64_t bytes_to_node = 0;
  uint64_t bytes_to_client = 0;
  std::string node;  // admin address of the chosen node, "" if none
  std::string client;
  std::string outcome;  // "closed", "reset", "no node", "dropped: ...", ...
};

struct ProxyHost {
  // A node for this connection; `exclude` holds nodes already tried.
  std::function<std::optional<Choice>(Service, std::string_view client_id, const std::vector<std::string>& exclude)>
      choose;
  std::function<void(const std::string& admin, int uv_status)> dial_failed;
  std::function<void(ProxyConnection*, const ProxyStats&)> finished;
};

class ProxyConnection final : public io::UvLoop::HandleOwner {
 public:
  // Adopts `fd` (an accepted client socket); closes it on failure. The
  // object manages its own lifetime from here on: the returned pointer is
  // valid until host.finished is called with it.
  static ProxyConnection* Start(io::UvLoop& loop, int fd, Service service, const ProxyOptions& options,
                    const ProxyHost& host);

  void CloseForShutdown() override;
  // Resets both sides (used when the balancer steps down or stops).
  void Abort();

 private:
  struct Side;
  enum class Phase { kPeeking, kDialing, kSplicing, kEnding };

  ProxyConnection(io::UvLoop& loop, Service service, const ProxyOptions& options, const ProxyHost& host);
  ~ProxyConnection();
  bool OpenClient(int fd);
  void OnClientBytes(std::string_view bytes);
  void Dial();
  void OnDialed(int status);
  void StartSplicing();

  void StartReading(Side& side);
  void StopReading(Side& side);
  void OnRead(Side& from, ssize_t nread, const uv_buf_t* buf);
  void Forward(Side& to, std::string_view bytes);
  void IssueWrite(Side& to);
  void OnWriteDone(Side& to, int status);
  void OnEof(Side& from);
  void MaybeShutdown(Side& to);
  void OnShutdownDone(Side& to, int status);
  void MaybeFinish();

  void End(std::string outcome, bool reset);
  void CloseSide(Side* side, bool reset);
  void OnSideClosed(Side* side);
  void CancelTimer();

  Side* Other(Side& side) { return &side == client_ ? node_ : client_; }

  io::UvLoop& loop_;
  Service service_;
  ProxyOptions options_;
  ProxyHost host_;
  Phase phase_ = Phase::kPeeking;
  Side* client_ = nullptr;
  Side* node_ = nullptr;
  int open_sides_ = 0;
  bool notify_ = true;
  std::string initial_;  // client bytes read before the node was reached
  std::string client_id_;
  std::string proxy_header_;
  std::vector<std::string> tried_;
  io::TimerId timer_ = 0;
  ProxyStats stats_;
};

}  // namespace estuary::balancer
