#include "server/admin_query.h"

#include <fmt/format.h>

#include <charconv>

namespace estuary::server {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string Decode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (plus_is_space && text[i] == '+') {
      out += ' ';
    } else if (text[i] == '%' && i + 2 < text.size() && HexValue(text[i + 1]) >= 0 && HexValue(text[i + 2]) >= 0) {
      out += static_cast<char>(HexValue(text[i + 1]) * 16 + HexValue(text[i + 2]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

// The first value of `name` in the query and how many pairs carry it.
struct Found {
  std::optional<std::string> first;
  size_t count = 0;
};

Found FindParam(std::string_view target, std::string_view name) {
  Found found;
  const size_t mark = target.find('?');
  if (mark == std::string_view::npos) return found;
  std::string_view query = target.substr(mark + 1);
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const size_t equals = pair.find('=');
    if (Decode(pair.substr(0, equals), true) == name && found.count++ == 0) {
      found.first = equals == std::string_view::npos ? std::string() : Decode(pair.substr(equals + 1), true);
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return found;
}

Expected<size_t, std::string> Number(std::string_view target, std::string_view name, size_t fallback,
                                     size_t max) {
  const Found found = FindParam(target, name);
  if (found.count == 0) return fallback;
  if (found.count > 1) return MakeError(fmt::format("{} is given {} times: give it once", name, found.count));
  const std::string& text = *found.first;
  size_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  const bool too_big = error == std::errc::result_out_of_range;  // still all digits
  if ((error != std::errc() && !too_big) || end != text.data() + text.size()) {
    return MakeError(fmt::format("{}={} is not a number", name, Printable(text)));
  }
  if (too_big || value > max) {
    return MakeError(fmt::format("{}={} is over the maximum {}", name, Printable(text), max));
  }
  return value;
}

}  // namespace

std::string_view PathOf(std::string_view target) { return target.substr(0, target.find('?')); }

std::string PercentDecode(std::string_view text) { return Decode(text, false); }

std::optional<std::string> QueryParam(std::string_view target, std::string_view name) {
  return FindParam(target, name).first;
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

Expected<Page, std::string> ParsePage(std::string_view target) {
  auto limit = Number(target, "limit", Page::kDefaultLimit, Page::kMaxLimit);
  if (!limit) return MakeError(limit.error());
  auto offset = Number(target, "offset", 0, Page::kMaxWindow);
  if (!offset) return MakeError(offset.error());
  if (*limit == 0) return MakeError("limit=0: ask for at least one row");
  if (*offset + *limit > Page::kMaxWindow) {
    return MakeError(fmt::format("offset + limit is over {}: narrow the filter instead", Page::kMaxWindow));
  }
  return Page{*limit, *offset};
}

}  // namespace estuary::server
