#pragma once
// The one internal message model shared by every frontend.
//
// A Message is immutable once published and shared by reference count
// (MessagePtr) among every delivery of a fan-out: neither the message nor
// its payload is copied per subscriber. Per-delivery state (granted QoS,
// packet ids, subscription identifiers, retain-as-published) lives with the
// delivery, not here. Thread-safety: a published Message may be read from
// any shard at once; nobody writes to it after publication.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace estuary {

enum class QoS : uint8_t { kAtMostOnce = 0, kAtLeastOnce = 1, kExactlyOnce = 2 };

inline QoS MinQoS(QoS a, QoS b) { return a < b ? a : b; }

enum class Protocol : uint8_t { kMqtt = 0, kAmqp = 1, kInternal = 2 };

// Cluster-unique: (origin node, HLC timestamp, per-node sequence).
struct MessageId {
  uint16_t node = 0;
  uint64_t timestamp = 0;  // HybridLogicalClock timestamp
  uint32_t sequence = 0;

  std::string ToString() const;  // "node-timestamp-sequence", hex
  friend bool operator==(const MessageId&, const MessageId&) = default;
};

// For unordered containers keyed by a MessageId (not stable across
// builds: never stored or sent).
struct MessageIdHash {
  size_t operator()(const MessageId& id) const {
    uint64_t h = id.timestamp * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t{id.sequence} << 16 | id.node) + 0x632BE59BD9B4E019ull + (h << 6) + (h >> 2);
    return static_cast<size_t>(h);
  }
};

// Reference-counted immutable bytes.
using Payload = std::shared_ptr<const std::string>;
Payload MakePayload(std::string bytes);

struct UserProperty {
  std::string key;
  std::string value;
  friend bool operator==(const UserProperty&, const UserProperty&) = default;
};

struct MessageProperties {
  std::optional<std::string> content_type;
  std::optional<std::string> response_topic;   // MQTT response topic / AMQP reply-to
  std::optional<std::string> correlation_data;  // binary
  std::optional<uint8_t> payload_format;        // 0 unspecified bytes, 1 UTF-8
  // Absolute expiry in the node's wall-clock milliseconds; unset = never.
  std::optional<int64_t> expiry_at_ms;
  std::vector<UserProperty> user_properties;  // in order, duplicates allowed
  friend bool operator==(const MessageProperties&, const MessageProperties&) = default;
};

struct Origin {
  Protocol protocol = Protocol::kInternal;
  std::string client_id;
  uint16_t node = 0;
};

struct Message {
  MessageId id;
  std::string topic;
  Payload payload;
  MessageProperties properties;
  QoS qos = QoS::kAtMostOnce;
  bool retain = false;
  bool durable = false;
  Origin origin;
  // What an AMQP 1.0 sender put in its message that the fields above cannot
  // carry (message-id, subject, user-id, group fields, creation-time,
  // content-encoding, priority, delivery annotations, foreign message
  // annotations, non-string application properties, typed correlation ids):
  // one standard AMQP message encoding holding only those parts, written and
  // read only by frontends/amqp/mapping (docs/mapping.md). Null for messages
  // from MQTT and for AMQP messages with nothing extra. Shared like the
  // payload: copying a Message copies one pointer, never the bytes.
  Payload amqp_extras;

  size_t PayloadSize() const { return payload ? payload->size() : 0; }
  // Approximate memory held by this message (for queue byte limits).
  size_t ApproximateBytes() const;
};

using MessagePtr = std::shared_ptr<const Message>;

}  // namespace estuary
