#include "model/message.h"

#include <cinttypes>
#include <cstdio>

namespace estuary {

std::string MessageId::ToString() const {
  // Fixed width, so ids of one node sort as text in the order they were
  // issued.
  char buffer[4 + 1 + 16 + 1 + 8 + 1];
  std::snprintf(buffer, sizeof(buffer), "%04" PRIx16 "-%016" PRIx64 "-%08" PRIx32, node,
                timestamp, sequence);
  return buffer;
}

Payload MakePayload(std::string bytes) {
  return std::make_shared<const std::string>(std::move(bytes));
}

namespace {

// Heap bytes of a string beyond the object itself; short strings live
// inside the object.
size_t HeapBytes(const std::string& text) {
  return text.capacity() > std::string().capacity() ? text.capacity() + 1 : 0;
}

size_t HeapBytes(const std::optional<std::string>& text) {
  return text ? HeapBytes(*text) : 0;
}

size_t PropertiesHeapBytes(const MessageProperties& properties) {
  size_t bytes = HeapBytes(properties.content_type) + HeapBytes(properties.response_topic) +
                 HeapBytes(properties.correlation_data);
  bytes += properties.user_properties.capacity() * sizeof(UserProperty);
  for (const UserProperty& property : properties.user_properties) {
    bytes += HeapBytes(property.key) + HeapBytes(property.value);
  }
  return bytes;
}

// A make_shared control block is two counters and a vtable pointer.
constexpr size_t kSharedControlBytes = 2 * sizeof(long) + sizeof(void*);

}  // namespace

size_t Message::ApproximateBytes() const {
  size_t bytes = sizeof(Message) + kSharedControlBytes;
  bytes += HeapBytes(topic) + HeapBytes(origin.client_id);
  bytes += PropertiesHeapBytes(properties);
  // The payload is shared by every delivery of a fan-out, but each queue
  // that holds the message keeps it alive, so each queue is charged for it.
  if (payload) {
    bytes += sizeof(std::string) + kSharedControlBytes + HeapBytes(*payload);
  }
  if (amqp_extras) {
    bytes += sizeof(std::string) + kSharedControlBytes + HeapBytes(*amqp_extras);
  }
  return bytes;
}

}  // namespace estuary
