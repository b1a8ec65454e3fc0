#include "frontends/mqtt/codec/packet.h"

namespace estuary::mqtt {

const char* ToString(PacketType type) {
  switch (type) {
    case PacketType::kConnect: return "CONNECT";
    case PacketType::kConnack: return "CONNACK";
    case PacketType::kPublish: return "PUBLISH";
    case PacketType::kPuback: return "PUBACK";
    case PacketType::kPubrec: return "PUBREC";
    case PacketType::kPubrel: return "PUBREL";
    case PacketType::kPubcomp: return "PUBCOMP";
    case PacketType::kSubscribe: return "SUBSCRIBE";
    case PacketType::kSuback: return "SUBACK";
    case PacketType::kUnsubscribe: return "UNSUBSCRIBE";
    case PacketType::kUnsuback: return "UNSUBACK";
    case PacketType::kPingreq: return "PINGREQ";
    case PacketType::kPingresp: return "PINGRESP";
    case PacketType::kDisconnect: return "DISCONNECT";
    case PacketType::kAuth: return "AUTH";
  }
  return "RESERVED";
}

namespace {

struct TypeVisitor {
  PacketType operator()(const ConnectPacket&) const { return PacketType::kConnect; }
  PacketType operator()(const ConnackPacket&) const { return PacketType::kConnack; }
  PacketType operator()(const PublishPacket&) const { return PacketType::kPublish; }
  PacketType operator()(const AckPacket& ack) const { return ack.type; }
  PacketType operator()(const SubscribePacket&) const { return PacketType::kSubscribe; }
  PacketType operator()(const SubackPacket&) const { return PacketType::kSuback; }
  PacketType operator()(const UnsubscribePacket&) const { return PacketType::kUnsubscribe; }
  PacketType operator()(const UnsubackPacket&) const { return PacketType::kUnsuback; }
  PacketType operator()(const PingreqPacket&) const { return PacketType::kPingreq; }
  PacketType operator()(const PingrespPacket&) const { return PacketType::kPingresp; }
  PacketType operator()(const DisconnectPacket&) const { return PacketType::kDisconnect; }
  PacketType operator()(const AuthPacket&) const { return PacketType::kAuth; }
};

}  // namespace

PacketType TypeOf(const Packet& packet) { return std::visit(TypeVisitor{}, packet); }

}  // namespace estuary::mqtt
