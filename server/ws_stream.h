#pragma once
// WebSocketStream: a ClientStream carrying MQTT or AMQP over WebSocket
// (RFC 6455; MQTT 5.0 section 6, the OASIS AMQP WebSocket binding) on an
// inner ClientStream: a TcpStream (--mqtt-ws, --amqp-ws) or a TlsStream
// once its handshake is done (--mqtt-wss, --amqp-wss). Frames read from
// the inner stream are unwrapped (io::WebSocketSession) and their payload
// handed to on_data; bytes written through output() become one binary
// message per loop iteration.
//
// A new connection starts with Upgrade(): the HTTP Upgrade request must be
// complete and acceptable within the timeout, or it is refused with an
// HTTP status saying why (io/ws/websocket_handshake.h) and closed. A
// connection moved from another shard is built on the session it brings.
// Loop thread only.
#include <functional>
#include <memory>
#include <string>

#include "io/uv/uv_loop.h"
#include "io/ws/websocket_handshake.h"
#include "io/ws/websocket_session.h"
#include "server/client_stream.h"

namespace estuary::server {

class WebSocketStream final : public ClientStream {
 public:
  WebSocketStream(io::UvLoop& loop, std::unique_ptr<ClientStream> inner,
                  std::shared_ptr<io::WebSocketSession> session);
  ~WebSocketStream() override;

  // Reads the opening handshake (`received`: bytes that came already).
  // Exactly one callback runs, from a loop callback: `on_established`
  // after the 101 went out (payload of frames that came with the request
  // waits in TakeReceived()), or `on_failed` after the socket was closed
  // (refused, timeout, or the peer left).
  void Upgrade(int64_t timeout_ms, io::WebSocketPolicy policy, std::string received,
               std::function<void()> on_established, std::function<void(const std::string& why)> on_failed);
  std::string TakeReceived() { return std::move(received_); }
  const std::string& subprotocol() const { return subprotocol_; }

  // io::Stream
  std::string& output() override { return payload_out_; }
  void Flush() override;
  size_t queued_bytes() const override { return payload_out_.size() + inner_->queued_bytes(); }
  void Close() override;  // a close frame (1000), then the inner stream's close
  void PauseReading() override { inner_->PauseReading(); }
  void ResumeReading() override { inner_->ResumeReading(); }
  // ClientStream
  void SetHandlers(Handlers handlers) override { handlers_ = std::move(handlers); }
  void Abort() override { inner_->Abort(); }
  Detached Detach() override;
  bool encrypted() const override { return inner_->encrypted(); }
  std::optional<std::string> certificate_identity() const override { return inner_->certificate_identity(); }

 protected:
  std::string socket_address() const override { return inner_->peer_address(); }

 private:
  void OnWire(std::string_view bytes);
  void OnRequest(std::string_view bytes);
  void Frame();           // payload_out_ -> one binary message -> the inner stream
  void WriteSessionOutput();
  void EndUpgrade(bool established, const std::string& why, bool reset);

  io::UvLoop& loop_;
  std::unique_ptr<ClientStream> inner_;
  std::shared_ptr<io::WebSocketSession> session_;
  Handlers handlers_;
  std::string payload_out_;
  std::string received_;  // upgrading: the request so far; then payload not yet handed on
  std::string subprotocol_;
  io::WebSocketPolicy policy_;
  bool upgrading_ = false;
  bool closed_ = false;
  bool frame_posted_ = false;
  io::TimerId upgrade_timer_ = 0;
  std::function<void()> on_established_;
  std::function<void(const std::string&)> on_failed_;
  std::shared_ptr<WebSocketStream*> self_ = std::make_shared<WebSocketStream*>(this);
};

}  // namespace estuary::server
