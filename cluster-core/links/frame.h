#pragma once
// The inter-node frame and the link-layer frames (docs/internode.md): pure
// encoding, decoding and the handshake MAC, with no IO, so they are tested
// and fuzzed apart from the sockets.
//
//   frame = u32 length (big-endian, counts type + body) | u8 type | body
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cluster-core/links/transport.h"

namespace estuary::cluster::wire {

constexpr uint32_t kMagic = 0x45535451;  // "ESTQ"
constexpr uint8_t kVersionMajor = 1;     // a different major is refused
constexpr uint8_t kVersionMinor = kLinkVersionMinor;  // compatible within a major (transport.h)
constexpr size_t kHeaderBytes = 5;       // length + type
constexpr size_t kNonceBytes = 32;
constexpr size_t kMacBytes = 32;
// Before the peer proved the secret, frames are at most this long, so a
// stranger cannot make a node allocate max_frame_bytes.
constexpr uint32_t kHandshakeMaxFrame = 1024;

enum FrameType : uint8_t {
  kHello = 0x00,
  kAuth = 0x01,
  kHeartbeat = 0x02,
  kError = 0x03,
  kFirstClusterType = 0x10,  // 0x10-0xFF reach the LinkHandler
};

using Nonce = std::array<uint8_t, kNonceBytes>;
using Mac = std::array<uint8_t, kMacBytes>;

struct Hello {
  uint32_t magic = kMagic;
  uint8_t major = kVersionMajor;
  uint8_t minor = kVersionMinor;
  NodeId node = 0;
  std::string address;  // the sender's advertised cluster address
  Nonce nonce{};
};

// Appends one frame to `out` (the connection's output buffer).
void AppendFrame(std::string& out, uint8_t type, std::string_view body);
std::string EncodeHello(const Hello& hello);
// Parses a hello body; nullopt if it is malformed (wrong size, address too
// long). The magic and version are returned for the caller to judge.
std::optional<Hello> DecodeHello(std::string_view body);

// Who computes the MAC: the side that dialled or the side that accepted.
// The role is part of the MAC input, so a peer cannot reflect our own
// proof back to us.
enum class Role : uint8_t { kDialer = 'D', kAcceptor = 'A' };
// HMAC-SHA256 keyed by the cluster secret over a fixed label, the role,
// both nonces and both node ids (dialer's first).
Mac ComputeMac(std::string_view secret, Role role, const Nonce& dialer_nonce, const Nonce& acceptor_nonce,
               NodeId dialer, NodeId acceptor);
bool MacEquals(const Mac& a, std::string_view b);  // constant time
Nonce RandomNonce();                              // OpenSSL RAND_bytes

// Incremental frame reader. Two ways to use it:
//
// - Read(bytes, on_frame): hands every frame complete in `bytes` to
//   on_frame as a view of `bytes` itself (no copy); only a frame split
//   across reads is assembled in the reader's buffer, and only the bytes
//   left over at the end (a partial frame) are copied into it. on_frame
//   returns false to stop (the link closed): the rest of `bytes` is then
//   kept in the reader. The links use this one.
// - Feed(bytes), then Next() until it returns kNeedMore or an error: every
//   byte is copied into the reader's buffer; a returned frame's body views
//   that buffer and is valid until the next Feed() or Read().
//
// A frame's length is checked against max_frame when its header is read,
// so set_max_frame() from inside on_frame applies to the frames after it.
class FrameReader {
 public:
  enum class Status { kFrame, kNeedMore, kOversize, kEmptyFrame };
  struct Frame {
    uint8_t type = 0;
    std::string_view body;  // valid during on_frame (Read), or until the next Feed/Read (Next)
  };
  void set_max_frame(uint32_t max) { max_frame_ = max; }

  // Returns kNeedMore once every byte was consumed (frames handed out, a
  // partial one kept), kFrame if on_frame returned false, or the error
  // (kOversize, kEmptyFrame) of the first bad header: the link is garbage
  // from there on (the bytes from that header on stay in the reader).
  template <typename OnFrame>  // bool(const Frame&)
  Status Read(std::string_view bytes, OnFrame&& on_frame);

  void Feed(std::string_view bytes);
  Status Next(Frame& frame);
  size_t buffered() const { return buffer_.size() - consumed_; }

 private:
  // Parses one frame at the start of `in`; on kFrame, `size` is its length
  // with the header.
  Status Parse(std::string_view in, Frame& frame, size_t& size) const;
  // Moves bytes from `in` into the buffer until it holds one whole frame
  // (kFrame) or `in` is used up (kNeedMore).
  Status TopUp(std::string_view& in);
  void Compact();
  void Keep(std::string_view rest) { buffer_.append(rest); }

  std::string buffer_;
  size_t consumed_ = 0;
  uint32_t max_frame_ = kHandshakeMaxFrame;
};

template <typename OnFrame>
FrameReader::Status FrameReader::Read(std::string_view bytes, OnFrame&& on_frame) {
  Frame frame;
  // First what earlier reads left: a frame begun there is completed from
  // the front of `bytes`.
  while (buffered() > 0) {
    const Status status = TopUp(bytes);
    if (status != Status::kFrame) return status;  // kNeedMore: `bytes` is used up and kept
    Next(frame);
    if (!on_frame(static_cast<const Frame&>(frame))) {
      Keep(bytes);
      return Status::kFrame;
    }
  }
  Compact();
  // Then the frames complete in `bytes`, handed out where they lie.
  size_t size = 0;
  while (!bytes.empty()) {
    const Status status = Parse(bytes, frame, size);
    if (status == Status::kNeedMore) break;
    if (status != Status::kFrame) {
      Keep(bytes);  // the bad header stays: the next Read or Next reports it again
      return status;
    }
    bytes.remove_prefix(size);
    if (!on_frame(static_cast<const Frame&>(frame))) {
      Keep(bytes);
      return Status::kFrame;
    }
  }
  Keep(bytes);
  return Status::kNeedMore;
}

}  // namespace estuary::cluster::wire
