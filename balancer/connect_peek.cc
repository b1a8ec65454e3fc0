#include "balancer/connect_peek.h"

#include <variant>

#include "frontends/mqtt/codec/decoder.h"

namespace estuary::balancer {
namespace {

constexpr uint8_t kTlsHandshakeRecord = 0x16;
constexpr uint8_t kConnectFirstByte = 0x10;  // type 1, flags 0 (MQTT-2.1.3-1)

}  // namespace

PeekResult PeekConnect(std::string_view bytes, uint32_t max_bytes) {
  if (bytes.empty()) return {};
  const auto first = static_cast<uint8_t>(bytes[0]);
  if (first == kTlsHandshakeRecord) return {PeekStatus::kOpaque, {}, "TLS"};
  if (first != kConnectFirstByte) return {PeekStatus::kReject, {}, "first packet is not CONNECT"};
  auto frame = mqtt::PeekFrame(bytes, max_bytes);
  if (!frame) return {PeekStatus::kReject, {}, frame.error().message};
  if (frame->header_size == 0 || bytes.size() < frame->total_size()) return {};
  auto packet = mqtt::DecodePacket(bytes.substr(0, frame->total_size()), mqtt::ProtocolVersion::kV311);
  if (!packet) {
    // A CONNECT whose protocol the node recognises gets its CONNACK there.
    if (packet.error().version_hint) return {PeekStatus::kForward, {}, packet.error().message};
    return {PeekStatus::kReject, {}, packet.error().message};
  }
  const auto* connect = std::get_if<mqtt::ConnectPacket>(&*packet);
  if (connect == nullptr) return {PeekStatus::kReject, {}, "first packet is not CONNECT"};
  return {PeekStatus::kClientId, connect->client_id, {}};
}

}  // namespace estuary::balancer
