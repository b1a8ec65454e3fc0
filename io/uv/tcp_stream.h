#pragma once
// TcpStream: the io::Stream a frontend session writes to, over a
// TcpConnection. Output appended to output() goes out with the
// connection's once-per-iteration flush; PauseReading/ResumeReading are the
// reader-side backpressure. Holds a reference, so the connection outlives
// the session that owns the stream; the owner still wires the connection's
// handlers (on_data, on_close, on_drain) to the session.
// Owned by the connection's shard, like the connection.
#include <memory>
#include <string>
#include <utility>

#include "io/stream.h"
#include "io/uv/tcp.h"

namespace estuary::io {

class TcpStream final : public Stream {
 public:
  explicit TcpStream(std::shared_ptr<TcpConnection> connection) : connection_(std::move(connection)) {}

  std::string& output() override { return connection_->output_buffer(); }
  void Flush() override { connection_->MarkDirty(); }
  size_t queued_bytes() const override { return connection_->queued_bytes(); }
  void Close() override { connection_->Close(); }
  void PauseReading() override { connection_->StopReading(); }
  void ResumeReading() override { connection_->StartReading(); }
  std::string peer_address() const override { return connection_->peer_address(); }

  TcpConnection& connection() { return *connection_; }

 private:
  std::shared_ptr<TcpConnection> connection_;
};

}  // namespace estuary::io
