#pragma once
// Request targets as HTTP clients send them: the path and the query, the
// query's pairs, and percent-decoding (RFC 3986 2.1; "+" is a space only in
// a query, as HTML forms and URLSearchParams write it). The one copy every
// admin listener uses: estuaryd's listings (server/admin_query.h) and the
// membership API (cluster-core/membership/membership_admin.h).
//
// Pure and stateless (library estuary_http_query: base and fmt only, no
// libuv), safe on any thread. Everything here reads bytes from outside and
// must not crash on any of them: fuzzed through admin_query_fuzz and
// membership_admin_fuzz.
#include <cstddef>
#include <string>
#include <string_view>

#include "base/expected.h"

namespace estuary::io {

// What "+" means: a space in a query's names and values, itself in a path
// segment (a client id may hold a "+").
enum class PlusIs { kPlus, kSpace };

// The target without its query ("/api/clients?x=1" -> "/api/clients").
std::string_view PathOf(std::string_view target);
// The query after the first "?", "" if there is none.
std::string_view QueryOf(std::string_view target);

// One "name=value" pair of a query, still encoded. A pair without "=" has
// an empty value and has_equals false.
struct QueryPair {
  std::string_view name;
  std::string_view value;
  bool has_equals = false;
};

// Calls fn(const QueryPair&) for each pair of `query` (split on "&", then on
// the first "="), in order, empty ones ("&&") included. fn returns true to
// go on, false to stop.
template <typename Fn>
void ForEachQueryPair(std::string_view query, Fn&& fn) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const size_t equals = pair.find('=');
    const QueryPair split{pair.substr(0, equals),
                          equals == std::string_view::npos ? std::string_view() : pair.substr(equals + 1),
                          equals != std::string_view::npos};
    if (!fn(split)) return;
    if (amp == std::string_view::npos) return;
    query.remove_prefix(amp + 1);
  }
}

// Lenient decoding: "%XX" (either case) becomes its byte; a "%" not followed
// by two hex digits ("%G1", "%4" at the end, "100%") is kept as it is. Never
// fails and never grows the text. For filters, where a literal "%" should
// still match.
std::string PercentDecode(std::string_view text, PlusIs plus);

// Strict decoding: the same, but a malformed escape is refused with an error
// that names it and its offset ("malformed percent escape \"%G1\" at byte 3:
// want % and two hex digits"), quoted with Printable. For values that are
// identifiers or addresses, where a stray "%" is a mistake to report.
// Well-formed escapes of any byte (%00, %FF) decode; callers check what the
// bytes may be.
Expected<std::string, std::string> PercentDecodeStrict(std::string_view text, PlusIs plus);

// `text` for an error message: printable ASCII as it is, every other byte as
// %XX, cut at `max` bytes of input with "..." after. The result is ASCII,
// so it is valid JSON string content whatever the input was.
std::string Printable(std::string_view text, size_t max = 64);

}  // namespace estuary::io
