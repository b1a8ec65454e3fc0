#include "io/http_query.h"

#include <fmt/format.h>

namespace estuary::io {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The byte of the escape at text[i] ('%'), or -1 if it is not "%XX".
int EscapedByte(std::string_view text, size_t i) {
  if (i + 2 >= text.size()) return -1;
  const int high = HexValue(text[i + 1]);
  const int low = HexValue(text[i + 2]);
  return high < 0 || low < 0 ? -1 : high * 16 + low;
}

// Decodes `text`; stops at the first malformed escape when `bad_at` is
// given (its offset is stored there), keeps it as it is otherwise.
std::string Decode(std::string_view text, PlusIs plus, size_t* bad_at) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+' && plus == PlusIs::kSpace) {
      out += ' ';
      continue;
    }
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    const int byte = EscapedByte(text, i);
    if (byte >= 0) {
      out += static_cast<char>(byte);
      i += 2;
    } else if (bad_at != nullptr) {
      *bad_at = i;
      return out;
    } else {
      out += '%';
    }
  }
  return out;
}

}  // namespace

std::string_view PathOf(std::string_view target) { return target.substr(0, target.find('?')); }

std::string_view QueryOf(std::string_view target) {
  const size_t mark = target.find('?');
  return mark == std::string_view::npos ? std::string_view() : target.substr(mark + 1);
}

std::string PercentDecode(std::string_view text, PlusIs plus) { return Decode(text, plus, nullptr); }

Expected<std::string, std::string> PercentDecodeStrict(std::string_view text, PlusIs plus) {
  size_t bad_at = std::string_view::npos;
  std::string out = Decode(text, plus, &bad_at);
  if (bad_at == std::string_view::npos) return out;
  return MakeError(fmt::format("malformed percent escape \"{}\" at byte {}: want % and two hex digits",
                               Printable(text.substr(bad_at, 3)), bad_at));
}

std::string Printable(std::string_view text, size_t max) {
  std::string out;
  for (const char c : text.substr(0, max)) {
    const bool plain = c >= 0x20 && c < 0x7f;
    out += plain ? std::string(1, c) : fmt::format("%{:02X}", static_cast<unsigned char>(c));
  }
  if (text.size() > max) out += "...";
  return out;
}

}  // namespace estuary::io
