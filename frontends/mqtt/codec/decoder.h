#pragma once
// Decoding MQTT packets from bytes: pure functions, no IO, no allocation
// beyond the returned packet. Every violation of the packet format yields a
// DecodeError naming the reason code the spec assigns (0x81 Malformed
// Packet or 0x82 Protocol Error, 0x95 Packet Too Large, 0x84 Unsupported
// Protocol Version ...) and a human-readable message; nothing throws.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "frontends/mqtt/codec/packet.h"
#include "model/result.h"

namespace estuary::mqtt {

struct DecodeError {
  ReasonCode reason = ReasonCode::kMalformedPacket;
  std::string message;
};

// The fixed header of the next packet in a byte stream.
struct FrameHeader {
  uint8_t first_byte = 0;      // type << 4 | flags
  uint32_t remaining_length = 0;
  size_t header_size = 0;      // 2..5 bytes
  size_t total_size() const { return header_size + remaining_length; }
  PacketType type() const { return static_cast<PacketType>(first_byte >> 4); }
};

// Looks at the start of `buffer`. Returns:
//  - a FrameHeader when the fixed header is complete (the body may not be);
//  - DecodeError kMalformedPacket for a remaining length over 4 bytes;
//  - DecodeError kPacketTooLarge when total_size() > max_packet_size;
//  - FrameHeader with header_size == 0 when more bytes are needed.
Expected<FrameHeader, DecodeError> PeekFrame(std::string_view buffer, uint32_t max_packet_size);

// Decodes one whole packet (fixed header included; `frame` must be exactly
// total_size() bytes). CONNECT is decoded whatever `version` says (it
// carries its own); other packets by `version`. Reserved flag bits, invalid
// UTF-8, properties not allowed in the packet, duplicate properties, a
// packet id of 0 where one is required, QoS 3, empty SUBSCRIBE payloads and
// similar are errors.
Expected<Packet, DecodeError> DecodePacket(std::string_view frame, ProtocolVersion version);

}  // namespace estuary::mqtt
