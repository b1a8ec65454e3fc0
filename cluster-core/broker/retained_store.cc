#include "cluster-core/broker/retained_store.h"

#include <tuple>

#include "model/hlc.h"
#include "model/topic.h"

namespace estuary::core {
namespace {

bool IsTombstone(const Message& message) { return message.PayloadSize() == 0; }

}  // namespace

bool RetainedStore::IsOlder(const Message& incoming, const Message& held) {
  if (incoming.id.timestamp == 0 || held.id.timestamp == 0) return false;  // unordered
  return std::tie(incoming.id.timestamp, incoming.id.node, incoming.id.sequence) <
         std::tie(held.id.timestamp, held.id.node, held.id.sequence);
}

bool RetainedStore::Apply(const MessagePtr& message) {
  auto it = messages_.find(message->topic);
  if (it != messages_.end()) {
    if (IsOlder(*message, *it->second)) return false;
    if (IsTombstone(*it->second)) --tombstones_;
    messages_.erase(it);
  }
  if (IsTombstone(*message)) {
    if (message->id.timestamp == 0) return true;  // nothing to order later changes by
    ++tombstones_;
  }
  messages_.emplace(message->topic, message);
  return true;
}

void RetainedStore::Match(std::string_view filter,
                          const std::function<void(const MessagePtr&)>& visit) const {
  const size_t wildcard = filter.find_first_of("+#");
  if (wildcard == std::string_view::npos) {
    auto it = messages_.find(filter);
    if (it != messages_.end() && !IsTombstone(*it->second)) visit(it->second);
    return;
  }
  // Every matching topic starts with the literal part before the wildcard,
  // except that "a/#" also matches "a" itself (which shares "a" as prefix).
  std::string_view prefix = filter.substr(0, wildcard);
  if (filter[wildcard] == '#' && !prefix.empty()) prefix.remove_suffix(1);
  for (auto it = messages_.lower_bound(prefix); it != messages_.end(); ++it) {
    if (it->first.compare(0, prefix.size(), prefix) != 0) break;
    if (!IsTombstone(*it->second) && TopicMatches(filter, it->first)) visit(it->second);
  }
}

void RetainedStore::ForEach(const std::function<void(const MessagePtr&)>& visit) const {
  for (const auto& [topic, message] : messages_) visit(message);
}

bool RetainedStore::IsExpiredTombstone(const Message& message, int64_t now_wall_ms) const {
  if (!IsTombstone(message) || message.id.timestamp == 0) return false;
  const auto cleared_at = static_cast<int64_t>(HybridLogicalClock::PhysicalMs(message.id.timestamp));
  return cleared_at < now_wall_ms - tombstone_ttl_ms_;
}

size_t RetainedStore::ExpireBefore(int64_t now_wall_ms) {
  size_t removed = 0;
  for (auto it = messages_.begin(); it != messages_.end();) {
    const Message& message = *it->second;
    if (IsTombstone(message)) {
      if (IsExpiredTombstone(message, now_wall_ms)) {
        it = messages_.erase(it);
        --tombstones_;
        continue;
      }
    } else if (message.properties.expiry_at_ms && *message.properties.expiry_at_ms <= now_wall_ms) {
      it = messages_.erase(it);
      ++removed;
      continue;
    }
    ++it;
  }
  return removed;
}

}  // namespace estuary::core
