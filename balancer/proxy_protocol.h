#pragma once
// PROXY protocol version 2 (haproxy.org/download/2.9/doc/proxy-protocol.txt):
// the binary header a proxy sends before the client's bytes so the server
// learns the client's address. Pure functions, no IO; used by estuary-lb
// (encode) and estuaryd (decode, only from configured balancer addresses).
//
// Supported: command PROXY or LOCAL, families TCP over IPv4 and IPv6 and
// UNSPEC (LOCAL health checks). TLVs are skipped. A header whose length
// field exceeds kMaxHeaderBytes is refused (the spec caps nothing, but no
// sender of ours writes TLVs).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/expected.h"

namespace estuary::proxy {

inline constexpr std::string_view kSignature{"\r\n\r\n\0\r\nQUIT\n", 12};
inline constexpr size_t kFixedBytes = 16;       // signature, version/command, family, length
inline constexpr size_t kMaxHeaderBytes = 1024;  // fixed part + address block + TLVs

struct Address {
  std::string ip;  // numeric, "127.0.0.1" or "::1"
  uint16_t port = 0;
  std::string ToString() const;  // "ip:port", "[ip]:port" for IPv6
  bool operator==(const Address&) const = default;
};

struct Header {
  bool local = false;  // LOCAL command: the connection is the proxy's own
  Address source;      // the client (empty for LOCAL/UNSPEC)
  Address destination;  // the address the client connected to
  size_t size = 0;      // bytes the header took on the wire (decode only)
};

// PROXY command over TCP; both addresses must be numeric and of one family.
Expected<std::string, std::string> Encode(const Address& source, const Address& destination);
// LOCAL command, no addresses.
std::string EncodeLocal();

enum class DecodeStatus { kNeedMore, kComplete, kInvalid };
struct DecodeResult {
  DecodeStatus status = DecodeStatus::kNeedMore;
  Header header;       // valid when kComplete
  std::string error;   // set when kInvalid
};
// Decodes a header at the start of `bytes`. kNeedMore while the bytes so far
// are a prefix of a valid header; kInvalid as soon as they cannot be.
DecodeResult Decode(std::string_view bytes);

}  // namespace estuary::proxy
