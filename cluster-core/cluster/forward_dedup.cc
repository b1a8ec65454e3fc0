#include "cluster-core/cluster/forward_dedup.h"

namespace estuary::cluster {

ForwardDedup::Verdict ForwardDedup::Arrive(uint16_t from, const MessageId& id, uint64_t forward_id,
                                           int64_t now_ms) {
  const Key key{from, id};
  auto [it, inserted] = by_message_.try_emplace(key);
  if (!inserted) {
    ++copies_;
    if (it->second.safe) return Verdict::kSafe;
    it->second.waiting.push_back(forward_id);
    return Verdict::kWaiting;
  }
  it->second.forward_id = forward_id;
  pending_.emplace(Pack(from, forward_id), key);
  arrivals_.push_back({now_ms, key});
  while (by_message_.size() > max_entries_) {
    DropOldest();
    ++evicted_;
  }
  return Verdict::kNew;
}

std::vector<uint64_t> ForwardDedup::Safe(uint16_t from, uint64_t forward_id) {
  if (pending_.empty()) return {};
  auto pending = pending_.find(Pack(from, forward_id));
  if (pending == pending_.end()) return {};
  auto entry = by_message_.find(pending->second);
  pending_.erase(pending);
  if (entry == by_message_.end()) return {};
  entry->second.safe = true;
  return std::move(entry->second.waiting);
}

void ForwardDedup::DropOldest() {
  const Arrival& oldest = arrivals_.front();
  if (auto entry = by_message_.find(oldest.key); entry != by_message_.end()) {
    // Copies still waiting on an original dropped unconfirmed are never
    // confirmed from here: the sender treats them as any forward whose
    // confirmation does not come (its own timeouts).
    pending_.erase(Pack(oldest.key.from, entry->second.forward_id));
    by_message_.erase(entry);
  }
  arrivals_.pop_front();
}

void ForwardDedup::Expire(int64_t now_ms) {
  while (!arrivals_.empty() && now_ms - arrivals_.front().at_ms > window_ms_) DropOldest();
}

}  // namespace estuary::cluster
