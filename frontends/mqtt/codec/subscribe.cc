// SUBSCRIBE, SUBACK, UNSUBSCRIBE, UNSUBACK (§3.8 to §3.11).
#include "frontends/mqtt/codec/packet_codecs.h"
#include "frontends/mqtt/codec/properties.h"

namespace estuary::mqtt {
namespace {

bool IsV5(ProtocolVersion version) { return version == ProtocolVersion::kV5; }

// Subscription options byte (v5 §3.8.3.1; before v5 only the requested QoS,
// with the upper six bits reserved [MQTT-3.8.3-4 in 3.1.1]).
constexpr uint8_t kQosMask = 0x03;
constexpr uint8_t kNoLocalFlag = 0x04;
constexpr uint8_t kRetainAsPublishedFlag = 0x08;
constexpr uint8_t kRetainHandlingShift = 4;
constexpr uint8_t kV5ReservedBits = 0xC0;
constexpr uint8_t kV3ReservedBits = 0xFC;

SubscribeOptions ReadOptions(WireReader& reader, ProtocolVersion version) {
  const uint8_t byte = reader.Byte();
  SubscribeOptions options;
  options.qos = byte & kQosMask;
  if (!IsV5(version)) {
    if ((byte & kV3ReservedBits) != 0) {
      reader.Fail(ReasonCode::kMalformedPacket, "reserved bits in requested QoS");
    } else if (options.qos == 3) {
      reader.Fail(ReasonCode::kMalformedPacket, "requested QoS 3");
    }
    return options;
  }
  options.no_local = (byte & kNoLocalFlag) != 0;
  options.retain_as_published = (byte & kRetainAsPublishedFlag) != 0;
  options.retain_handling = (byte >> kRetainHandlingShift) & 0x03;
  if ((byte & kV5ReservedBits) != 0) {
    reader.Fail(ReasonCode::kMalformedPacket, "reserved subscription option bits set");
  } else if (options.qos == 3) {
    reader.Fail(ReasonCode::kProtocolError, "maximum QoS 3");
  } else if (options.retain_handling == 3) {
    reader.Fail(ReasonCode::kProtocolError, "retain handling 3");
  }
  return options;
}

uint8_t OptionsByte(const SubscribeOptions& options, ProtocolVersion version) {
  uint8_t byte = options.qos & kQosMask;
  if (!IsV5(version)) return byte;
  if (options.no_local) byte |= kNoLocalFlag;
  if (options.retain_as_published) byte |= kRetainAsPublishedFlag;
  byte |= static_cast<uint8_t>((options.retain_handling & 0x03) << kRetainHandlingShift);
  return byte;
}

// SUBACK return codes before v5: granted QoS 0..2 or 0x80 failure.
bool IsValidV3SubackCode(uint8_t code) { return code <= 2 || code == 0x80; }

void FailIfEmpty(WireReader& reader, bool empty, ReasonCode reason, const char* what) {
  if (reader.ok() && empty) reader.Fail(reason, what);
}

}  // namespace

SubscribePacket ReadSubscribe(WireReader& reader, ProtocolVersion version) {
  SubscribePacket packet;
  packet.packet_id = ReadPacketId(reader, "SUBSCRIBE");
  if (IsV5(version)) packet.properties = ReadProperties(reader, PropertyScope::kSubscribe);
  while (reader.ok() && !reader.empty()) {
    Subscription subscription;
    subscription.filter = reader.Utf8String();
    subscription.options = ReadOptions(reader, version);
    if (reader.ok()) packet.subscriptions.push_back(std::move(subscription));
  }
  // v5 [MQTT-3.8.3-2] calls it a Protocol Error, 3.1.1 [MQTT-3.8.3-3] a
  // violation that closes the connection.
  FailIfEmpty(reader, packet.subscriptions.empty(),
              IsV5(version) ? ReasonCode::kProtocolError : ReasonCode::kMalformedPacket,
              "SUBSCRIBE without subscriptions");
  return packet;
}

SubackPacket ReadSuback(WireReader& reader, ProtocolVersion version) {
  SubackPacket packet;
  packet.packet_id = ReadPacketId(reader, "SUBACK");
  if (IsV5(version)) packet.properties = ReadProperties(reader, PropertyScope::kSuback);
  while (reader.ok() && !reader.empty()) {
    const uint8_t code = reader.Byte();
    const auto reason = static_cast<ReasonCode>(code);
    if (IsV5(version) && !IsValidSubackReason(reason)) {
      reader.Fail(ReasonCode::kProtocolError, "invalid SUBACK reason code");
    } else if (!IsV5(version) && !IsValidV3SubackCode(code)) {
      reader.Fail(ReasonCode::kMalformedPacket, "invalid SUBACK return code");
    }
    packet.reasons.push_back(reason);  // 0x80 is Unspecified error in both
  }
  FailIfEmpty(reader, packet.reasons.empty(),
              IsV5(version) ? ReasonCode::kProtocolError : ReasonCode::kMalformedPacket,
              "SUBACK without reason codes");
  return packet;
}

UnsubscribePacket ReadUnsubscribe(WireReader& reader, ProtocolVersion version) {
  UnsubscribePacket packet;
  packet.packet_id = ReadPacketId(reader, "UNSUBSCRIBE");
  if (IsV5(version)) packet.properties = ReadProperties(reader, PropertyScope::kUnsubscribe);
  while (reader.ok() && !reader.empty()) {
    std::string filter = reader.Utf8String();
    if (reader.ok()) packet.filters.push_back(std::move(filter));
  }
  // [MQTT-3.10.3-2] in both 3.1.1 and v5.
  FailIfEmpty(reader, packet.filters.empty(), ReasonCode::kProtocolError,
              "UNSUBSCRIBE without topic filters");
  return packet;
}

UnsubackPacket ReadUnsuback(WireReader& reader, ProtocolVersion version) {
  UnsubackPacket packet;
  packet.packet_id = ReadPacketId(reader, "UNSUBACK");
  if (!IsV5(version)) return packet;  // 3.x: the packet id is all there is
  packet.properties = ReadProperties(reader, PropertyScope::kUnsuback);
  while (reader.ok() && !reader.empty()) {
    const auto reason = static_cast<ReasonCode>(reader.Byte());
    if (!IsValidUnsubackReason(reason)) {
      reader.Fail(ReasonCode::kProtocolError, "invalid UNSUBACK reason code");
    }
    packet.reasons.push_back(reason);
  }
  FailIfEmpty(reader, packet.reasons.empty(), ReasonCode::kProtocolError,
              "UNSUBACK without reason codes");
  return packet;
}

void WriteBody(const SubscribePacket& packet, ProtocolVersion version, WireWriter& writer) {
  writer.TwoByteInteger(packet.packet_id);
  if (IsV5(version)) WriteProperties(packet.properties, writer);
  for (const Subscription& subscription : packet.subscriptions) {
    writer.String(subscription.filter);
    writer.Byte(OptionsByte(subscription.options, version));
  }
}

void WriteBody(const SubackPacket& packet, ProtocolVersion version, WireWriter& writer) {
  writer.TwoByteInteger(packet.packet_id);
  if (IsV5(version)) WriteProperties(packet.properties, writer);
  for (ReasonCode reason : packet.reasons) {
    const auto code = static_cast<uint8_t>(reason);
    writer.Byte(IsV5(version) || !IsError(reason) ? code : 0x80);
  }
}

void WriteBody(const UnsubscribePacket& packet, ProtocolVersion version, WireWriter& writer) {
  writer.TwoByteInteger(packet.packet_id);
  if (IsV5(version)) WriteProperties(packet.properties, writer);
  for (const std::string& filter : packet.filters) writer.String(filter);
}

void WriteBody(const UnsubackPacket& packet, ProtocolVersion version, WireWriter& writer) {
  writer.TwoByteInteger(packet.packet_id);
  if (!IsV5(version)) return;
  WriteProperties(packet.properties, writer);
  for (ReasonCode reason : packet.reasons) writer.Byte(static_cast<uint8_t>(reason));
}

}  // namespace estuary::mqtt
