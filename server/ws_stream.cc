#include "server/ws_stream.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace estuary::server {

WebSocketStream::WebSocketStream(io::UvLoop& loop, std::unique_ptr<ClientStream> inner,
                                 std::shared_ptr<io::WebSocketSession> session)
    : loop_(loop), inner_(std::move(inner)), session_(std::move(session)) {
  Handlers handlers;
  handlers.on_data = [this](std::string_view bytes) { OnWire(bytes); };
  handlers.on_close = [this](int status) {
    closed_ = true;
    if (upgrading_) {
      EndUpgrade(false, "the peer closed the connection during the opening handshake", false);
    } else if (handlers_.on_close) {
      handlers_.on_close(status);
    }
  };
  handlers.on_drain = [this] {
    if (handlers_.on_drain) handlers_.on_drain();
  };
  inner_->SetHandlers(std::move(handlers));
}

WebSocketStream::~WebSocketStream() {
  if (upgrade_timer_ != 0) loop_.CancelTimer(upgrade_timer_);
  inner_->SetHandlers({});  // they point here
}

void WebSocketStream::Upgrade(int64_t timeout_ms, io::WebSocketPolicy policy, std::string received,
                              std::function<void()> on_established,
                              std::function<void(const std::string& why)> on_failed) {
  upgrading_ = true;
  policy_ = std::move(policy);
  on_established_ = std::move(on_established);
  on_failed_ = std::move(on_failed);
  upgrade_timer_ = loop_.AddTimer(timeout_ms, [weak = std::weak_ptr<WebSocketStream*>(self_), timeout_ms] {
    auto self = weak.lock();
    if (!self) return;
    (*self)->upgrade_timer_ = 0;
    (*self)->EndUpgrade(false, fmt::format("opening handshake not finished within {} ms", timeout_ms), true);
  });
  inner_->ResumeReading();
  if (!received.empty()) OnRequest(received);
}

void WebSocketStream::EndUpgrade(bool established, const std::string& why, bool reset) {
  upgrading_ = false;
  if (upgrade_timer_ != 0) {
    loop_.CancelTimer(upgrade_timer_);
    upgrade_timer_ = 0;
  }
  auto succeeded = std::move(on_established_);
  auto failed = std::move(on_failed_);
  on_established_ = nullptr;
  on_failed_ = nullptr;
  if (established) {
    succeeded();
    return;
  }
  if (reset) {
    inner_->Abort();
  } else if (!closed_) {
    inner_->Close();  // after the refusal written before
  }
  failed(why);  // may destroy this stream's owner: nothing after it
}

void WebSocketStream::OnRequest(std::string_view bytes) {
  received_.append(bytes);
  io::WebSocketUpgrade upgrade = io::ParseWebSocketUpgrade(received_, policy_);
  if (upgrade.status == io::WebSocketUpgrade::Status::kIncomplete) return;
  inner_->output().append(upgrade.response);
  inner_->Flush();
  if (upgrade.status == io::WebSocketUpgrade::Status::kRefused) {
    received_.clear();
    EndUpgrade(false, fmt::format("refused with {}: {}", upgrade.http_status, upgrade.error), false);
    return;
  }
  subprotocol_ = upgrade.subprotocol;
  // Frames may have come behind the request: their payload waits for the session.
  const std::string frames = received_.substr(upgrade.consumed);
  received_.clear();
  std::string payload;
  const bool open = frames.empty() || session_->Receive(frames, payload);
  WriteSessionOutput();
  if (!open) {
    EndUpgrade(false, "websocket: " + session_->error(), false);
    return;
  }
  received_ = std::move(payload);
  EndUpgrade(true, {}, false);
}

void WebSocketStream::OnWire(std::string_view bytes) {
  if (upgrading_) {
    OnRequest(bytes);
    return;
  }
  if (closed_) return;
  // One scratch buffer per thread: on_data views are valid only during the call.
  thread_local std::string payload;
  payload.clear();
  const bool open = session_->Receive(bytes, payload);
  WriteSessionOutput();  // pongs, and the close that answers one
  if (!payload.empty() && handlers_.on_data) handlers_.on_data(payload);
  if (!open && !closed_) {
    spdlog::debug("websocket {}: {}", peer_address(), session_->error());
    closed_ = true;
    inner_->Close();
  }
}

void WebSocketStream::WriteSessionOutput() {
  if (!session_->has_output()) return;
  session_->TakeOutput(inner_->output());
  inner_->Flush();
}

void WebSocketStream::Flush() {
  if (frame_posted_ || payload_out_.empty()) return;
  frame_posted_ = true;
  loop_.Post([weak = std::weak_ptr<WebSocketStream*>(self_)] {
    if (auto self = weak.lock()) (*self)->Frame();
  });
}

void WebSocketStream::Frame() {
  frame_posted_ = false;
  if (payload_out_.empty()) return;
  if (!closed_) {
    session_->Send(payload_out_);
    WriteSessionOutput();
  }
  payload_out_.clear();
  if (payload_out_.capacity() > 64 * 1024) std::string().swap(payload_out_);
}

void WebSocketStream::Close() {
  Frame();
  if (closed_) return;
  closed_ = true;
  session_->Close(1000);
  WriteSessionOutput();
  inner_->Close();
}

ClientStream::Detached WebSocketStream::Detach() {
  Frame();
  Detached detached = inner_->Detach();
  if (detached.fd >= 0) detached.ws = session_;
  return detached;
}

}  // namespace estuary::server
