#pragma once
// InflightWindow: MQTT packet identifiers of one publisher's QoS 1/2
// messages awaiting acknowledgement, with the time each was sent.
//
// Hands out ids 1..65535 round-robin, skipping ids still in use, up to
// `capacity` at once. Pure bookkeeping; owned by the publisher's loop thread.
#include <cstdint>
#include <optional>
#include <vector>

namespace estuary::bench {

class InflightWindow {
 public:
  enum class Stage : uint8_t { kFree, kAwaitingAck, kAwaitingComplete };

  explicit InflightWindow(uint32_t capacity);  // clamped to 1..65535

  bool full() const { return in_use_ >= capacity_; }
  uint32_t in_use() const { return in_use_; }
  uint32_t capacity() const { return capacity_; }
  void set_capacity(uint32_t capacity);  // e.g. lowered to the server's receive maximum

  // A free id (marked kAwaitingAck, stamped with sent_ns), or nullopt when full.
  std::optional<uint16_t> Acquire(int64_t sent_ns);
  Stage stage(uint16_t id) const { return stage_[id]; }
  // QoS 2: PUBREC arrived, PUBCOMP is next.
  void MarkAwaitingComplete(uint16_t id);
  // Frees an id in use; returns its send time, or nullopt for an id not in use.
  std::optional<int64_t> Release(uint16_t id);

 private:
  uint32_t capacity_;
  uint32_t in_use_ = 0;
  uint16_t next_ = 1;
  std::vector<Stage> stage_;
  std::vector<int64_t> sent_ns_;
};

}  // namespace estuary::bench
