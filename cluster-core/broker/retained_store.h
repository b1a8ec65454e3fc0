#pragma once
// RetainedStore: the last retained message per topic. Every shard holds a
// full replica (retained updates are broadcast to all shards), so a
// SUBSCRIBE is answered from local memory.
//
// Clearing a topic (an empty retained payload) leaves a tombstone: the
// clearing message itself, with its id. Between two changes of one topic
// the newer message id (hybrid logical clock timestamp, then node, then
// sequence) wins, so a stale value arriving later (a node that was down
// while the topic was cleared, its recovered copy, a late snapshot) cannot
// bring a cleared topic back. Messages without a timestamp (id 0) are not
// ordered: they always apply, as before tombstones existed. Tombstones are
// dropped after tombstone_ttl_ms (ExpireBefore); a node down for longer
// than that can still bring a value back.
//
// Threading: one per shard, used on that shard's loop only.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "model/message.h"

namespace estuary::core {

class RetainedStore {
 public:
  static constexpr int64_t kDefaultTombstoneTtlMs = 24 * 3600 * 1000;

  // Stores `message` for its topic, or clears the topic when the payload is
  // empty [MQTT-3.3.1-10], keeping a tombstone if the message has an id.
  // Returns false, changing nothing, when the topic holds a newer message
  // or tombstone.
  bool Apply(const MessagePtr& message);
  // Calls visit for every retained message whose topic matches `filter`
  // (never a tombstone). Filters without wildcards are a single lookup;
  // wildcard filters scan only the topics sharing the filter's literal prefix.
  void Match(std::string_view filter, const std::function<void(const MessagePtr&)>& visit) const;
  // Every entry, tombstones (empty payload) included, in topic order: what
  // a snapshot for another node carries.
  void ForEach(const std::function<void(const MessagePtr&)>& visit) const;
  // Drops messages whose expiry passed (wall-clock ms) and returns how many;
  // also drops tombstones older than the TTL (not counted).
  size_t ExpireBefore(int64_t now_wall_ms);
  size_t size() const { return messages_.size() - tombstones_; }  // live messages
  size_t tombstones() const { return tombstones_; }
  void set_tombstone_ttl_ms(int64_t ttl_ms) { tombstone_ttl_ms_ = ttl_ms; }

  // True when `incoming` is older than `held` (both ordered by id).
  static bool IsOlder(const Message& incoming, const Message& held);
  // True for a tombstone (empty payload, with an id) older than the TTL at
  // `now_wall_ms`: recovery deletes those from disk instead of loading them.
  bool IsExpiredTombstone(const Message& message, int64_t now_wall_ms) const;

 private:
  std::map<std::string, MessagePtr, std::less<>> messages_;
  size_t tombstones_ = 0;
  int64_t tombstone_ttl_ms_ = kDefaultTombstoneTtlMs;
};

}  // namespace estuary::core
