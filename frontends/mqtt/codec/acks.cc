// PUBACK, PUBREC, PUBREL, PUBCOMP (§3.4 to §3.7), DISCONNECT (§3.14), AUTH
// (§3.15), PINGREQ and PINGRESP: packets that are a packet id, a reason code
// and properties at most, where v5 lets the tail be left out.
#include "frontends/mqtt/codec/packet_codecs.h"
#include "frontends/mqtt/codec/properties.h"

namespace estuary::mqtt {
namespace {

bool IsValidAckReason(PacketType type, ReasonCode reason) {
  if (type == PacketType::kPuback || type == PacketType::kPubrec) {
    return IsValidPubackReason(reason);
  }
  return IsValidPubrelReason(reason);
}

// Reads the optional reason code and properties that end a v5 packet:
// absent means Success and no properties.
template <typename TailedPacket, typename ReasonCheck>
void ReadReasonTail(WireReader& reader, TailedPacket& packet, PropertyScope scope,
                    ReasonCheck is_valid) {
  if (reader.empty()) return;
  packet.reason = static_cast<ReasonCode>(reader.Byte());
  if (!is_valid(packet.reason)) {
    reader.Fail(ReasonCode::kProtocolError,
                "reason code " + std::to_string(static_cast<int>(packet.reason)) +
                    " not allowed in this packet");
    return;
  }
  if (!reader.empty()) packet.properties = ReadProperties(reader, scope);
}

// Writes the shortest v5 tail that says the same: nothing for Success with
// no properties, the reason alone without properties.
void WriteReasonTail(ReasonCode reason, const Properties& properties, WireWriter& writer) {
  const bool has_properties = !IsEmpty(properties);
  if (reason == ReasonCode::kSuccess && !has_properties) return;
  writer.Byte(static_cast<uint8_t>(reason));
  if (has_properties) WriteProperties(properties, writer);
}

}  // namespace

uint16_t ReadPacketId(WireReader& reader, const char* packet_name) {
  const uint16_t id = reader.TwoByteInteger();
  if (reader.ok() && id == 0) {
    reader.Fail(ReasonCode::kProtocolError, std::string(packet_name) + " with packet identifier 0");
  }
  return id;
}

AckPacket ReadAck(WireReader& reader, PacketType type, ProtocolVersion version) {
  AckPacket packet;
  packet.type = type;
  packet.packet_id = ReadPacketId(reader, ToString(type));
  if (version == ProtocolVersion::kV5) {
    ReadReasonTail(reader, packet, PropertyScope::kPubAck,
                   [type](ReasonCode reason) { return IsValidAckReason(type, reason); });
  }
  return packet;
}

DisconnectPacket ReadDisconnect(WireReader& reader, ProtocolVersion version) {
  DisconnectPacket packet;
  if (version == ProtocolVersion::kV5) {
    ReadReasonTail(reader, packet, PropertyScope::kDisconnect, IsValidDisconnectReason);
  }
  return packet;
}

AuthPacket ReadAuth(WireReader& reader) {
  AuthPacket packet;
  ReadReasonTail(reader, packet, PropertyScope::kAuth, IsValidAuthReason);
  return packet;
}

void WriteBody(const AckPacket& packet, ProtocolVersion version, WireWriter& writer) {
  writer.TwoByteInteger(packet.packet_id);
  if (version == ProtocolVersion::kV5) {
    WriteReasonTail(packet.reason, packet.properties, writer);
  }
}

void WriteBody(const DisconnectPacket& packet, ProtocolVersion version, WireWriter& writer) {
  if (version == ProtocolVersion::kV5) {
    WriteReasonTail(packet.reason, packet.properties, writer);
  }
}

// AUTH has no short form with a reason code alone (§3.15.2.2.1).
void WriteBody(const AuthPacket& packet, ProtocolVersion version, WireWriter& writer) {
  if (version != ProtocolVersion::kV5) return;
  if (packet.reason == ReasonCode::kSuccess && IsEmpty(packet.properties)) return;
  writer.Byte(static_cast<uint8_t>(packet.reason));
  WriteProperties(packet.properties, writer);
}

void WriteBody(const PingreqPacket&, ProtocolVersion, WireWriter&) {}
void WriteBody(const PingrespPacket&, ProtocolVersion, WireWriter&) {}

}  // namespace estuary::mqtt
