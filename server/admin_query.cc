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

Expected<size_t, std::string> Number(std::string_view target, std::string_view name, size_t fallback,
                                     size_t max) {
  auto text = QueryParam(target, name);
  if (!text) return fallback;
  size_t value = 0;
  auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (error != std::errc() || end != text->data() + text->size()) {
    return MakeError(fmt::format("{}={} is not a number", name, *text));
  }
  if (value > max) return MakeError(fmt::format("{}={} is over the maximum {}", name, value, max));
  return value;
}

}  // namespace

std::string_view PathOf(std::string_view target) { return target.substr(0, target.find('?')); }

std::string PercentDecode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
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

std::optional<std::string> QueryParam(std::string_view target, std::string_view name) {
  const size_t mark = target.find('?');
  if (mark == std::string_view::npos) return std::nullopt;
  std::string_view query = target.substr(mark + 1);
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const size_t equals = pair.find('=');
    if (PercentDecode(pair.substr(0, equals)) == name) {
      return equals == std::string_view::npos ? std::string() : PercentDecode(pair.substr(equals + 1));
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return std::nullopt;
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
