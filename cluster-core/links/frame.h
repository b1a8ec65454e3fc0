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
constexpr uint8_t kVersionMinor = 0;     // minors are compatible within a major
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

// Incremental frame reader: Feed() bytes, then Next() until it returns
// kNeedMore or an error. A returned frame's body views the reader's buffer
// (or the fed bytes) and is valid until the next Feed().
class FrameReader {
 public:
  enum class Status { kFrame, kNeedMore, kOversize, kEmptyFrame };
  struct Frame {
    uint8_t type = 0;
    std::string_view body;
  };
  void set_max_frame(uint32_t max) { max_frame_ = max; }
  void Feed(std::string_view bytes);
  Status Next(Frame& frame);
  size_t buffered() const { return buffer_.size() - consumed_; }

 private:
  std::string buffer_;
  size_t consumed_ = 0;
  uint32_t max_frame_ = kHandshakeMaxFrame;
};

}  // namespace estuary::cluster::wire
