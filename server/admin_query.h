#pragma once
// The query strings of the admin API's listing pages (docs/admin-api.md):
// percent-decoded parameters, and the bounded page every listing takes
// (`limit`, default 100, at most kMaxLimit; `offset`, with offset + limit at
// most kMaxWindow so no shard is asked for more rows than that).
//
// Everything here reads bytes from outside (any HTTP request target) and is
// pure: no allocation beyond the strings returned, no state. Splitting and
// decoding are io/http_query.h's, shared with the membership API; here they
// are lenient (a filter is a substring, so a malformed escape is kept as it
// is and matched literally). Errors quote what they refuse with Printable,
// so an error is always ASCII (valid JSON text) and short. Fuzzed by
// admin_query_fuzz.cc.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "base/expected.h"
#include "io/http_query.h"

namespace estuary::server {

// The path without its query ("/api/clients?x=1" -> "/api/clients").
using io::PathOf;
// `text` for an error message: printable ASCII, cut at `max` bytes.
using io::Printable;
// The value of the first `name=` pair of the query (the name decoded too),
// percent-decoded with "+" as a space (HTML form encoding, as the
// dashboard's URLSearchParams writes); a pair without "=" has the empty
// value; nullopt if absent.
std::optional<std::string> QueryParam(std::string_view target, std::string_view name);
// Percent-decoding of a path segment: "%XX" only, "+" stays a "+" (RFC 3986;
// a client id may hold one). A "%" not followed by two hex digits is kept.
inline std::string PercentDecode(std::string_view text) { return io::PercentDecode(text, io::PlusIs::kPlus); }

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
