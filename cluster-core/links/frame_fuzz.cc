// libFuzzer target for the inter-node frame reader and the hello decoder
// (built with -DESTUARY_FUZZ=ON and clang): bytes from any stranger reach
// them before authentication. Checks that frames never claim more bytes than
// were fed, that a decoded hello re-encodes to a hello that decodes alike,
// and that Read (frames as views of each read, cut at offsets taken from the
// input) gives the same frames and the same verdict as Feed/Next.
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cluster-core/links/frame.h"

using namespace estuary::cluster::wire;

namespace {

using Frames = std::vector<std::pair<uint8_t, std::string>>;

uint32_t MaxFrameFor(std::string_view input) {
  return !input.empty() && (input[0] & 1) ? 1u << 16 : kHandshakeMaxFrame;
}

// Feed/Next in two pieces, checking hellos on the way.
FrameReader::Status FeedAndNext(std::string_view input, Frames& frames) {
  FrameReader reader;
  reader.set_max_frame(MaxFrameFor(input));
  size_t consumed = 0;
  FrameReader::Status status = FrameReader::Status::kNeedMore;
  for (std::string_view piece : {input.substr(0, input.size() / 2), input.substr(input.size() / 2)}) {
    reader.Feed(piece);
    FrameReader::Frame frame;
    while ((status = reader.Next(frame)) == FrameReader::Status::kFrame) {
      consumed += kHeaderBytes + frame.body.size();
      if (consumed > input.size()) std::abort();
      frames.emplace_back(frame.type, std::string(frame.body));
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
    if (status != FrameReader::Status::kNeedMore) break;
  }
  return status;
}

// Read in pieces whose sizes come from the input's last bytes; each piece is
// a copy that is overwritten after its call (as libuv's read buffer is).
FrameReader::Status ReadInPieces(std::string_view input, Frames& frames) {
  FrameReader reader;
  reader.set_max_frame(MaxFrameFor(input));
  FrameReader::Status status = FrameReader::Status::kNeedMore;
  size_t at = 0;
  size_t seed = input.empty() ? 0 : static_cast<uint8_t>(input.back());
  while (at < input.size() && status == FrameReader::Status::kNeedMore) {
    const size_t size = std::min(input.size() - at, 1 + seed % 97);
    seed = seed * 31 + 7;
    std::string piece(input.substr(at, size));
    at += size;
    status = reader.Read(piece, [&](const FrameReader::Frame& frame) {
      frames.emplace_back(frame.type, std::string(frame.body));
      return true;
    });
    piece.assign(piece.size(), '\xEE');
  }
  return status;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  Frames fed, read;
  const FrameReader::Status fed_status = FeedAndNext(input, fed);
  const FrameReader::Status read_status = ReadInPieces(input, read);
  if (fed != read || fed_status != read_status) std::abort();
  return 0;
}
