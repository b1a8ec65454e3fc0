#pragma once
// Small pieces of AMQP 1.0 framing (§2.3) and type encoding (§1.6) shared
// by AttachTap and UnsettledAnnouncer, which follow a byte stream's frames
// without Proton. Internal to this library.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/bytes.h"

namespace estuary::amqp::frames {

inline constexpr uint64_t kAttachCode = 0x12;  // §2.7.3
inline constexpr std::string_view kAttachSymbol = "amqp:attach:list";
inline constexpr size_t kHeaderSize = 8;  // protocol header and frame header alike
// Enough of a frame body to see its descriptor: 0x00 then 0x53 code,
// 0x80 and 8 bytes, or 0xa3, a length and "amqp:attach:list".
inline constexpr size_t kDescriptorBytes = 3 + kAttachSymbol.size();
inline constexpr uint32_t kMaxAttachFrame = 1024 * 1024;
inline constexpr size_t kNoValue = static_cast<size_t>(-1);

inline bool IsAttachDescriptor(std::string_view d) {
  if (d.size() >= 3 && d[0] == 0x00 && static_cast<unsigned char>(d[1]) == 0x53) {
    return static_cast<unsigned char>(d[2]) == kAttachCode;
  }
  if (d.size() >= 10 && d[0] == 0x00 && static_cast<unsigned char>(d[1]) == 0x80) {
    uint64_t code = 0;
    for (int i = 2; i < 10; ++i) code = code << 8 | static_cast<unsigned char>(d[i]);
    return code == kAttachCode;
  }
  if (d.size() >= 3 + kAttachSymbol.size() && d[0] == 0x00 && static_cast<unsigned char>(d[1]) == 0xa3 &&
      static_cast<unsigned char>(d[2]) == kAttachSymbol.size()) {
    return d.substr(3, kAttachSymbol.size()) == kAttachSymbol;
  }
  return false;
}

// The offset just past the encoded value starting at `at` (§1.6: the
// constructor's high nibble gives the width), or kNoValue if it runs past
// the end.
inline size_t SkipValue(std::string_view b, size_t at) {
  if (at >= b.size()) return kNoValue;
  const auto code = static_cast<unsigned char>(b[at++]);
  if (code == 0x00) {  // described: descriptor, then value
    at = SkipValue(b, at);
    return at == kNoValue ? kNoValue : SkipValue(b, at);
  }
  size_t end = at;
  switch (code >> 4) {
    case 0x4: break;
    case 0x5: end = at + 1; break;
    case 0x6: end = at + 2; break;
    case 0x7: end = at + 4; break;
    case 0x8: end = at + 8; break;
    case 0x9: end = at + 16; break;
    case 0xa: case 0xc: case 0xe:
      if (at + 1 > b.size()) return kNoValue;
      end = at + 1 + static_cast<unsigned char>(b[at]);
      break;
    case 0xb: case 0xd: case 0xf:
      if (at + 4 > b.size()) return kNoValue;
      end = at + 4 + size_t{base::LoadBig<uint32_t>(b.data() + at)};
      break;
    default: return kNoValue;
  }
  return end <= b.size() ? end : kNoValue;
}

}  // namespace estuary::amqp::frames
