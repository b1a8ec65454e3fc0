#include "server/tls_stream.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace estuary::server {

TlsStream::TlsStream(io::UvLoop& loop, std::shared_ptr<io::TcpConnection> tcp,
                     std::shared_ptr<io::TlsSession> session)
    : loop_(loop), tcp_(std::move(tcp)), session_(std::move(session)) {
  io::TcpConnection::Handlers handlers;
  handlers.on_data = [this](std::string_view bytes) { OnCiphertext(bytes); };
  handlers.on_close = [this](int status) {
    if (on_failed_) {
      EndHandshake(false, "the peer closed the connection during the handshake", false);
    } else if (handlers_.on_close) {
      handlers_.on_close(status);
    }
  };
  handlers.on_drain = [this] {
    if (handlers_.on_drain) handlers_.on_drain();
  };
  tcp_->SetHandlers(std::move(handlers));
}

TlsStream::~TlsStream() {
  if (handshake_timer_ != 0) loop_.CancelTimer(handshake_timer_);
  tcp_->SetHandlers({});  // they point here
}

void TlsStream::Handshake(int64_t timeout_ms, std::function<void()> on_established,
                          std::function<void(const std::string& why)> on_failed) {
  on_established_ = std::move(on_established);
  on_failed_ = std::move(on_failed);
  handshake_timer_ = loop_.AddTimer(timeout_ms, [weak = std::weak_ptr<TlsStream*>(self_), timeout_ms] {
    auto self = weak.lock();
    if (!self) return;
    (*self)->handshake_timer_ = 0;
    (*self)->EndHandshake(false, fmt::format("handshake not finished within {} ms", timeout_ms), true);
  });
  tcp_->StartReading();
}

void TlsStream::EndHandshake(bool established, const std::string& why, bool reset) {
  if (handshake_timer_ != 0) {
    loop_.CancelTimer(handshake_timer_);
    handshake_timer_ = 0;
  }
  auto succeeded = std::move(on_established_);
  auto failed = std::move(on_failed_);
  on_established_ = nullptr;
  on_failed_ = nullptr;
  if (established) {
    succeeded();
    return;
  }
  // An alert OpenSSL queued goes out before the FIN; a timeout is a reset.
  if (reset) {
    tcp_->Abort();
  } else {
    tcp_->Close();
  }
  failed(why);  // may destroy this stream's owner: nothing after it
}

void TlsStream::OnCiphertext(std::string_view bytes) {
  // One scratch buffer per thread: on_data views are valid only during the call.
  thread_local std::string plaintext;
  plaintext.clear();
  const bool ok = session_->Receive(bytes, plaintext);
  if (session_->has_output()) {
    session_->TakeOutput(tcp_->output_buffer());
    tcp_->MarkDirty();
  }
  if (on_failed_) {  // handshaking
    if (!ok) {
      EndHandshake(false, session_->error(), false);
    } else if (session_->open()) {
      received_.append(plaintext);
      EndHandshake(true, {}, false);
    }
    return;
  }
  if (!plaintext.empty() && handlers_.on_data) handlers_.on_data(plaintext);
  if (!ok) {
    // close_notify from the peer, or a bad record: the connection ends.
    if (session_->state() == io::TlsSession::State::kFailed) {
      spdlog::debug("tls: address={} {}", peer_address(), session_->error());
    }
    tcp_->Close();
  }
}

void TlsStream::Flush() {
  if (encrypt_posted_ || plaintext_out_.empty()) return;
  encrypt_posted_ = true;
  loop_.Post([weak = std::weak_ptr<TlsStream*>(self_)] {
    if (auto self = weak.lock()) (*self)->Encrypt();
  });
}

void TlsStream::Encrypt() {
  encrypt_posted_ = false;
  if (plaintext_out_.empty()) return;
  if (session_->Send(plaintext_out_)) {
    session_->TakeOutput(tcp_->output_buffer());
    tcp_->MarkDirty();
  }
  plaintext_out_.clear();
  if (plaintext_out_.capacity() > 64 * 1024) std::string().swap(plaintext_out_);
}

void TlsStream::Close() {
  Encrypt();
  session_->Shutdown();  // close_notify
  session_->TakeOutput(tcp_->output_buffer());
  tcp_->MarkDirty();
  tcp_->Close();
}

ClientStream::Detached TlsStream::Detach() {
  Encrypt();
  const int fd = tcp_->Detach();
  if (fd < 0) return {};
  return {fd, session_, nullptr};
}

}  // namespace estuary::server
