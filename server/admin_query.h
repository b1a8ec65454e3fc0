#pragma once
// The query strings of the admin API's listing pages (docs/admin-api.md):
// percent-decoded parameters, and the bounded page every listing takes
// (`limit`, default 100, at most kMaxLimit; `offset`, with offset + limit at
// most kMaxWindow so no shard is asked for more rows than that).
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "base/expected.h"

namespace estuary::server {

// The path without its query ("/api/clients?x=1" -> "/api/clients").
std::string_view PathOf(std::string_view target);
// The percent-decoded value of `name` ("+" is a space), nullopt if absent.
std::optional<std::string> QueryParam(std::string_view target, std::string_view name);
// Percent-decoding of a path segment or a value.
std::string PercentDecode(std::string_view text);

struct Page {
  static constexpr size_t kDefaultLimit = 100;
  static constexpr size_t kMaxLimit = 1000;
  static constexpr size_t kMaxWindow = 10'000;
  size_t limit = kDefaultLimit;
  size_t offset = 0;
  size_t window() const { return offset + limit; }  // rows each shard returns at most
};
// `limit` and `offset` from the query; an error names the bad one.
Expected<Page, std::string> ParsePage(std::string_view target);

// True if `needle` is empty or occurs in `text` (the listings' filters).
inline bool Contains(std::string_view text, std::string_view needle) {
  return needle.empty() || text.find(needle) != std::string_view::npos;
}

}  // namespace estuary::server
