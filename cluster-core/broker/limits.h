#pragma once
// Limits a broker enforces per session and per node. All configurable
// (server/config.h maps them from TOML and flags).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace estuary::core {

// What a session's full queue does with a message for it (--queue-overflow,
// docs/configuration.md "Full queues"): drop the new one (the default), drop
// the oldest queued one to make room, or drop the new one and tell its
// publisher (MQTT 5 QoS 1/2: PUBACK/PUBREC 0x97; AMQP: rejected,
// amqp:resource-limit-exceeded).
enum class QueueOverflow : uint8_t { kDropNew, kDropOldest, kReject };

// "drop-new", "drop-oldest", "reject" (the flag's values).
inline std::optional<QueueOverflow> ParseQueueOverflow(std::string_view name) {
  if (name == "drop-new") return QueueOverflow::kDropNew;
  if (name == "drop-oldest") return QueueOverflow::kDropOldest;
  if (name == "reject") return QueueOverflow::kReject;
  return std::nullopt;
}
inline std::string_view QueueOverflowName(QueueOverflow overflow) {
  switch (overflow) {
    case QueueOverflow::kDropOldest: return "drop-oldest";
    case QueueOverflow::kReject: return "reject";
    case QueueOverflow::kDropNew: break;
  }
  return "drop-new";
}

struct SessionLimits {
  size_t max_queued_messages = 1000;       // per session, queued (not in flight)
  size_t max_queued_bytes = 64 * 1024 * 1024;
  bool queue_qos0_offline = false;         // keep QoS 0 for offline sessions
  QueueOverflow queue_overflow = QueueOverflow::kDropNew;
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
  // Per client connection, enforced as backpressure (the socket is not
  // read until the budget refills; docs/security.md "Abuse limits"): PUBLISH
  // packets (AMQP transfers) per second and their bytes per second. 0: none.
  uint32_t max_publish_rate = 0;
  uint64_t max_publish_bytes_rate = 0;
};

}  // namespace estuary::core
