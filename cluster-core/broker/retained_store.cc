#include "cluster-core/broker/retained_store.h"

#include "model/topic.h"

namespace estuary::core {

void RetainedStore::Apply(const MessagePtr& message) {
  if (message->PayloadSize() == 0) {
    auto it = messages_.find(message->topic);
    if (it != messages_.end()) messages_.erase(it);
    return;
  }
  messages_.insert_or_assign(message->topic, message);
}

void RetainedStore::Match(std::string_view filter,
                          const std::function<void(const MessagePtr&)>& visit) const {
  const size_t wildcard = filter.find_first_of("+#");
  if (wildcard == std::string_view::npos) {
    auto it = messages_.find(filter);
    if (it != messages_.end()) visit(it->second);
    return;
  }
  // Every matching topic starts with the literal part before the wildcard,
  // except that "a/#" also matches "a" itself (which shares "a" as prefix).
  std::string_view prefix = filter.substr(0, wildcard);
  if (filter[wildcard] == '#' && !prefix.empty()) prefix.remove_suffix(1);
  for (auto it = messages_.lower_bound(prefix); it != messages_.end(); ++it) {
    if (it->first.compare(0, prefix.size(), prefix) != 0) break;
    if (TopicMatches(filter, it->first)) visit(it->second);
  }
}

size_t RetainedStore::ExpireBefore(int64_t now_wall_ms) {
  size_t removed = 0;
  for (auto it = messages_.begin(); it != messages_.end();) {
    const auto& expiry = it->second->properties.expiry_at_ms;
    if (expiry && *expiry <= now_wall_ms) {
      it = messages_.erase(it);
      ++removed;
    } else {
      ++it;
    }
  }
  return removed;
}

}  // namespace estuary::core
