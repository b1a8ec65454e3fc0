// libFuzzer target for the HTTP request parser (built with -DESTUARY_FUZZ=ON
// and clang). Checks that parsing never reads out of bounds and that a
// complete request never claims more bytes than it was given.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "io/uv/http_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  estuary::io::HttpParseResult parsed = estuary::io::ParseHttpRequest(input);
  if (parsed.status == estuary::io::HttpParseResult::Status::kComplete &&
      (parsed.request.consumed > size || parsed.request.consumed > estuary::io::kMaxHttpRequestBytes)) {
    std::abort();
  }
  return 0;
}
