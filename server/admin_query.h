#pragma once
// The query strings of the admin API's listing pages (docs/admin-api.md):
// percent-decoded parameters, and the bounded page every listing takes
// (`limit`, default 100, at most kMaxLimit; `offset`, with offset + limit at
// most kMaxWindow so no shard is asked for more rows than that).
//
// Everything here reads bytes from outside (any HTTP request target) and is
// pure: no allocation beyond the strings returned, no state. Malformed
// escapes are kept as they are; errors quote what they refuse with
// Printable, so an error is always ASCII (valid JSON text) and short.
// Fuzzed by admin_query_fuzz.cc.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "base/expected.h"

namespace estuary::server {

// The path without its query ("/api/clients?x=1" -> "/api/clients").
std::string_view PathOf(std::string_view target);
// The value of the first `name=` pair of the query, percent-decoded with "+"
// as a space (HTML form encoding, as the dashboard's URLSearchParams
// writes); a pair without "=" has the empty value; nullopt if absent.
std::optional<std::string> QueryParam(std::string_view target, std::string_view name);
// Percent-decoding of a path segment: "%XX" only, "+" stays a "+" (RFC 3986;
// a client id may hold one). A "%" not followed by two hex digits is kept.
std::string PercentDecode(std::string_view text);
// `text` for an error message: printable ASCII as it is, every other byte as
// %XX, cut at `max` bytes of input with "..." after.
std::string Printable(std::string_view text, size_t max = 64);

struct Page {
  static constexpr size_t kDefaultLimit = 100;
  static constexpr size_t kMaxLimit = 1000;
  static constexpr size_t kMaxWindow = 10'000;
  size_t limit = kDefaultLimit;
  size_t offset = 0;
  size_t window() const { return offset + limit; }  // rows each shard returns at most
};
// `limit` and `offset` from the query; an error names the bad one (not a
// decimal number, over its maximum, given twice, limit 0, or offset + limit
// over kMaxWindow).
Expected<Page, std::string> ParsePage(std::string_view target);

// True if `needle` is empty or occurs in `text` (the listings' filters).
inline bool Contains(std::string_view text, std::string_view needle) {
  return needle.empty() || text.find(needle) != std::string_view::npos;
}

}  // namespace estuary::server
