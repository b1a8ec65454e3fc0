#pragma once
// TCP over libuv: a listener and connections with batched writes and
// backpressure.
//
// Ownership (STYLE.md, libuv): each TcpConnection owns its uv_tcp_t; states
// open -> closing -> closed; Close() is idempotent; the object is freed only
// after libuv's close callback (TcpConnection is held by shared_ptr and
// keeps itself alive until then). Callbacks run on the loop's thread.
#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "io/uv/uv_loop.h"
#include "model/result.h"

namespace estuary::io {

struct Endpoint {
  std::string host;
  uint16_t port = 0;
  std::string ToString() const;  // "host:port"
};
// Parses "HOST:PORT" ("[::1]:PORT" for IPv6).
Expected<Endpoint, std::string> ParseEndpoint(std::string_view text);

class TcpConnection : public std::enable_shared_from_this<TcpConnection> {
 public:
  struct Handlers {
    // Bytes arrived. The view is valid only during the call.
    std::function<void(std::string_view bytes)> on_data;
    // The peer closed, an error happened, or Close() completed. Called once.
    std::function<void(int uv_status)> on_close;
    // The write queue fell below the low watermark after being above the
    // high one (resume producing).
    std::function<void()> on_drain;
  };

  // Adopts an accepted socket fd (used by the listener and for handing a
  // socket to another shard). Starts reading once handlers are set.
  static std::shared_ptr<TcpConnection> Adopt(UvLoop& loop, int fd);
  // Connects to an endpoint (clients, tests, the benchmark); on_connected
  // receives 0 or a libuv error.
  static std::shared_ptr<TcpConnection> Connect(UvLoop& loop, const Endpoint& to,
                                                std::function<void(int status)> on_connected);

  void SetHandlers(Handlers handlers);
  void StartReading();
  void StopReading();  // backpressure on the reader side

  // Queues bytes; they are written in one uv_write per loop iteration.
  void Write(std::string_view bytes);
  // Direct access to the pending output buffer for encoders that append.
  std::string& output_buffer();
  void MarkDirty();  // schedule a flush after appending to output_buffer()
  size_t queued_bytes() const;  // buffered + in flight
  bool above_high_watermark() const;
  void set_watermarks(size_t low, size_t high);

  // Flushes what is queued, then closes. Safe to call twice.
  void Close();
  // Closes immediately with RST (SO_LINGER 0), discarding queued bytes.
  void Abort();
  bool is_open() const;

  // Detaches the socket for another loop: stops reading, dup()s the fd,
  // closes this handle. Returns the duplicate fd or -1.
  int Detach();

  std::string peer_address() const;  // "ip:port"
  ~TcpConnection();

 private:
  class State;
  explicit TcpConnection(UvLoop& loop);
  std::unique_ptr<State> state_;
};

class TcpListener {
 public:
  // Called with an accepted fd; the callee Adopt()s it (or closes it).
  using OnAccept = std::function<void(int fd)>;
  // Binds `at` (port 0 picks a free port) with SO_REUSEPORT so several
  // shards may listen on one port, and listens.
  static Expected<std::unique_ptr<TcpListener>, std::string> Listen(UvLoop& loop, const Endpoint& at,
                                                                    OnAccept on_accept);
  uint16_t port() const;
  void Close();
  ~TcpListener();

 private:
  class State;
  explicit TcpListener(UvLoop& loop);
  std::unique_ptr<State> state_;
};

}  // namespace estuary::io
