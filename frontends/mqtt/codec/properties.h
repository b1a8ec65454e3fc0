#pragma once
// MQTT 5.0 properties (§2.2.2): reading with the per-packet rules of the
// property table (§2.2.2.2), writing in identifier order. Internal to the
// codec.
#include <cstddef>
#include <cstdint>

#include "frontends/mqtt/codec/packet.h"
#include "frontends/mqtt/codec/wire_reader.h"
#include "frontends/mqtt/codec/wire_writer.h"

namespace estuary::mqtt {

// Where a property list sits; a bit each so the table can list several.
enum class PropertyScope : uint16_t {
  kConnect = 1 << 0,
  kConnack = 1 << 1,
  kPublish = 1 << 2,
  kWill = 1 << 3,
  kPubAck = 1 << 4,  // PUBACK, PUBREC, PUBREL and PUBCOMP
  kSubscribe = 1 << 5,
  kSuback = 1 << 6,
  kUnsubscribe = 1 << 7,
  kUnsuback = 1 << 8,
  kDisconnect = 1 << 9,
  kAuth = 1 << 10,
};

// Reads a property length and that many bytes of properties. Unknown
// identifiers are Malformed; a property not allowed in `scope`, a repeated
// one (other than User Property, and Subscription Identifier in PUBLISH), a
// zero Receive Maximum / Maximum Packet Size / Subscription Identifier, a
// flag other than 0 or 1, and Authentication Data without a Method are
// Protocol Errors; Topic Alias 0 is Topic Alias Invalid.
Properties ReadProperties(WireReader& reader, PropertyScope scope);

// Writes the property length and then every present property.
void WriteProperties(const Properties& properties, WireWriter& writer);

// Bytes of the properties alone, without the length in front.
size_t PropertiesSize(const Properties& properties);

inline bool IsEmpty(const Properties& properties) { return properties == Properties{}; }

}  // namespace estuary::mqtt
