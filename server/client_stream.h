#pragma once
// ClientStream: the io::Stream a frontend session writes to, over a client's
// socket: TcpStream (clear text), TlsStream (server/tls_stream.h) or
// WebSocketStream over either (server/ws_stream.h). Besides
// io::Stream it carries what the shard needs to run and move a connection:
// handlers for plaintext arriving, Abort, and Detach (the socket, and over
// TLS the session, for another shard's loop). Owned by the shard that owns
// the connection; not thread-safe.
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "io/stream.h"
#include "io/tls/tls_session.h"
#include "io/ws/websocket_session.h"
#include "io/uv/tcp.h"
#include "server/connection_guard.h"

namespace estuary::server {

class ClientStream : public io::Stream {
 public:
  // on_data receives plaintext; on_close and on_drain as TcpConnection's.
  using Handlers = io::TcpConnection::Handlers;
  virtual void SetHandlers(Handlers handlers) = 0;
  // Closes at once with RST, dropping queued output.
  virtual void Abort() = 0;
  // The connection for another loop: the duplicated socket (-1: it could
  // not be moved now, the stream is as it was) and the layers above it:
  // over TLS its session, over WebSocket its framing state (both, in that
  // order from the socket, for --mqtt-wss and --amqp-wss).
  struct Detached {
    int fd = -1;
    std::shared_ptr<io::TlsSession> tls;
    std::shared_ptr<io::WebSocketSession> ws;
  };
  virtual Detached Detach() = 0;
  virtual bool encrypted() const { return false; }
  // The verified client certificate's subject CN (TLS only).
  virtual std::optional<std::string> certificate_identity() const { return std::nullopt; }

  std::string peer_address() const override {
    return client_address_.empty() ? socket_address() : client_address_;
  }
  // The client behind a balancer (from its PROXY v2 header).
  void set_client_address(std::string address) { client_address_ = std::move(address); }
  const std::string& client_address() const { return client_address_; }
  // The abuse limits' hold on this connection (server/connection_guard.h);
  // null when no limit is set. Handed on with the socket when it moves.
  void set_admission(ConnectionGuard::TicketPtr ticket) { admission_ = std::move(ticket); }
  const ConnectionGuard::TicketPtr& admission() const { return admission_; }

 protected:
  virtual std::string socket_address() const = 0;

 private:
  std::string client_address_;
  ConnectionGuard::TicketPtr admission_;
};

class TcpStream final : public ClientStream {
 public:
  explicit TcpStream(std::shared_ptr<io::TcpConnection> tcp) : tcp_(std::move(tcp)) {}
  std::string& output() override { return tcp_->output_buffer(); }
  void Flush() override { tcp_->MarkDirty(); }
  size_t queued_bytes() const override { return tcp_->queued_bytes(); }
  void Close() override { tcp_->Close(); }
  void PauseReading() override { tcp_->StopReading(); }
  void ResumeReading() override { tcp_->StartReading(); }
  void SetHandlers(Handlers handlers) override { tcp_->SetHandlers(std::move(handlers)); }
  void Abort() override { tcp_->Abort(); }
  Detached Detach() override { return {tcp_->Detach(), nullptr, nullptr}; }

 protected:
  std::string socket_address() const override { return tcp_->peer_address(); }

 private:
  std::shared_ptr<io::TcpConnection> tcp_;
};

}  // namespace estuary::server
