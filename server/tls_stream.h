#pragma once
// TlsStream: a ClientStream over TLS (io::TlsSession) on a TcpConnection.
// Ciphertext read from the socket is decrypted and handed to on_data as
// plaintext; plaintext written through output() is encrypted once per loop
// iteration (one pass over everything Flush()ed meanwhile, so a burst of
// small packets becomes few records), then written by the TcpConnection.
//
// A new connection starts with Handshake(): the session must finish within
// the timeout (--tls-handshake-timeout) or the socket is reset. A
// connection moved from another shard is built on the session it brings
// (docs/architecture.md "TLS connections and shards"). Loop thread only.
#include <functional>
#include <memory>
#include <string>

#include "io/uv/uv_loop.h"
#include "server/client_stream.h"

namespace estuary::server {

class TlsStream final : public ClientStream {
 public:
  TlsStream(io::UvLoop& loop, std::shared_ptr<io::TcpConnection> tcp, std::shared_ptr<io::TlsSession> session);
  ~TlsStream() override;

  // Runs the server handshake. Exactly one of the callbacks runs, from a
  // loop callback: `on_established` once the session is open (plaintext
  // that came with the last handshake bytes waits in TakeReceived()), or
  // `on_failed` with the reason after the socket was closed (handshake
  // error, timeout, or the peer left).
  void Handshake(int64_t timeout_ms, std::function<void()> on_established,
                 std::function<void(const std::string& why)> on_failed);
  // Plaintext decrypted before handlers were set.
  std::string TakeReceived() { return std::move(received_); }

  // io::Stream
  std::string& output() override { return plaintext_out_; }
  void Flush() override;
  size_t queued_bytes() const override { return plaintext_out_.size() + tcp_->queued_bytes(); }
  void Close() override;
  void PauseReading() override { tcp_->StopReading(); }
  void ResumeReading() override { tcp_->StartReading(); }
  // ClientStream
  void SetHandlers(Handlers handlers) override { handlers_ = std::move(handlers); }
  void Abort() override { tcp_->Abort(); }
  Detached Detach() override;
  bool encrypted() const override { return true; }
  std::optional<std::string> certificate_identity() const override { return session_->peer_common_name(); }
  io::TlsSession& session() { return *session_; }

 protected:
  std::string socket_address() const override { return tcp_->peer_address(); }

 private:
  void OnCiphertext(std::string_view bytes);
  void Encrypt();  // plaintext_out_ -> records -> the socket
  void EndHandshake(bool established, const std::string& why, bool reset);

  io::UvLoop& loop_;
  std::shared_ptr<io::TcpConnection> tcp_;
  std::shared_ptr<io::TlsSession> session_;
  Handlers handlers_;
  std::string plaintext_out_;
  std::string received_;  // decrypted, not yet handed to on_data
  bool encrypt_posted_ = false;
  io::TimerId handshake_timer_ = 0;
  std::function<void()> on_established_;
  std::function<void(const std::string&)> on_failed_;
  // Posted work holds a weak reference: the stream may die first.
  std::shared_ptr<TlsStream*> self_ = std::make_shared<TlsStream*>(this);
};

}  // namespace estuary::server
