#pragma once
// Stream: the byte pipe a protocol session writes to. A frontend session
// (MQTT, AMQP) holds a Stream&, never a socket, so tests drive it with a
// MemoryStream and the server with a TCP connection.
// Owned by the connection's shard; not thread-safe.
#include <cstddef>
#include <string>

namespace estuary::io {

class Stream {
 public:
  virtual ~Stream() = default;
  // The pending output; append encoded bytes, then call Flush() (which may
  // defer the actual write to the end of the loop iteration).
  virtual std::string& output() = 0;
  virtual void Flush() = 0;
  // Bytes accepted but not yet written to the peer.
  virtual size_t queued_bytes() const = 0;
  // Flushes what is queued, then closes. Idempotent.
  virtual void Close() = 0;
  virtual void PauseReading() = 0;
  virtual void ResumeReading() = 0;
  virtual std::string peer_address() const = 0;
};

// An in-memory Stream for tests: output accumulates in `written`.
class MemoryStream final : public Stream {
 public:
  std::string& output() override { return pending_; }
  void Flush() override {
    written += pending_;
    pending_.clear();
  }
  size_t queued_bytes() const override { return pending_.size() + backlog; }
  void Close() override {
    Flush();
    closed = true;
  }
  void PauseReading() override { reading = false; }
  void ResumeReading() override { reading = true; }
  std::string peer_address() const override { return "memory:0"; }

  std::string written;
  size_t backlog = 0;  // pretend bytes stuck in the socket
  bool closed = false;
  bool reading = true;

 private:
  std::string pending_;
};

}  // namespace estuary::io
