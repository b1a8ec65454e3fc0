#pragma once
// TCP over libuv: a listener and connections with batched writes and
// backpressure.
//
// Ownership (STYLE.md, libuv): each TcpConnection owns its uv_tcp_t; states
// open -> closing -> closed; Close() is idempotent; the object is freed only
// after libuv's close callback (TcpConnection is held by shared_ptr and
// keeps itself alive until then, so the owner may drop its pointer at any
// time, even inside a handler). Callbacks run on the loop's thread; every
// method must be called on it.
#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/expected.h"
#include "io/uv/uv_loop.h"

namespace estuary::io {

struct Endpoint {
  std::string host;
  uint16_t port = 0;
  std::string ToString() const;  // "host:port"
};
// Parses "HOST:PORT" ("[::1]:PORT" for IPv6). HOST is an IPv4 address,
// an IPv6 address in brackets, or a host name; errors quote the input.
Expected<Endpoint, std::string> ParseEndpoint(std::string_view text);

class TcpConnection : public std::enable_shared_from_this<TcpConnection> {
 public:
  // Default initialisers let callers name only the handlers they need
  // ({.on_data = ...}) without -Wmissing-field-initializers.
  struct Handlers {
    // Bytes arrived. The view is valid only during the call.
    std::function<void(std::string_view bytes)> on_data = nullptr;
    // The peer closed, an error happened, or Close() completed. Called once.
    std::function<void(int uv_status)> on_close = nullptr;
    // The write queue fell below the low watermark after being above the
    // high one (resume producing).
    std::function<void()> on_drain = nullptr;
  };

  // Adopts an accepted socket fd (used by the listener and for handing a
  // socket to another shard). Starts reading once handlers are set. If
  // libuv refuses the fd, closes it and returns nullptr.
  static std::shared_ptr<TcpConnection> Adopt(UvLoop& loop, int fd);
  // Connects to an endpoint (clients, tests, the benchmark); on_connected
  // receives 0 or a libuv error, once, never from inside Connect(). A host
  // name is resolved with uv_getaddrinfo. After an error on_close follows;
  // a Close() before the connection completes gives UV_ECANCELED.
  static std::shared_ptr<TcpConnection> Connect(UvLoop& loop, const Endpoint& to,
                                                std::function<void(int status)> on_connected);

  // May be called from inside a handler; the new handlers take effect when
  // that handler returns. Handlers are dropped after on_close.
  void SetHandlers(Handlers handlers);
  void StartReading();
  void StopReading();  // backpressure on the reader side

  // Queues bytes; they are written in one uv_write per loop iteration, and
  // while a write is in flight they wait for it. Dropped once closing.
  void Write(std::string_view bytes);
  // Direct access to the pending output buffer for encoders that append.
  std::string& output_buffer();
  void MarkDirty();  // schedule a flush after appending to output_buffer()
  size_t queued_bytes() const;  // buffered + in flight
  // True from exceeding the high watermark until on_drain (falling below
  // the low one). Defaults: low 64 KiB, high 1 MiB.
  bool above_high_watermark() const;
  void set_watermarks(size_t low, size_t high);

  // Flushes what is queued, then closes. Safe to call twice. After Close()
  // no on_data or on_drain is delivered; the queue is written, FIN sent,
  // and the handle closed once the peer's FIN arrives (incoming bytes are
  // discarded meanwhile) or the close timeout passed. on_close gets 0, or
  // UV_ETIMEDOUT (and the peer a RST) if the queue could not be written in
  // time, or UV_EOF when the peer closed first.
  void Close();
  void set_close_timeout(int64_t ms);  // default 5000
  // Closes immediately with RST (SO_LINGER 0), discarding queued bytes;
  // on_close gets 0.
  void Abort();
  bool is_open() const;  // connecting or open, and not closing

  // Detaches the socket for another loop: stops reading, dup()s the fd,
  // closes this handle. Returns the duplicate fd, or -1 (the connection is
  // left as it was) unless the connection is open and its queued output
  // could be written at once. Handlers are dropped; on_close is not called.
  int Detach();

  std::string peer_address() const;  // "ip:port", "" if never connected
  uint64_t writes_issued() const;    // uv_write calls so far
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
  // shards may listen on one port, and listens. A host name is resolved
  // with a blocking lookup (start-up only). Errors name the endpoint.
  static Expected<std::unique_ptr<TcpListener>, std::string> Listen(UvLoop& loop, const Endpoint& at,
                                                                    OnAccept on_accept);
  uint16_t port() const;
  // Stops accepting and closes the socket; safe to call twice, and from
  // inside on_accept.
  void Close();
  // accept() failures other than per-connection ones (EMFILE, ENFILE,
  // ENOBUFS, ...); each pauses accepting for a short back-off.
  uint64_t accept_failures() const;
  ~TcpListener();

 private:
  class State;
  TcpListener() = default;
  std::unique_ptr<State> state_;  // released to libuv's close callback on Close()
  uint16_t port_ = 0;
  uint64_t accept_failures_ = 0;  // updated by State
};

}  // namespace estuary::io
