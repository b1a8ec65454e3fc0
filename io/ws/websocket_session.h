#pragma once
// WebSocketSession: the server side of one WebSocket connection after its
// opening handshake (RFC 6455 framing, on Debian's wslay). The caller moves
// bytes, as with io::TlsSession: frames from the network go into Receive(),
// which appends the binary payload they carry (the protocol's byte stream:
// frame and message boundaries mean nothing to MQTT or AMQP) and leaves
// frames to send (pong, close) for TakeOutput(); Send() frames a payload
// as one binary message.
//
// What it enforces: client frames must be masked (1002), data frames are
// binary (a text frame: 1003), a frame's payload is at most
// `max_frame_bytes` (1009); pings are answered; a close is answered with
// the peer's status. Memory: one frame header, plus what the caller takes.
// No socket, no clock, no thread of its own: used by one thread at a time,
// it may move to another loop with its socket.
#include <cstdint>
#include <string>
#include <string_view>

using wslay_event_context = struct wslay_event_context;

namespace estuary::io {

class WebSocketSession {
 public:
  explicit WebSocketSession(uint64_t max_frame_bytes);
  ~WebSocketSession();
  WebSocketSession(const WebSocketSession&) = delete;
  WebSocketSession& operator=(const WebSocketSession&) = delete;

  // Frames from the peer; their payload is appended to `payload`. Returns
  // false once the connection is over (the peer's close came, or a
  // protocol violation: error() says which); a close frame may then be
  // waiting in TakeOutput().
  bool Receive(std::string_view bytes, std::string& payload);
  // Frames `payload` as one binary message (nothing after a close).
  bool Send(std::string_view payload);
  // Queues a close frame with `status` (1000 normal, 1001 going away, ...).
  void Close(uint16_t status, std::string_view reason = {});
  // Appends the frames to send to `out` and forgets them.
  void TakeOutput(std::string& out);
  bool has_output() const { return !output_.empty(); }

  bool open() const { return !ended_; }
  // Why it ended: "" while open; e.g. "closed by the peer (1000)".
  const std::string& error() const { return error_; }
  uint16_t status_sent() const;
  uint16_t status_received() const;

 private:
  struct Callbacks;
  void Refuse(uint16_t status, std::string why);  // from a wslay callback
  void End(int recv_result);                      // after wslay_event_recv
  void Drain();  // wslay's queued frames -> output_

  wslay_event_context* context_ = nullptr;
  // Valid only inside Receive(): the bytes wslay reads and where payload goes.
  std::string_view input_;
  std::string* payload_ = nullptr;
  std::string output_;
  uint8_t frame_opcode_ = 0;    // of the frame being received
  uint8_t message_opcode_ = 0;  // of the message a continuation belongs to
  bool ended_ = false;
  uint16_t refusal_status_ = 0;  // a frame this class refused
  std::string refusal_;
  std::string error_;
};

}  // namespace estuary::io
