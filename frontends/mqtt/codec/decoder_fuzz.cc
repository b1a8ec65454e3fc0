// libFuzzer target for the MQTT codec. The input is a byte stream: it is cut
// into frames with PeekFrame and each frame is decoded as 3.1, 3.1.1 and 5.0.
// Whatever decodes must encode to EncodedSize bytes, decode again to the
// same packet, and encode again to the same bytes. Errors must be error
// reason codes. Any breach aborts, which libFuzzer reports as a crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "frontends/mqtt/codec/decoder.h"
#include "frontends/mqtt/codec/encoder.h"

namespace estuary::mqtt {
namespace {

constexpr ProtocolVersion kVersions[] = {ProtocolVersion::kV31, ProtocolVersion::kV311,
                                         ProtocolVersion::kV5};

[[noreturn]] void Fail(const char* what, PacketType type, ProtocolVersion version) {
  std::fprintf(stderr, "mqtt_decoder_fuzz: %s (%s, version %d)\n", what, ToString(type),
               static_cast<int>(version));
  std::abort();
}

void CheckPublishPath(const PublishPacket& publish, ProtocolVersion version,
                      const std::string& expected) {
  std::string out;
  EncodePublish(publish, publish.payload, version, out);
  if (out != expected) Fail("EncodePublish differs", PacketType::kPublish, version);
  if (EncodedPublishSize(publish, publish.payload.size(), version) != out.size()) {
    Fail("EncodedPublishSize wrong", PacketType::kPublish, version);
  }
}

void CheckRoundTrip(const Packet& packet, ProtocolVersion version) {
  const PacketType type = TypeOf(packet);
  std::string encoded;
  EncodePacket(packet, version, encoded);
  if (encoded.size() != EncodedSize(packet, version)) Fail("EncodedSize wrong", type, version);
  auto again = DecodePacket(encoded, version);
  if (!again) {
    std::fprintf(stderr, "re-decode error: %s\n", again.error().message.c_str());
    Fail("re-encoded packet does not decode", type, version);
  }
  if (!(*again == packet)) Fail("re-decoded packet differs", type, version);
  std::string encoded_again;
  EncodePacket(*again, version, encoded_again);
  if (encoded_again != encoded) Fail("encoding not stable", type, version);
  if (const auto* publish = std::get_if<PublishPacket>(&packet)) {
    CheckPublishPath(*publish, version, encoded);
  }
}

void CheckFrame(std::string_view frame) {
  for (ProtocolVersion version : kVersions) {
    auto packet = DecodePacket(frame, version);
    if (packet) {
      CheckRoundTrip(*packet, version);
    } else if (!IsError(packet.error().reason)) {
      Fail("decode error with a success reason code", PacketType::kConnect, version);
    }
  }
}

// Every prefix of a frame's fixed header either asks for more bytes or gives
// the same header.
void CheckIncrementalPeek(std::string_view frame, const FrameHeader& header) {
  for (size_t length = 0; length < header.header_size; ++length) {
    auto partial = PeekFrame(frame.substr(0, length), UINT32_MAX);
    if (!partial || partial->header_size != 0) {
      Fail("partial fixed header not reported as incomplete", header.type(),
           ProtocolVersion::kV5);
    }
  }
}

}  // namespace
}  // namespace estuary::mqtt

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace estuary::mqtt;
  std::string_view input(reinterpret_cast<const char*>(data), size);
  // The whole input as one frame too: that reaches the length checks.
  CheckFrame(input);
  while (!input.empty()) {
    auto header = PeekFrame(input, UINT32_MAX);
    if (!header || header->header_size == 0 || header->total_size() > input.size()) break;
    const std::string_view frame = input.substr(0, header->total_size());
    CheckIncrementalPeek(frame, *header);
    if (frame.size() != input.size()) CheckFrame(frame);
    input.remove_prefix(frame.size());
  }
  return 0;
}
