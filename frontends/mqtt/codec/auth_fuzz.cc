// libFuzzer target for the AUTH packet (MQTT 5.0 section 3.15): the input is
// an AUTH body (reason code and properties), framed here so that every run
// reaches the AUTH decoder. Checks: under 5.0 a decoded packet is an
// AuthPacket with a valid AUTH reason, Authentication Data only beside an
// Authentication Method, and it encodes back to the same bytes' meaning
// (decode(encode(p)) == p, encoding stable); under 3.1.1 and 3.1 an AUTH is
// always an error. Any breach aborts.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "frontends/mqtt/codec/decoder.h"
#include "frontends/mqtt/codec/encoder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace estuary::mqtt;
  std::string frame(1, '\xF0');
  size_t length = size;
  do {  // the remaining length, a variable byte integer (section 1.5.5)
    uint8_t digit = length % 128;
    length /= 128;
    if (length != 0) digit |= 0x80;
    frame += static_cast<char>(digit);
  } while (length != 0);
  frame.append(reinterpret_cast<const char*>(data), size);

  for (ProtocolVersion version : {ProtocolVersion::kV31, ProtocolVersion::kV311}) {
    if (DecodePacket(frame, version)) std::abort();  // no AUTH before 5.0
  }
  auto packet = DecodePacket(frame, ProtocolVersion::kV5);
  if (!packet) {
    if (!IsError(packet.error().reason)) std::abort();
    return 0;
  }
  const auto* auth = std::get_if<AuthPacket>(&*packet);
  if (auth == nullptr || !IsValidAuthReason(auth->reason)) std::abort();
  if (auth->properties.authentication_data && !auth->properties.authentication_method) std::abort();
  std::string encoded;
  EncodePacket(*packet, ProtocolVersion::kV5, encoded);
  auto again = DecodePacket(encoded, ProtocolVersion::kV5);
  if (!again || !(*again == *packet)) std::abort();
  std::string encoded_again;
  EncodePacket(*again, ProtocolVersion::kV5, encoded_again);
  if (encoded_again != encoded) std::abort();
  return 0;
}
