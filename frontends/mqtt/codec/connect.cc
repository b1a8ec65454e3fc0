// CONNECT (§3.1, 3.1.1 §3.1) and CONNACK (§3.2).
#include "frontends/mqtt/codec/packet_codecs.h"
#include "frontends/mqtt/codec/properties.h"

namespace estuary::mqtt {
namespace {

constexpr std::string_view kMqttName = "MQTT";
constexpr std::string_view kMqisdpName = "MQIsdp";  // MQTT 3.1

// CONNECT flag bits (§3.1.2.3).
constexpr uint8_t kReservedFlag = 0x01;
constexpr uint8_t kCleanStartFlag = 0x02;
constexpr uint8_t kWillFlag = 0x04;
constexpr uint8_t kWillQosShift = 3;
constexpr uint8_t kWillQosMask = 0x18;
constexpr uint8_t kWillRetainFlag = 0x20;
constexpr uint8_t kPasswordFlag = 0x40;
constexpr uint8_t kUserNameFlag = 0x80;

bool IsV5(ProtocolVersion version) { return version == ProtocolVersion::kV5; }

// Maps the protocol name and level to a version; records an error (with the
// version a CONNACK should be framed for) when there is none.
std::optional<ProtocolVersion> ReadVersion(WireReader& reader, std::string_view name,
                                           uint8_t level) {
  if (name == kMqisdpName) {
    if (level == 3) return ProtocolVersion::kV31;
    reader.SetVersionHint(ProtocolVersion::kV31);
  } else if (name == kMqttName) {
    if (level == 4) return ProtocolVersion::kV311;
    if (level == 5) return ProtocolVersion::kV5;
    // Bit 7 is the bridge flag some brokers add; it does not change the
    // CONNACK format the client reads.
    const int base_level = level & 0x7F;
    reader.SetVersionHint(base_level >= 5 ? ProtocolVersion::kV5 : ProtocolVersion::kV311);
  } else {
    reader.Fail(ReasonCode::kProtocolError, "unknown protocol name");
    return std::nullopt;
  }
  reader.Fail(ReasonCode::kUnsupportedProtocolVersion,
              "unsupported protocol level " + std::to_string(level));
  return std::nullopt;
}

void CheckConnectFlags(WireReader& reader, uint8_t flags, ProtocolVersion version) {
  const uint8_t will_qos = (flags & kWillQosMask) >> kWillQosShift;
  if ((flags & kReservedFlag) != 0) {
    reader.Fail(ReasonCode::kMalformedPacket, "reserved CONNECT flag set");
  } else if (will_qos == 3) {
    reader.Fail(ReasonCode::kMalformedPacket, "will QoS 3");
  } else if ((flags & kWillFlag) == 0 && (will_qos != 0 || (flags & kWillRetainFlag) != 0)) {
    reader.Fail(ReasonCode::kMalformedPacket, "will QoS or retain without will flag");
  } else if (!IsV5(version) && (flags & kPasswordFlag) != 0 && (flags & kUserNameFlag) == 0) {
    reader.Fail(ReasonCode::kMalformedPacket, "password without user name");
  }
}

Will ReadWill(WireReader& reader, uint8_t flags, ProtocolVersion version) {
  Will will;
  if (IsV5(version)) will.properties = ReadProperties(reader, PropertyScope::kWill);
  will.topic = reader.Utf8String();
  will.payload = reader.BinaryData();
  will.qos = (flags & kWillQosMask) >> kWillQosShift;
  will.retain = (flags & kWillRetainFlag) != 0;
  return will;
}

uint8_t ConnectFlags(const ConnectPacket& packet) {
  uint8_t flags = packet.clean_start ? kCleanStartFlag : 0;
  if (packet.will) {
    flags |= kWillFlag | static_cast<uint8_t>(packet.will->qos << kWillQosShift);
    if (packet.will->retain) flags |= kWillRetainFlag;
  }
  if (packet.password) flags |= kPasswordFlag;
  if (packet.username) flags |= kUserNameFlag;
  return flags;
}

}  // namespace

ConnectPacket ReadConnect(WireReader& reader) {
  ConnectPacket packet;
  packet.protocol_name = reader.Utf8String();
  const uint8_t level = reader.Byte();
  if (!reader.ok()) return packet;
  const std::optional<ProtocolVersion> version = ReadVersion(reader, packet.protocol_name, level);
  if (!version) return packet;
  packet.version = *version;
  reader.SetVersionHint(packet.version);

  const uint8_t flags = reader.Byte();
  packet.keep_alive = reader.TwoByteInteger();
  CheckConnectFlags(reader, flags, packet.version);
  packet.clean_start = (flags & kCleanStartFlag) != 0;
  if (IsV5(packet.version)) packet.properties = ReadProperties(reader, PropertyScope::kConnect);
  packet.client_id = reader.Utf8String();
  if ((flags & kWillFlag) != 0) packet.will = ReadWill(reader, flags, packet.version);
  if ((flags & kUserNameFlag) != 0) packet.username = reader.Utf8String();
  if ((flags & kPasswordFlag) != 0) packet.password = reader.BinaryData();
  return packet;
}

// The packet carries its own version; the `version` argument is not used.
void WriteBody(const ConnectPacket& packet, ProtocolVersion /*version*/, WireWriter& writer) {
  const bool v5 = IsV5(packet.version);
  writer.String(packet.version == ProtocolVersion::kV31 ? kMqisdpName : kMqttName);
  writer.Byte(static_cast<uint8_t>(packet.version));
  writer.Byte(ConnectFlags(packet));
  writer.TwoByteInteger(packet.keep_alive);
  if (v5) WriteProperties(packet.properties, writer);
  writer.String(packet.client_id);
  if (packet.will) {
    if (v5) WriteProperties(packet.will->properties, writer);
    writer.String(packet.will->topic);
    writer.String(packet.will->payload);
  }
  if (packet.username) writer.String(*packet.username);
  if (packet.password) writer.String(*packet.password);
}

ConnackPacket ReadConnack(WireReader& reader, ProtocolVersion version) {
  ConnackPacket packet;
  const uint8_t flags = reader.Byte();
  const uint8_t code = reader.Byte();
  if (!reader.ok()) return packet;
  // 3.1 has no Session Present flag: the whole byte is unused there.
  if (version != ProtocolVersion::kV31) {
    if ((flags & 0xFE) != 0) reader.Fail(ReasonCode::kMalformedPacket, "reserved CONNACK flags");
    packet.session_present = (flags & 0x01) != 0;
  }
  if (IsV5(version)) {
    packet.reason = static_cast<ReasonCode>(code);
    if (!IsValidConnackReason(packet.reason)) {
      reader.Fail(ReasonCode::kProtocolError, "invalid CONNACK reason code");
    }
    packet.properties = ReadProperties(reader, PropertyScope::kConnack);
  } else if (std::optional<ReasonCode> reason = FromV3ConnackCode(code)) {
    packet.reason = *reason;
  } else {
    reader.Fail(ReasonCode::kMalformedPacket, "reserved CONNACK return code");
  }
  if (packet.session_present && packet.reason != ReasonCode::kSuccess) {
    reader.Fail(ReasonCode::kProtocolError, "session present on a refused connection");
  }
  return packet;
}

void WriteBody(const ConnackPacket& packet, ProtocolVersion version, WireWriter& writer) {
  const bool session_present = packet.session_present && version != ProtocolVersion::kV31;
  writer.Byte(session_present ? 0x01 : 0x00);
  if (IsV5(version)) {
    writer.Byte(static_cast<uint8_t>(packet.reason));
    WriteProperties(packet.properties, writer);
  } else {
    writer.Byte(ToV3ConnackCode(packet.reason));
  }
}

}  // namespace estuary::mqtt
