#pragma once
// ForwardDedup: the QoS 2 forwards a node received from each peer in the
// last while, so that one sent again is delivered once (issue 29).
//
// A sender sends a forward again when the link it went out on was lost
// before the confirmation came back (ClusterAgent::ResendUnconfirmed):
// either the forward or its confirmation was lost with the link, and the
// sender cannot tell which. At QoS 1 a second delivery is allowed; at QoS 2
// it is not, so the receiver remembers each QoS 2 forward by (sender,
// message id) - message ids are unique in the cluster across restarts -
// and answers a copy instead of delivering it: at once if the original is
// already safe, else when the original becomes safe.
//
// Bounded: an entry lives `window_ms` (the sender gives up on a forward
// within its park timeout, so a copy never comes later) and at most
// `max_entries` are kept (the oldest go first, counted in evicted()).
// Owned by the agent, used on its loop only.
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "model/message.h"

namespace estuary::cluster {

class ForwardDedup {
 public:
  enum class Verdict {
    kNew,        // deliver it
    kSafe,       // a copy of one already safe here: confirm it now
    kWaiting,    // a copy of one not safe yet: confirmed with it (Safe)
  };

  ForwardDedup(int64_t window_ms, size_t max_entries) : window_ms_(window_ms), max_entries_(max_entries) {}

  // A QoS 2 forward from `from` with `forward_id` (not 0) carrying `id`.
  Verdict Arrive(uint16_t from, const MessageId& id, uint64_t forward_id, int64_t now_ms);
  // `forward_id` from `from` is safe here; returns the copies' ids that
  // waited for it (to be confirmed too).
  std::vector<uint64_t> Safe(uint16_t from, uint64_t forward_id);
  void Expire(int64_t now_ms);

  size_t size() const { return by_message_.size(); }
  uint64_t evicted() const { return evicted_; }
  uint64_t copies() const { return copies_; }

 private:
  struct Key {
    uint16_t from = 0;
    MessageId id;
    friend bool operator==(const Key&, const Key&) = default;
  };
  struct KeyHash {
    size_t operator()(const Key& key) const { return MessageIdHash{}(key.id) ^ (size_t{key.from} << 48); }
  };
  struct Entry {
    bool safe = false;
    uint64_t forward_id = 0;
    std::vector<uint64_t> waiting;
  };
  struct Arrival {
    int64_t at_ms = 0;
    Key key;
  };
  static uint64_t Pack(uint16_t from, uint64_t forward_id) { return forward_id ^ (uint64_t{from} << 48); }
  void DropOldest();

  int64_t window_ms_;
  size_t max_entries_;
  std::unordered_map<Key, Entry, KeyHash> by_message_;
  std::unordered_map<uint64_t, Key> pending_;  // (from, forward id) of originals not yet safe
  std::deque<Arrival> arrivals_;               // in arrival order, for expiry
  uint64_t evicted_ = 0;
  uint64_t copies_ = 0;
};

}  // namespace estuary::cluster
