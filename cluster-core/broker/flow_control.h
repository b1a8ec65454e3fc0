#pragma once
// Ingress flow control: a publisher whose messages land in the queue of a
// connected subscriber that cannot keep up is paused (its socket is not
// read) until that queue drains, instead of the queue overflowing and
// dropping messages that were already acknowledged.
//
// Publishers register a PublisherFlow with their shard and get a FlowId;
// a congested session (on any shard) remembers the (shard, FlowId) pairs
// that fed it and releases them when its queue falls below the low mark.
// Offline sessions never pause anyone: their queues are bounded and drop.
#include <cstdint>

namespace estuary::core {

using FlowId = uint64_t;

// Forwards to other shards a publisher may have in flight before it is
// paused; the receiving shards return credit in batches once delivered.
// It bounds how far a queue can overshoot its congestion mark while a pause
// travels between shards.
inline constexpr uint32_t kForwardWindow = 128;

struct FlowRef {
  uint16_t shard = 0;
  FlowId id = 0;
  friend bool operator==(const FlowRef&, const FlowRef&) = default;
  friend bool operator<(const FlowRef& a, const FlowRef& b) {
    return a.shard != b.shard ? a.shard < b.shard : a.id < b.id;
  }
};

class PublisherFlow {
 public:
  virtual ~PublisherFlow() = default;
  // Called once per congested session that holds this publisher; reading
  // resumes when every Pause has been matched by a Resume.
  virtual void PauseIngress() = 0;
  virtual void ResumeIngress() = 0;
};

}  // namespace estuary::core
