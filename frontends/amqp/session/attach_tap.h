#pragma once
// AttachTap: reads the `unsettled` map of the client's attach frames
// (AMQP 1.0 §2.7.3, field 7), which Proton-C 0.37 decodes past without
// keeping (pn_do_attach skips it; there is no pn_link_remote_unsettled).
// Link recovery (§2.6.13) needs it: a client reattaching a durable link
// states which deliveries it still holds and in which state.
//
// The tap sees the same bytes, in the same order, as the driver's read
// buffer. It follows the frame boundaries (protocol headers, SASL and AMQP
// frames) and copies only attach frames from a receiving client (role
// receiver); other frames are skipped by their size, so the cost per byte
// is nil. After a TLS header (not used on the AMQP port today) or a frame
// it cannot follow, it stops looking.
//
// Threading: part of one AmqpConnection, on its shard's thread.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace estuary::amqp {

// The delivery states of §3.4 (and received, §3.4.1), as far as link
// recovery needs them.
enum class RemoteDeliveryState : uint8_t {
  kNone,  // null, received, or a state we do not know: not terminal
  kAccepted,
  kRejected,
  kReleased,
  kModified,              // delivery may be sent again
  kModifiedUndeliverable  // undeliverable-here: not to this receiver again
};

// delivery-tag -> the state the client holds it in.
using UnsettledMap = std::map<std::string, RemoteDeliveryState>;

class AttachTap {
 public:
  // Bytes from the network, exactly as handed to the driver.
  void Feed(std::string_view bytes);
  // The unsettled map of the latest attach of a client receiver named
  // `link_name`, if that attach carried one (null or absent: nullopt).
  // Removes it.
  std::optional<UnsettledMap> Take(const std::string& link_name);

  // Parses one attach performative (the frame body after the extended
  // header); records it if it is a receiver's with an unsettled map.
  // Public for tests.
  void OnAttachBody(std::string_view body);

 private:
  // kStart: the next 8 bytes are a protocol or frame header; kPeek: an
  // AMQP frame's start, up to its descriptor; kCapture: an attach frame;
  // kSkip: the rest of a frame; kOff: no longer following the stream.
  enum class Phase : uint8_t { kStart, kPeek, kCapture, kSkip, kOff };
  // Whole frames at the start of `bytes` that are not attaches (and the
  // start of a last, partial one): the length to skip.
  size_t SkipFrames(std::string_view bytes);
  void OnEightBytes();
  void OnPeek();
  void Next(Phase phase, uint64_t skip = 0);

  Phase phase_ = Phase::kStart;
  std::string buffer_;      // the bytes of the current phase
  size_t want_ = 8;         // buffer_ is complete at this size
  uint64_t remaining_ = 0;  // kSkip: bytes of the frame still to skip
  uint32_t frame_size_ = 0;
  size_t body_offset_ = 0;  // the frame body's offset (doff * 4)
  std::unordered_map<std::string, UnsettledMap> attaches_;
};

}  // namespace estuary::amqp
