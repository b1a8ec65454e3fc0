#pragma once
// Helpers shared by the codec tests and the seed corpus writer.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "frontends/mqtt/codec/decoder.h"
#include "frontends/mqtt/codec/encoder.h"
#include "frontends/mqtt/codec/packet.h"

namespace estuary::mqtt::testing {

inline constexpr ProtocolVersion kAllVersions[] = {ProtocolVersion::kV31, ProtocolVersion::kV311,
                                                   ProtocolVersion::kV5};

// Bytes from a list of values 0..255, so tests read like the spec's figures.
std::string Bytes(std::initializer_list<int> values);

// A whole packet: first byte, remaining length of `body`, then `body`.
std::string Frame(uint8_t first_byte, std::string_view body);

// A UTF-8 string field: two-byte length then the text.
std::string Str(std::string_view text);

std::string Encode(const Packet& packet, ProtocolVersion version);

// Decodes and returns the reason code of the error, or kSuccess.
ReasonCode DecodeReason(std::string_view frame, ProtocolVersion version);

// Hex dump for failure messages.
std::string Hex(std::string_view bytes);

struct Sample {
  std::string name;
  Packet packet;
};

// Packets of every type that `version` can carry, each canonical for that
// version (so encode then decode gives it back): minimal and full forms,
// every property their packet allows in v5.
std::vector<Sample> SamplePackets(ProtocolVersion version);

const char* VersionName(ProtocolVersion version);

}  // namespace estuary::mqtt::testing
