// PUBLISH (§3.3, 3.1.1 §3.3).
#include "frontends/mqtt/codec/packet_codecs.h"
#include "frontends/mqtt/codec/properties.h"

namespace estuary::mqtt {
namespace {

constexpr uint8_t kDupFlag = 0x08;
constexpr uint8_t kRetainFlag = 0x01;
constexpr uint8_t kQosShift = 1;
constexpr uint8_t kQosMask = 0x06;

}  // namespace

PublishPacket ReadPublish(WireReader& reader, uint8_t flags, ProtocolVersion version) {
  PublishPacket packet;
  packet.dup = (flags & kDupFlag) != 0;
  packet.qos = (flags & kQosMask) >> kQosShift;
  packet.retain = (flags & kRetainFlag) != 0;
  if (packet.qos == 3) {
    reader.Fail(ReasonCode::kMalformedPacket, "PUBLISH with QoS 3");
  } else if (packet.qos == 0 && packet.dup) {
    reader.Fail(ReasonCode::kMalformedPacket, "PUBLISH with QoS 0 and DUP set");
  }
  // Only the UTF-8 form of the topic is checked here; wildcards and
  // emptiness in 3.x are the session's to judge.
  packet.topic = reader.Utf8String();
  if (packet.qos > 0) packet.packet_id = ReadPacketId(reader, "PUBLISH");
  if (version == ProtocolVersion::kV5) {
    packet.properties = ReadProperties(reader, PropertyScope::kPublish);
    if (reader.ok() && packet.topic.empty() && !packet.properties.topic_alias) {
      reader.Fail(ReasonCode::kProtocolError, "PUBLISH without topic name or topic alias");
    }
  }
  packet.payload = std::string(reader.Rest());
  return packet;
}

uint8_t PublishFirstByte(const PublishPacket& packet) {
  uint8_t first = static_cast<uint8_t>(PacketType::kPublish) << 4;
  if (packet.dup) first |= kDupFlag;
  first |= static_cast<uint8_t>(packet.qos << kQosShift) & kQosMask;
  if (packet.retain) first |= kRetainFlag;
  return first;
}

void WritePublishHeader(const PublishPacket& packet, ProtocolVersion version,
                        WireWriter& writer) {
  writer.String(packet.topic);
  if (packet.qos > 0) writer.TwoByteInteger(packet.packet_id);
  if (version == ProtocolVersion::kV5) WriteProperties(packet.properties, writer);
}

void WriteBody(const PublishPacket& packet, ProtocolVersion version, WireWriter& writer) {
  WritePublishHeader(packet, version, writer);
  writer.Bytes(packet.payload);
}

}  // namespace estuary::mqtt
