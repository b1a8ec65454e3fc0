// libFuzzer target for the inter-node frame reader and the hello decoder
// (built with -DESTUARY_FUZZ=ON and clang): bytes from any stranger reach
// them before authentication. Checks that frames never claim more bytes than
// were fed and that a decoded hello re-encodes to a hello that decodes alike.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cluster-core/links/frame.h"

using namespace estuary::cluster::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  FrameReader reader;
  reader.set_max_frame(size > 0 && (data[0] & 1) ? 1u << 16 : kHandshakeMaxFrame);
  size_t consumed = 0;
  // Feed in two pieces so that split frames are exercised.
  for (std::string_view piece : {input.substr(0, size / 2), input.substr(size / 2)}) {
    reader.Feed(piece);
    FrameReader::Frame frame;
    while (reader.Next(frame) == FrameReader::Status::kFrame) {
      consumed += kHeaderBytes + frame.body.size();
      if (consumed > size) std::abort();
      if (frame.type == kHello) {
        if (auto hello = DecodeHello(frame.body)) {
          auto again = DecodeHello(EncodeHello(*hello));
          if (!again || again->node != hello->node || again->address != hello->address ||
              again->nonce != hello->nonce || again->major != hello->major) {
            std::abort();
          }
        }
      }
    }
  }
  return 0;
}
