// libFuzzer target for the partition proposal frames 0x50-0x53
// (partition_frames.h), built with -DESTUARY_FUZZ=ON and clang. The first
// byte picks the decoder (even: propose 0x50/0x52, odd: answer 0x51/0x53).
// A decoded frame must encode and decode back to itself; a propose body has
// exactly one encoding, so it must also give back the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cluster-core/partition/partition_frames.h"

using namespace estuary::partition;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    if (auto frame = DecodePropose(body)) {
      const std::string again = Encode(*frame);
      if (again != body || DecodePropose(again) != frame) std::abort();
    }
  } else {
    if (auto frame = DecodeProposed(body)) {
      const std::string again = Encode(*frame);
      if (DecodeProposed(again) != frame || Encode(*DecodeProposed(again)) != again) std::abort();
      // Only "no result with result bytes" has a second encoding.
      if (again != body && (frame->result || again.size() >= body.size())) std::abort();
    }
  }
  return 0;
}
