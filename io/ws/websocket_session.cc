#include "io/ws/websocket_session.h"

#include <fmt/format.h>
#include <wslay/wslay.h>

#include <algorithm>
#include <cstring>

#include "base/check.h"

namespace estuary::io {

// wslay calls back with the session as user data.
struct WebSocketSession::Callbacks {
  static ssize_t Recv(wslay_event_context_ptr context, uint8_t* buffer, size_t length, int, void* user) {
    auto* self = static_cast<WebSocketSession*>(user);
    if (self->input_.empty()) {
      wslay_event_set_error(context, WSLAY_ERR_WOULDBLOCK);
      return -1;
    }
    const size_t n = std::min(length, self->input_.size());
    std::memcpy(buffer, self->input_.data(), n);
    self->input_.remove_prefix(n);
    return static_cast<ssize_t>(n);
  }
  static ssize_t Send(wslay_event_context_ptr, const uint8_t* data, size_t length, int, void* user) {
    static_cast<WebSocketSession*>(user)->output_.append(reinterpret_cast<const char*>(data), length);
    return static_cast<ssize_t>(length);
  }
  static void FrameStart(wslay_event_context_ptr, const wslay_event_on_frame_recv_start_arg* arg, void* user) {
    auto* self = static_cast<WebSocketSession*>(user);
    self->frame_opcode_ = arg->opcode;
    if (arg->opcode == WSLAY_TEXT_FRAME || arg->opcode == WSLAY_BINARY_FRAME) self->message_opcode_ = arg->opcode;
    const uint8_t data = arg->opcode == WSLAY_CONTINUATION_FRAME ? self->message_opcode_ : arg->opcode;
    // MQTT 5.0 [MQTT-6.0.0-1] and the AMQP binding: binary frames only.
    if (data == WSLAY_TEXT_FRAME) self->Refuse(WSLAY_CODE_UNSUPPORTED_DATA, "a text frame (binary frames only)");
  }
  static void FrameChunk(wslay_event_context_ptr, const wslay_event_on_frame_recv_chunk_arg* arg, void* user) {
    auto* self = static_cast<WebSocketSession*>(user);
    if (self->refusal_status_ != 0 || self->payload_ == nullptr) return;
    const bool binary = self->frame_opcode_ == WSLAY_BINARY_FRAME ||
                        (self->frame_opcode_ == WSLAY_CONTINUATION_FRAME && self->message_opcode_ == WSLAY_BINARY_FRAME);
    if (binary) self->payload_->append(reinterpret_cast<const char*>(arg->data), arg->data_length);
  }
};

WebSocketSession::WebSocketSession(uint64_t max_frame_bytes) {
  wslay_event_callbacks callbacks{};
  callbacks.recv_callback = &Callbacks::Recv;
  callbacks.send_callback = &Callbacks::Send;
  callbacks.on_frame_recv_start_callback = &Callbacks::FrameStart;
  callbacks.on_frame_recv_chunk_callback = &Callbacks::FrameChunk;
  ESTUARY_CHECK(wslay_event_context_server_init(&context_, &callbacks, this) == 0);
  // Payload streams out as it arrives: no message is buffered whole, and
  // the bound applies to each frame.
  wslay_event_config_set_no_buffering(context_, 1);
  wslay_event_config_set_max_recv_msg_length(context_, max_frame_bytes);
}

WebSocketSession::~WebSocketSession() { wslay_event_context_free(context_); }

bool WebSocketSession::Receive(std::string_view bytes, std::string& payload) {
  if (ended_) return false;
  input_ = bytes;
  payload_ = &payload;
  const int result = wslay_event_recv(context_);
  input_ = {};
  payload_ = nullptr;
  if (!ended_ && (refusal_status_ != 0 || result != 0 || !wslay_event_get_read_enabled(context_))) End(result);
  Drain();
  return !ended_;
}

void WebSocketSession::End(int recv_result) {
  ended_ = true;
  wslay_event_shutdown_read(context_);
  if (refusal_status_ != 0) {
    Close(refusal_status_, refusal_);
    error_ = fmt::format("{} ({})", refusal_, refusal_status_);
    return;
  }
  if (wslay_event_get_close_received(context_)) {
    // wslay has queued the answering close.
    error_ = fmt::format("closed by the peer ({})", wslay_event_get_status_code_received(context_));
    return;
  }
  // wslay refused a frame (unmasked, a bad opcode or length, over the size
  // bound) and queued the close that says so; if it did not, 1002.
  Drain();
  uint16_t status = wslay_event_get_status_code_sent(context_);
  if (!wslay_event_get_close_sent(context_)) {
    status = recv_result == WSLAY_ERR_NOMEM ? WSLAY_CODE_INTERNAL_SERVER_ERROR : WSLAY_CODE_PROTOCOL_ERROR;
    wslay_event_queue_close(context_, status, nullptr, 0);
  }
  error_ = status == WSLAY_CODE_MESSAGE_TOO_BIG ? "a frame over the size limit (1009)"
                                                  : fmt::format("a frame refused ({})", status);
}

bool WebSocketSession::Send(std::string_view payload) {
  if (ended_ || payload.empty()) return !ended_;
  wslay_event_msg message{WSLAY_BINARY_FRAME, reinterpret_cast<const uint8_t*>(payload.data()), payload.size()};
  if (wslay_event_queue_msg(context_, &message) != 0) return false;
  Drain();
  return true;
}

void WebSocketSession::Close(uint16_t status, std::string_view reason) {
  if (!wslay_event_get_close_sent(context_)) {
    // A reason is at most 123 bytes (a control frame holds 125).
    reason = reason.substr(0, 123);
    wslay_event_queue_close(context_, status, reinterpret_cast<const uint8_t*>(reason.data()), reason.size());
  }
  if (!ended_) {
    ended_ = true;
    error_ = fmt::format("closed by the server ({})", status);
  }
  Drain();
}

void WebSocketSession::Refuse(uint16_t status, std::string why) {
  // Inside wslay's receive: acted on once it returns (End).
  if (refusal_status_ != 0) return;
  refusal_status_ = status;
  refusal_ = std::move(why);
  wslay_event_shutdown_read(context_);
}

void WebSocketSession::Drain() {
  if (wslay_event_want_write(context_)) wslay_event_send(context_);
}

void WebSocketSession::TakeOutput(std::string& out) {
  out.append(output_);
  output_.clear();
}

uint16_t WebSocketSession::status_sent() const { return wslay_event_get_status_code_sent(context_); }
uint16_t WebSocketSession::status_received() const { return wslay_event_get_status_code_received(context_); }

}  // namespace estuary::io
