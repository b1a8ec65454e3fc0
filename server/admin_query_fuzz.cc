// libFuzzer target for the admin API's query strings (admin_query.h). The
// input is a request target as an HTTP client sends it. Checks: nothing
// crashes; PathOf is the target's prefix before any "?"; decoding never
// grows a string; a page that parses is within its bounds and an error is
// short printable ASCII (a valid JSON string, whatever the bytes were);
// every value, percent-encoded into a query, comes back from QueryParam as
// it was. Any breach aborts, which libFuzzer reports as a crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "server/admin_query.h"

namespace {

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "admin_query_fuzz: %s\n", what);
  std::abort();
}

// What a browser's encodeURIComponent writes: unreserved bytes as they are.
std::string Encode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    const bool plain = (byte >= '0' && byte <= '9') || (byte >= 'a' && byte <= 'z') || (byte >= 'A' && byte <= 'Z') ||
                       byte == '-' || byte == '_' || byte == '.' || byte == '~';
    if (plain) {
      out += c;
    } else {
      out += '%';
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    }
  }
  return out;
}

void CheckTarget(std::string_view target) {
  using namespace estuary::server;
  const std::string_view path = PathOf(target);
  if (target.substr(0, path.size()) != path || path.find('?') != std::string_view::npos) Fail("PathOf");
  if (PercentDecode(target).size() > target.size()) Fail("decoding grew the text");
  for (const char* name : {"limit", "offset", "client_id", ""}) {
    const auto value = QueryParam(target, name);
    if (value && value->size() > target.size()) Fail("a value longer than the target");
    if (value && path.size() == target.size()) Fail("a value without a query");
  }
  auto page = ParsePage(target);
  if (page) {
    if (page->limit == 0 || page->limit > Page::kMaxLimit) Fail("limit out of bounds");
    if (page->window() > Page::kMaxWindow) Fail("window out of bounds");
    return;
  }
  if (page.error().empty() || page.error().size() > 300) Fail("error empty or long");
  for (const char c : page.error()) {
    if (c < 0x20 || c > 0x7e) Fail("error not printable ASCII");
  }
}

void CheckRoundTrip(std::string_view value) {
  using namespace estuary::server;
  const std::string encoded = Encode(value);
  const std::string target = "/api/clients?limit=5&client_id=" + encoded + "&address=" + encoded;
  if (QueryParam(target, "client_id") != value) Fail("query value round trip");
  if (QueryParam(target, "address") != value) Fail("second value round trip");
  if (PercentDecode(encoded) != value) Fail("path round trip");
  auto page = ParsePage(target);
  if (!page || page->limit != 5) Fail("the page beside encoded values");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  CheckTarget(input);
  CheckRoundTrip(input);
  return 0;
}
