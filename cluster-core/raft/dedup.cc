#include "cluster-core/raft/dedup.h"

#include "model/hlc.h"

namespace estuary::raft {

void DedupWindow::Restore(const std::vector<DedupRecord>& records) {
  seen_.clear();
  order_.assign(records.begin(), records.end());
  for (const DedupRecord& record : records) {
    seen_[{record.id.producer, record.id.sequence}] = record.timestamp;
  }
}

bool DedupWindow::Apply(const Entry& entry) {
  Expire(entry.timestamp);
  if (entry.type != EntryType::kNormal || entry.write_id.producer == 0) return false;
  const std::pair key{entry.write_id.producer, entry.write_id.sequence};
  if (seen_.contains(key)) return true;
  seen_[key] = entry.timestamp;
  order_.push_back(DedupRecord{entry.write_id, entry.timestamp});
  return false;
}

// Timestamps increase along the log, so the oldest records are in front.
void DedupWindow::Expire(uint64_t timestamp) {
  const uint64_t now_ms = HybridLogicalClock::PhysicalMs(timestamp);
  while (!order_.empty() &&
         HybridLogicalClock::PhysicalMs(order_.front().timestamp) + window_ms_ < now_ms) {
    seen_.erase({order_.front().id.producer, order_.front().id.sequence});
    order_.pop_front();
  }
}

}  // namespace estuary::raft
