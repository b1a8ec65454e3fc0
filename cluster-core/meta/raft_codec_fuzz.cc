// libFuzzer target for the raft frames (built with -DESTUARY_FUZZ=ON and
// clang): decode -> encode must give back the same bytes (the decoders are
// strict, so every accepted input has exactly one encoding), and decoding
// that again must succeed. The first byte picks the frame type; 5 is the
// metadata group's commands (meta_state.h), which every node decodes from
// the replicated log.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cluster-core/meta/meta_state.h"
#include "cluster-core/meta/raft_codec.h"

using namespace estuary::meta;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 6) {
    case 0:
      if (auto message = DecodeMessage(body)) {
        const std::string again = EncodeMessage(message->group, message->message);
        if (again != body || !DecodeMessage(again)) std::abort();
      }
      break;
    case 1:
      if (auto request = DecodeProposeRequest(body)) {
        const std::string again = EncodeProposeRequest(*request);
        if (again != body || DecodeProposeRequest(again) != request) std::abort();
      }
      break;
    case 2:
      if (auto reply = DecodeProposeReply(body)) {
        const std::string again = EncodeProposeReply(*reply);
        if (again != body || DecodeProposeReply(again) != reply) std::abort();
      }
      break;
    case 3:
      if (auto notice = DecodeQuiesce(body)) {
        const std::string again = EncodeQuiesce(*notice);
        if (again != body || DecodeQuiesce(again) != notice) std::abort();
      }
      break;
    case 5: {
      const std::vector<uint8_t> bytes(body.begin(), body.end());
      if (auto command = DecodeCommand(bytes)) {
        if (EncodeCommand(*command) != bytes) std::abort();
        MetaState state(64, 3);
        state.ApplyCommand(*command);  // any decoded command applies or is refused, never crashes
      }
      break;
    }
    default:
      if (auto request = DecodeWake(body)) {
        const std::string again = EncodeWake(*request);
        if (again != body || DecodeWake(again) != request) std::abort();
      }
      break;
  }
  return 0;
}
