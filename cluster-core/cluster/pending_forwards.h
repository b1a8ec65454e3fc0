#pragma once
// PendingForwards: the QoS 1/2 forwards a ClusterAgent waits to see
// confirmed (kForwardSafe), by forward id. Ids are handed out here,
// consecutively, and every entry gets the same timeout, so the oldest entry
// is also the first to expire: a deque indexed by id - front id, with no
// allocation per forward (a released entry stays as a hole until it reaches
// the front, so memory is bounded by the forwards made within one timeout).
// Each entry keeps its message (shared, not copied) so that a forward its
// node never confirmed can be sent again to the sessions taken from that
// node (docs/partitions.md, "The takeover gap").
// Owned by the agent, used on its loop only.
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "cluster-core/links/transport.h"
#include "model/message.h"

namespace estuary::cluster {

class PendingForwards {
 public:
  struct Entry {
    NodeId node = 0;
    uint16_t shard = 0;   // the origin shard, where `token` completes
    uint64_t token = 0;   // the shard's safe token (0: a hole)
    int64_t deadline_ms = 0;
    MessagePtr message;
    bool plain = false;
    std::vector<std::string> shared_keys;
    uint64_t id = 0;  // set when taken: a late confirmation of a parked forward names it
  };

  // Returns the new forward id (never 0). `deadline_ms` must not be below
  // the previous entry's (the agent adds one fixed timeout to its clock).
  uint64_t Add(NodeId node, uint16_t shard, uint64_t token, int64_t deadline_ms, MessagePtr message = nullptr,
               bool plain = false, std::vector<std::string> shared_keys = {}) {
    entries_.push_back(Entry{node, shard, token, deadline_ms, std::move(message), plain, std::move(shared_keys)});
    ++live_;
    return front_id_ + entries_.size() - 1;
  }
  // The entry for `id`, removed; nullopt if unknown or already taken.
  std::optional<Entry> Take(uint64_t id) {
    if (id < front_id_ || id - front_id_ >= entries_.size()) return std::nullopt;
    Entry& entry = entries_[id - front_id_];
    if (entry.token == 0) return std::nullopt;
    Entry taken = std::move(entry);
    taken.id = id;
    entry.token = 0;
    --live_;
    Trim();
    return taken;
  }
  // Every entry whose deadline is at or before `now`, oldest first, removed.
  std::vector<Entry> TakeExpired(int64_t now) {
    std::vector<Entry> out;
    uint64_t id = front_id_;
    for (Entry& entry : entries_) {
      const uint64_t entry_id = id++;
      if (entry.deadline_ms > now) break;  // deadlines grow with the ids
      if (entry.token == 0) continue;
      out.push_back(std::move(entry));
      out.back().id = entry_id;
      entry.token = 0;
      --live_;
    }
    Trim();
    return out;
  }
  // Every entry for `node`, oldest first, removed.
  std::vector<Entry> TakeForNode(NodeId node) {
    std::vector<Entry> out;
    for (Entry& entry : entries_) {
      if (entry.token == 0 || entry.node != node) continue;
      out.push_back(std::move(entry));
      entry.token = 0;
      --live_;
    }
    Trim();
    return out;
  }
  // Forwards waiting for a confirmation.
  size_t size() const { return live_; }

 private:
  void Trim() {
    while (!entries_.empty() && entries_.front().token == 0) {
      entries_.pop_front();
      ++front_id_;
    }
  }
  std::deque<Entry> entries_;
  uint64_t front_id_ = 1;
  size_t live_ = 0;
};

}  // namespace estuary::cluster
