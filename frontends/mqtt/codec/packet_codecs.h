#pragma once
// The per-family halves of decoder.cc and encoder.cc. Internal to the codec.
//
// Read* functions read one packet's body (everything after the fixed header)
// from a reader that holds exactly that body, and record any error in the
// reader; the caller checks ok() and that nothing is left over.
// WriteBody functions write everything after the remaining length; run with
// a counting writer they give the remaining length.
#include <cstdint>
#include <string_view>

#include "frontends/mqtt/codec/packet.h"
#include "frontends/mqtt/codec/wire_reader.h"
#include "frontends/mqtt/codec/wire_writer.h"

namespace estuary::mqtt {

// connect.cc
ConnectPacket ReadConnect(WireReader& reader);
ConnackPacket ReadConnack(WireReader& reader, ProtocolVersion version);
void WriteBody(const ConnectPacket& packet, ProtocolVersion version, WireWriter& writer);
void WriteBody(const ConnackPacket& packet, ProtocolVersion version, WireWriter& writer);

// publish.cc
PublishPacket ReadPublish(WireReader& reader, uint8_t flags, ProtocolVersion version);
uint8_t PublishFirstByte(const PublishPacket& packet);
// Topic, packet id and properties: the PUBLISH body without its payload.
void WritePublishHeader(const PublishPacket& packet, ProtocolVersion version,
                        WireWriter& writer);
void WriteBody(const PublishPacket& packet, ProtocolVersion version, WireWriter& writer);

// acks.cc: PUBACK, PUBREC, PUBREL, PUBCOMP, and the packets that are only a
// reason code and properties or nothing at all.
AckPacket ReadAck(WireReader& reader, PacketType type, ProtocolVersion version);
DisconnectPacket ReadDisconnect(WireReader& reader, ProtocolVersion version);
AuthPacket ReadAuth(WireReader& reader);
void WriteBody(const AckPacket& packet, ProtocolVersion version, WireWriter& writer);
void WriteBody(const DisconnectPacket& packet, ProtocolVersion version, WireWriter& writer);
void WriteBody(const AuthPacket& packet, ProtocolVersion version, WireWriter& writer);
void WriteBody(const PingreqPacket& packet, ProtocolVersion version, WireWriter& writer);
void WriteBody(const PingrespPacket& packet, ProtocolVersion version, WireWriter& writer);

// subscribe.cc
SubscribePacket ReadSubscribe(WireReader& reader, ProtocolVersion version);
SubackPacket ReadSuback(WireReader& reader, ProtocolVersion version);
UnsubscribePacket ReadUnsubscribe(WireReader& reader, ProtocolVersion version);
UnsubackPacket ReadUnsuback(WireReader& reader, ProtocolVersion version);
void WriteBody(const SubscribePacket& packet, ProtocolVersion version, WireWriter& writer);
void WriteBody(const SubackPacket& packet, ProtocolVersion version, WireWriter& writer);
void WriteBody(const UnsubscribePacket& packet, ProtocolVersion version, WireWriter& writer);
void WriteBody(const UnsubackPacket& packet, ProtocolVersion version, WireWriter& writer);

// Shared by the families: a non-zero packet identifier [MQTT-2.2.1-3].
uint16_t ReadPacketId(WireReader& reader, const char* packet_name);

}  // namespace estuary::mqtt
