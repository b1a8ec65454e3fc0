#pragma once
// PeekConnect: what estuary-lb learns from the first bytes a client sends
// on the MQTT port, before any node is chosen. Pure; the bytes are never
// changed (the balancer forwards them as they came).
#include <cstdint>
#include <string>
#include <string_view>

namespace estuary::balancer {

enum class PeekStatus {
  kNeedMore,  // a prefix of a CONNECT: read on (within the size and time limits)
  kClientId,  // a whole CONNECT: client_id is set (may be empty: assigned by the node)
  kOpaque,    // not MQTT framing the balancer can read (TLS): route by load
  kForward,   // a CONNECT the node must answer (unsupported version): route by load
  kReject,    // garbage, another packet first, or larger than the limit: drop
};

struct PeekResult {
  PeekStatus status = PeekStatus::kNeedMore;
  std::string client_id;
  std::string why;  // for kReject and kForward, for the log
};

// `max_bytes` bounds the CONNECT (fixed header included).
PeekResult PeekConnect(std::string_view bytes, uint32_t max_bytes);

}  // namespace estuary::balancer
