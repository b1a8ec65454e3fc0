#include "server/admin_query.h"

#include <fmt/format.h>

#include <charconv>

namespace estuary::server {
namespace {

// The first value of `name` in the query and how many pairs carry it.
struct Found {
  std::optional<std::string> first;
  size_t count = 0;
};

Found FindParam(std::string_view target, std::string_view name) {
  Found found;
  io::ForEachQueryPair(io::QueryOf(target), [&](const io::QueryPair& pair) {
    if (io::PercentDecode(pair.name, io::PlusIs::kSpace) == name && found.count++ == 0) {
      found.first = io::PercentDecode(pair.value, io::PlusIs::kSpace);
    }
    return true;
  });
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

std::optional<std::string> QueryParam(std::string_view target, std::string_view name) {
  return FindParam(target, name).first;
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
