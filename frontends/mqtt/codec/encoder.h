#pragma once
// Encoding MQTT packets to bytes: appends to `out`, never throws. Fields a
// version cannot carry are left out (properties and reason codes before v5;
// for 3.x SUBACK the reasons are the granted QoS or 0x80, CONNACK uses
// ToV3ConnackCode). The caller keeps packets within the peer's maximum
// packet size (EncodedSize tells it beforehand).
#include <cstddef>
#include <string>

#include "frontends/mqtt/codec/packet.h"

namespace estuary::mqtt {

void EncodePacket(const Packet& packet, ProtocolVersion version, std::string& out);
size_t EncodedSize(const Packet& packet, ProtocolVersion version);

// Encodes a PUBLISH without building a PublishPacket copy of the payload:
// the hot path for fan-out.
void EncodePublish(const PublishPacket& header_fields, std::string_view payload,
                   ProtocolVersion version, std::string& out);
size_t EncodedPublishSize(const PublishPacket& header_fields, size_t payload_size,
                          ProtocolVersion version);

}  // namespace estuary::mqtt
