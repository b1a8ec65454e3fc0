// EncodePacket and EncodePublish: the fixed header (§2.1) and the dispatch to
// the packet families. Each packet is sized first (by running its writer in
// counting mode) so `out` grows once and the payload is copied once.
#include "frontends/mqtt/codec/encoder.h"

#include "frontends/mqtt/codec/packet_codecs.h"

namespace estuary::mqtt {
namespace {

uint8_t FirstByte(const Packet& packet) {
  if (const auto* publish = std::get_if<PublishPacket>(&packet)) {
    return PublishFirstByte(*publish);
  }
  const PacketType type = TypeOf(packet);
  const bool flagged = type == PacketType::kPubrel || type == PacketType::kSubscribe ||
                       type == PacketType::kUnsubscribe;
  return static_cast<uint8_t>(static_cast<uint8_t>(type) << 4 | (flagged ? 0x02 : 0x00));
}

void WriteAnyBody(const Packet& packet, ProtocolVersion version, WireWriter& writer) {
  std::visit([&](const auto& typed) { WriteBody(typed, version, writer); }, packet);
}

size_t BodySize(const Packet& packet, ProtocolVersion version) {
  WireWriter counter;
  WriteAnyBody(packet, version, counter);
  return counter.size();
}

// AUTH does not exist before v5.
bool Encodable(const Packet& packet, ProtocolVersion version) {
  return version == ProtocolVersion::kV5 || !std::holds_alternative<AuthPacket>(packet);
}

size_t FrameSize(size_t body_size) {
  return 1 + VariableByteIntegerSize(static_cast<uint32_t>(body_size)) + body_size;
}

size_t PublishHeaderSize(const PublishPacket& header_fields, ProtocolVersion version) {
  WireWriter counter;
  WritePublishHeader(header_fields, version, counter);
  return counter.size();
}

}  // namespace

void EncodePacket(const Packet& packet, ProtocolVersion version, std::string& out) {
  if (const auto* publish = std::get_if<PublishPacket>(&packet)) {
    EncodePublish(*publish, publish->payload, version, out);
    return;
  }
  if (!Encodable(packet, version)) return;
  const size_t body_size = BodySize(packet, version);
  out.reserve(out.size() + FrameSize(body_size));
  WireWriter writer(out);
  writer.Byte(FirstByte(packet));
  writer.VariableByteInteger(static_cast<uint32_t>(body_size));
  WriteAnyBody(packet, version, writer);
}

size_t EncodedSize(const Packet& packet, ProtocolVersion version) {
  if (!Encodable(packet, version)) return 0;
  return FrameSize(BodySize(packet, version));
}

void EncodePublish(const PublishPacket& header_fields, std::string_view payload,
                   ProtocolVersion version, std::string& out) {
  const size_t body_size = PublishHeaderSize(header_fields, version) + payload.size();
  out.reserve(out.size() + FrameSize(body_size));
  WireWriter writer(out);
  writer.Byte(PublishFirstByte(header_fields));
  writer.VariableByteInteger(static_cast<uint32_t>(body_size));
  WritePublishHeader(header_fields, version, writer);
  writer.Bytes(payload);
}

size_t EncodedPublishSize(const PublishPacket& header_fields, size_t payload_size,
                          ProtocolVersion version) {
  return FrameSize(PublishHeaderSize(header_fields, version) + payload_size);
}

}  // namespace estuary::mqtt
