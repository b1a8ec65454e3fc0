// PeekFrame and DecodePacket: the fixed header (§2.1) and the dispatch to
// the packet families.
#include "frontends/mqtt/codec/decoder.h"

#include <limits>

#include "frontends/mqtt/codec/packet_codecs.h"

namespace estuary::mqtt {
namespace {

DecodeError Malformed(std::string message) {
  return DecodeError{ReasonCode::kMalformedPacket, std::move(message), std::nullopt};
}

// Fixed header flags (§2.1.3): PUBLISH carries its own; PUBREL, SUBSCRIBE and
// UNSUBSCRIBE are 0b0010; every other packet 0. MQTT 3.1 clients may set DUP
// on a resent PUBREL, SUBSCRIBE or UNSUBSCRIBE, so 3.1 also allows 0b1010.
bool FlagsValid(PacketType type, uint8_t flags, ProtocolVersion version) {
  switch (type) {
    case PacketType::kPublish:
      return true;
    case PacketType::kPubrel:
    case PacketType::kSubscribe:
    case PacketType::kUnsubscribe:
      return flags == 0x02 || (version == ProtocolVersion::kV31 && flags == 0x0A);
    default:
      return flags == 0;
  }
}

Packet ReadBody(WireReader& reader, uint8_t first_byte, ProtocolVersion version) {
  const auto type = static_cast<PacketType>(first_byte >> 4);
  switch (type) {
    case PacketType::kConnect: return ReadConnect(reader);
    case PacketType::kConnack: return ReadConnack(reader, version);
    case PacketType::kPublish: return ReadPublish(reader, first_byte & 0x0F, version);
    case PacketType::kPuback:
    case PacketType::kPubrec:
    case PacketType::kPubrel:
    case PacketType::kPubcomp: return ReadAck(reader, type, version);
    case PacketType::kSubscribe: return ReadSubscribe(reader, version);
    case PacketType::kSuback: return ReadSuback(reader, version);
    case PacketType::kUnsubscribe: return ReadUnsubscribe(reader, version);
    case PacketType::kUnsuback: return ReadUnsuback(reader, version);
    case PacketType::kPingreq: return PingreqPacket{};
    case PacketType::kPingresp: return PingrespPacket{};
    case PacketType::kDisconnect: return ReadDisconnect(reader, version);
    case PacketType::kAuth: return ReadAuth(reader);
  }
  reader.Fail(ReasonCode::kMalformedPacket, "reserved packet type");
  return PingreqPacket{};
}

bool TypeExists(uint8_t first_byte, ProtocolVersion version) {
  const int type = first_byte >> 4;
  if (type == 0) return false;
  return type != static_cast<int>(PacketType::kAuth) || version == ProtocolVersion::kV5;
}

}  // namespace

Expected<FrameHeader, DecodeError> PeekFrame(std::string_view buffer, uint32_t max_packet_size) {
  FrameHeader header;
  if (buffer.empty()) return header;
  uint32_t length = 0;
  for (size_t i = 0; i < 4; ++i) {
    if (buffer.size() < i + 2) return FrameHeader{};  // need more bytes
    const auto byte = static_cast<uint8_t>(buffer[i + 1]);
    length |= static_cast<uint32_t>(byte & 0x7F) << (7 * i);
    if ((byte & 0x80) != 0) continue;
    if (byte == 0 && i > 0) return MakeError(Malformed("remaining length not minimally encoded"));
    header.first_byte = static_cast<uint8_t>(buffer[0]);
    header.remaining_length = length;
    header.header_size = i + 2;
    if (header.total_size() > max_packet_size) {
      return MakeError(DecodeError{ReasonCode::kPacketTooLarge,
                                   "packet of " + std::to_string(header.total_size()) + " bytes",
                                   std::nullopt});
    }
    return header;
  }
  return MakeError(Malformed("remaining length longer than 4 bytes"));
}

Expected<Packet, DecodeError> DecodePacket(std::string_view frame, ProtocolVersion version) {
  const auto header = PeekFrame(frame, std::numeric_limits<uint32_t>::max());
  if (!header) return MakeError(header.error());
  if (header->header_size == 0) return MakeError(Malformed("incomplete fixed header"));
  if (header->total_size() != frame.size()) {
    return MakeError(Malformed("remaining length does not match the packet size"));
  }
  const uint8_t first_byte = header->first_byte;
  if (!TypeExists(first_byte, version)) return MakeError(Malformed("reserved packet type"));
  if (!FlagsValid(header->type(), first_byte & 0x0F, version)) {
    return MakeError(Malformed(std::string("reserved flags set in ") + ToString(header->type())));
  }
  WireReader reader(frame.substr(header->header_size));
  Packet packet = ReadBody(reader, first_byte, version);
  if (reader.ok() && !reader.empty()) {
    reader.Fail(ReasonCode::kMalformedPacket,
                std::string("bytes left over after ") + ToString(header->type()));
  }
  if (!reader.ok()) return MakeError(reader.TakeError());
  return packet;
}

}  // namespace estuary::mqtt
