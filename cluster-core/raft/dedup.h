#pragma once
// DedupWindow: the write ids (producer, sequence) seen in the committed log
// over the last `window_ms` of entry timestamps. It is a pure function of
// the committed log (and the window carried in a snapshot), so every
// replica computes the same answer for every entry: a retried write is
// applied once, wherever and whenever it commits within the window.
// Expiry goes by the entries' HLC timestamps, never by a local clock.
// Owned by one Raft; not thread-safe.
#include <cstdint>
#include <deque>
#include <map>
#include <utility>
#include <vector>

#include "cluster-core/raft/types.h"

namespace estuary::raft {

class DedupWindow {
 public:
  explicit DedupWindow(uint64_t window_ms) : window_ms_(window_ms) {}

  void Restore(const std::vector<DedupRecord>& records);
  std::vector<DedupRecord> Records() const { return {order_.begin(), order_.end()}; }
  size_t size() const { return seen_.size(); }

  // Folds the next committed entry in. Returns true if its write id was
  // seen within the window (a duplicate, not to be applied).
  bool Apply(const Entry& entry);

 private:
  void Expire(uint64_t timestamp);

  uint64_t window_ms_;
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> seen_;  // id -> timestamp
  std::deque<DedupRecord> order_;  // by timestamp (the log's order)
};

}  // namespace estuary::raft
