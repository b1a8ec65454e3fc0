#pragma once
// Decoding MQTT packets from bytes: pure functions, no IO, no allocation
// beyond the returned packet. Every violation of the packet format yields a
// DecodeError naming the reason code the spec assigns (0x81 Malformed
// Packet or 0x82 Protocol Error, 0x95 Packet Too Large, 0x84 Unsupported
// Protocol Version ...) and a human-readable message; nothing throws.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/expected.h"
#include "frontends/mqtt/codec/packet.h"

namespace estuary::mqtt {

struct DecodeError {
  ReasonCode reason = ReasonCode::kMalformedPacket;
  std::string message;
  // Set only for errors in a CONNECT once its protocol name and level are
  // read: the version whose CONNACK format the client understands. For
  // kUnsupportedProtocolVersion it is kV5 when the level (bit 7, a bridge
  // flag, aside) is 5 or more (answer CONNACK reason 0x84) and kV311/kV31
  // otherwise (answer CONNACK return code 0x01, which ToV3ConnackCode gives
  // for kUnsupportedProtocolVersion).
  // Unset when the protocol name itself is unknown: close without CONNACK.
  std::optional<ProtocolVersion> version_hint;
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
//  - DecodeError kMalformedPacket for a remaining length over 4 bytes or
//    not minimally encoded;
//  - DecodeError kPacketTooLarge when total_size() > max_packet_size;
//  - FrameHeader with header_size == 0 when more bytes are needed.
Expected<FrameHeader, DecodeError> PeekFrame(std::string_view buffer, uint32_t max_packet_size);

// Decodes one whole packet (fixed header included; `frame` must be exactly
// total_size() bytes). CONNECT is decoded whatever `version` says (it
// carries its own); other packets by `version`. Reserved flag bits, invalid
// UTF-8, properties not allowed in the packet, duplicate properties, a
// packet id of 0 where one is required, QoS 3, empty SUBSCRIBE payloads and
// similar are errors.
//
// Which reason code, where the spec leaves room:
//  - kMalformedPacket: anything that does not parse (lengths, truncation,
//    trailing bytes, reserved bits and flags, ill-formed UTF-8, unknown
//    property identifiers, QoS 3 in PUBLISH or a will, DUP on QoS 0,
//    reserved CONNACK/SUBACK return codes before v5, 3.x SUBSCRIBE without
//    subscriptions, 3.x password without user name);
//  - kProtocolError: parses but is not allowed (packet id 0, a property in
//    the wrong packet or repeated, a zero Receive Maximum / Maximum Packet
//    Size / Subscription Identifier, a property flag above 1, Authentication
//    Data without Method, a reason code the packet type does not have, v5
//    subscription QoS 3 or Retain Handling 3, empty v5 SUBSCRIBE or any
//    UNSUBSCRIBE, v5 PUBLISH with an empty topic and no Topic Alias, an
//    unknown CONNECT protocol name, Session Present with a refusal);
//  - kTopicAliasInvalid: Topic Alias 0;
//  - kUnsupportedProtocolVersion: a CONNECT level other than 3, 4 or 5
//    (see DecodeError::version_hint).
// Rules that need state or direction (topic alias ranges, wildcards in topic
// names, who may send which packet) are the session's.
Expected<Packet, DecodeError> DecodePacket(std::string_view frame, ProtocolVersion version);

}  // namespace estuary::mqtt
