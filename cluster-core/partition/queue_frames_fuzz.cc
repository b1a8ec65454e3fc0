// libFuzzer target for the queue frames 0x60-0x63 (queue_frames.h), built
// with -DESTUARY_FUZZ=ON and clang. The first byte picks the decoder (its
// value mod 4: pull, push, ack, reject). Every body has exactly one
// encoding, so a frame that decodes must encode back to the same bytes and
// decode again to itself.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cluster-core/partition/queue_frames.h"

using namespace estuary::partition;

namespace {

template <typename Decode>
void RoundTrip(std::string_view body, Decode decode) {
  auto frame = decode(body);
  if (!frame) return;
  const std::string again = Encode(*frame);
  if (again != body || decode(again) != frame) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: RoundTrip(body, DecodeQueuePull); break;
    case 1: RoundTrip(body, DecodeQueuePush); break;
    case 2: RoundTrip(body, DecodeQueueAck); break;
    default: RoundTrip(body, DecodeQueueReject); break;
  }
  return 0;
}
