#include "tools/bench/amqp_body.h"

#include <cstdint>

namespace estuary::bench {
namespace {

constexpr uint8_t kDescribed = 0x00;
constexpr uint8_t kSmallUlong = 0x53;
constexpr uint8_t kUlong = 0x80;
constexpr uint64_t kDataSection = 0x75;
constexpr uint64_t kValueSection = 0x77;
constexpr uint8_t kVbin8 = 0xa0, kVbin32 = 0xb0, kStr8 = 0xa1, kStr32 = 0xb1;

uint64_t BigEndian(std::string_view bytes, size_t at, size_t width) {
  uint64_t value = 0;
  for (size_t i = 0; i < width; ++i) value = value << 8 | static_cast<uint8_t>(bytes[at + i]);
  return value;
}

// Bytes after the constructor byte `code` taken by fixed-width values, or
// by the size field of variable-width, compound and array values (part 1,
// 1.6: the high nibble of the code gives the category).
struct Layout {
  size_t fixed = 0;       // fixed width of the value
  size_t size_width = 0;  // 1 or 4: a size field, then that many bytes
};
std::optional<Layout> LayoutOf(uint8_t code) {
  switch (code >> 4) {
    case 0x4: return Layout{0, 0};
    case 0x5: return Layout{1, 0};
    case 0x6: return Layout{2, 0};
    case 0x7: return Layout{4, 0};
    case 0x8: return Layout{8, 0};
    case 0x9: return Layout{16, 0};
    case 0xa: case 0xc: case 0xe: return Layout{0, 1};
    case 0xb: case 0xd: case 0xf: return Layout{0, 4};
    default: return std::nullopt;
  }
}

// The position after the value starting at `at`, or nullopt.
std::optional<size_t> Skip(std::string_view bytes, size_t at, int depth = 0) {
  if (at >= bytes.size() || depth > 8) return std::nullopt;
  const uint8_t code = static_cast<uint8_t>(bytes[at]);
  if (code == kDescribed) {
    const auto after_descriptor = Skip(bytes, at + 1, depth + 1);
    if (!after_descriptor) return std::nullopt;
    return Skip(bytes, *after_descriptor, depth + 1);
  }
  const auto layout = LayoutOf(code);
  if (!layout) return std::nullopt;
  size_t end = at + 1 + layout->fixed + layout->size_width;
  if (end > bytes.size()) return std::nullopt;
  if (layout->size_width > 0) end += BigEndian(bytes, at + 1, layout->size_width);
  if (end > bytes.size()) return std::nullopt;
  return end;
}

// A binary or string value at `at`: its bytes, or nullopt.
std::optional<std::string_view> BytesValue(std::string_view bytes, size_t at) {
  if (at >= bytes.size()) return std::nullopt;
  const uint8_t code = static_cast<uint8_t>(bytes[at]);
  const size_t width = (code == kVbin8 || code == kStr8) ? 1 : (code == kVbin32 || code == kStr32) ? 4 : 0;
  if (width == 0 || at + 1 + width > bytes.size()) return std::nullopt;
  const uint64_t size = BigEndian(bytes, at + 1, width);
  if (size > bytes.size() - at - 1 - width) return std::nullopt;
  return bytes.substr(at + 1 + width, size);
}

}  // namespace

std::string DataSectionPrefix(size_t body_size) {
  std::string prefix{static_cast<char>(kDescribed), static_cast<char>(kSmallUlong),
                     static_cast<char>(kDataSection)};
  if (body_size < 256) {
    prefix += static_cast<char>(kVbin8);
    prefix += static_cast<char>(body_size);
    return prefix;
  }
  prefix += static_cast<char>(kVbin32);
  for (int shift = 24; shift >= 0; shift -= 8) prefix += static_cast<char>((body_size >> shift) & 0xff);
  return prefix;
}

std::optional<std::string_view> FindBody(std::string_view message) {
  size_t at = 0;
  while (at < message.size()) {
    // Every section is a described value with a numeric descriptor.
    if (static_cast<uint8_t>(message[at]) != kDescribed || at + 1 >= message.size()) return std::nullopt;
    const uint8_t descriptor_code = static_cast<uint8_t>(message[at + 1]);
    uint64_t descriptor = 0;
    size_t value_at = 0;
    if (descriptor_code == kSmallUlong && at + 2 < message.size()) {
      descriptor = static_cast<uint8_t>(message[at + 2]);
      value_at = at + 3;
    } else if (descriptor_code == kUlong && at + 10 <= message.size()) {
      descriptor = BigEndian(message, at + 2, 8);
      value_at = at + 10;
    } else {
      return std::nullopt;
    }
    if (descriptor == kDataSection || descriptor == kValueSection) {
      if (auto body = BytesValue(message, value_at)) return body;
      if (descriptor == kDataSection) return std::nullopt;
    }
    const auto next = Skip(message, value_at);
    if (!next) return std::nullopt;
    at = *next;
  }
  return std::nullopt;
}

}  // namespace estuary::bench
