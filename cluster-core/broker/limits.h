#pragma once
// Limits a broker enforces per session and per node. All configurable
// (server/config.h maps them from TOML and flags).
#include <cstddef>
#include <cstdint>

namespace estuary::core {

struct SessionLimits {
  size_t max_queued_messages = 1000;       // per session, queued (not in flight)
  size_t max_queued_bytes = 64 * 1024 * 1024;
  bool queue_qos0_offline = false;         // keep QoS 0 for offline sessions
};

struct BrokerLimits {
  SessionLimits session;
  uint32_t max_connections = 100000;       // per node
  uint32_t max_packet_size = 1024 * 1024;  // bytes, inbound, advertised to v5 clients
  uint16_t receive_maximum = 1024;         // inbound QoS 1/2 in flight per client
  uint16_t topic_alias_maximum = 64;       // inbound aliases per client
  uint32_t max_session_expiry = UINT32_MAX;  // seconds; caps what clients ask
  uint16_t max_keep_alive = 65535;         // seconds; v5 server keep alive when lower
  bool retain_available = true;
  uint8_t maximum_qos = 2;
};

}  // namespace estuary::core
