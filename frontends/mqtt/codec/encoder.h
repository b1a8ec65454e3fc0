#pragma once
// Encoding MQTT packets to bytes: appends to `out`, never throws. Fields a
// version cannot carry are left out (properties and reason codes before v5;
// for 3.x SUBACK the reasons are the granted QoS or 0x80, CONNACK uses
// ToV3ConnackCode). The caller keeps packets within the peer's maximum
// packet size (EncodedSize tells it beforehand).
//
// Preconditions the encoder does not check (decoded packets meet them all):
// strings and binary fields of at most 65535 bytes, QoS at most 2, a
// remaining length under 256 MiB, v5 reason codes that the packet type
// allows. A CONNECT is encoded for its own `version` field (the protocol
// name follows from it); AUTH encodes to nothing before v5. Encoders pick the
// shortest v5 form: acks and DISCONNECT without properties and with Success
// leave out the reason code too.
#include <cstddef>
#include <string>
#include <string_view>

#include "frontends/mqtt/codec/packet.h"

namespace estuary::mqtt {

void EncodePacket(const Packet& packet, ProtocolVersion version, std::string& out);
size_t EncodedSize(const Packet& packet, ProtocolVersion version);

// Encodes a PUBLISH without building a PublishPacket copy of the payload:
// the hot path for fan-out. header_fields.payload is ignored; `out` grows
// once and the payload is copied into it once.
void EncodePublish(const PublishPacket& header_fields, std::string_view payload,
                   ProtocolVersion version, std::string& out);
size_t EncodedPublishSize(const PublishPacket& header_fields, size_t payload_size,
                          ProtocolVersion version);

}  // namespace estuary::mqtt
