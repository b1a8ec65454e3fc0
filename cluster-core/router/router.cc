#include "cluster-core/router/router.h"

#include <algorithm>
#include <functional>

namespace estuary::core {

std::string SharedKey(std::string_view group, std::string_view filter) {
  std::string key;
  key.reserve(group.size() + 1 + filter.size());
  key.append(group).push_back('\0');
  key.append(filter);
  return key;
}

std::optional<RouteUpdate> Router::AddLocal(std::string_view filter, std::string_view shared_key,
                                            SubscriberRef subscriber) {
  RoutesChanged();  // even an options update in place: cached refs would carry the old ones
  if (shared_key.empty()) {
    if (!plain_.Insert(filter, subscriber)) return std::nullopt;  // options updated in place
    auto [it, inserted] = plain_counts_.try_emplace(std::string(filter), 0);
    if (++it->second > 1) return std::nullopt;
    return RouteUpdate{true, std::string(filter), {}, self_};
  }
  auto it = shared_groups_.find(shared_key);
  if (it == shared_groups_.end()) {
    it = shared_groups_.emplace(std::string(shared_key), SharedGroup{}).first;
    it->second.key = std::string(shared_key);
    it->second.key_ref = std::make_shared<const std::string>(shared_key);
    it->second.filter = std::string(filter);
  }
  SharedGroup& group = it->second;
  if (std::find(group.members.begin(), group.members.end(), subscriber) != group.members.end()) {
    return std::nullopt;
  }
  group.members.push_back(subscriber);
  ++shared_members_;
  if (group.members.size() > 1) return std::nullopt;
  shared_trie_.Insert(filter, &group);
  return RouteUpdate{true, std::string(filter), std::string(shared_key), self_};
}

std::optional<RouteUpdate> Router::RemoveLocal(std::string_view filter,
                                               std::string_view shared_key, Session* session) {
  RoutesChanged();
  if (shared_key.empty()) {
    if (!plain_.Erase(filter, SubscriberRef{session, nullptr})) return std::nullopt;
    auto it = plain_counts_.find(filter);
    if (it == plain_counts_.end() || --it->second > 0) return std::nullopt;
    plain_counts_.erase(it);
    return RouteUpdate{false, std::string(filter), {}, self_};
  }
  auto it = shared_groups_.find(shared_key);
  if (it == shared_groups_.end()) return std::nullopt;
  SharedGroup& group = it->second;
  auto member = std::find(group.members.begin(), group.members.end(), SubscriberRef{session, nullptr});
  if (member == group.members.end()) return std::nullopt;
  group.members.erase(member);
  --shared_members_;
  if (!group.members.empty()) return std::nullopt;
  shared_trie_.Erase(filter, &group);
  RouteUpdate update{false, std::string(filter), std::string(shared_key), self_};
  shared_groups_.erase(it);
  return update;
}

void Router::ApplyRemote(const RouteUpdate& update) {
  if (update.destination == self_) return;
  RoutesChanged();
  auto& index = remote_by_destination_[update.destination];
  if (update.add) {
    // Held already (a gone node's route kept for replays, then sent again
    // when the node came back): nothing changes.
    if (index.contains({update.filter, update.shared_key})) return;
    if (update.shared_key.empty()) {
      remote_plain_.Insert(update.filter, update.destination);
    } else {
      remote_shared_.Insert(update.filter, RemoteShared{update.shared_key, update.destination});
    }
    index.emplace(update.filter, update.shared_key);
    return;
  }
  if (!index.contains({update.filter, update.shared_key})) return;
  if (update.shared_key.empty()) {
    remote_plain_.Erase(update.filter, update.destination);
  } else {
    remote_shared_.Erase(update.filter, RemoteShared{update.shared_key, update.destination});
  }
  index.erase({update.filter, update.shared_key});
}

void Router::ForgetDestination(Destination destination) {
  RoutesChanged();
  auto it = remote_by_destination_.find(destination);
  if (it == remote_by_destination_.end()) return;
  for (const auto& [filter, key] : it->second) {
    if (key.empty()) {
      remote_plain_.Erase(filter, destination);
    } else {
      remote_shared_.Erase(filter, RemoteShared{key, destination});
    }
  }
  remote_by_destination_.erase(it);
}

void Router::Match(std::string_view topic, MatchResult& out) const {
  plain_.Match(topic, [&](const SubscriberRef& ref) { out.local.push_back(ref); });
  shared_trie_.Match(topic, [&](SharedGroup* const& group) { out.local_shared.push_back(group); });
  remote_plain_.Match(topic, [&](const Destination& destination) {
    if (std::find(out.remote.begin(), out.remote.end(), destination) == out.remote.end()) {
      out.remote.push_back(destination);
    }
  });
  remote_shared_.Match(topic, [&](const RemoteShared& shared) { out.remote_shared.push_back(&shared); });
}

namespace {

template <typename T>
void Append(std::vector<T>& to, const std::vector<T>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

}  // namespace

void Router::MatchCached(std::string_view topic, MatchResult& out) const {
  if (match_cache_.empty()) match_cache_.resize(kMatchCacheSlots);
  // A stream to one topic finds it in the last slot used, without hashing.
  // (Which slot a topic is in never matters for correctness: a hit needs
  // the same topic and the current generation.)
  if (match_cache_[last_slot_].topic != topic) {
    last_slot_ = std::hash<std::string_view>{}(topic) % kMatchCacheSlots;
  }
  CachedMatch& slot = match_cache_[last_slot_];
  const bool hit = slot.generation == generation_ && slot.topic == topic;
  if (!hit) {
    slot.result.Clear();
    Match(topic, slot.result);
    slot.topic.assign(topic);
    slot.generation = generation_;
  }
  const MatchResult& cached = slot.result;
  Append(out.local, cached.local);
  Append(out.local_shared, cached.local_shared);
  for (Destination destination : cached.remote) {  // as Match: no duplicates
    if (std::find(out.remote.begin(), out.remote.end(), destination) == out.remote.end()) {
      out.remote.push_back(destination);
    }
  }
  Append(out.remote_shared, cached.remote_shared);
  const size_t refs =
      cached.local.size() + cached.local_shared.size() + cached.remote.size() + cached.remote_shared.size();
  if (!hit && refs > kMaxCachedRefs) slot = CachedMatch{};  // a large fan-out's deliveries dwarf its match
}

SharedGroup* Router::FindSharedGroup(const std::string& key) {
  auto it = shared_groups_.find(key);
  return it == shared_groups_.end() ? nullptr : &it->second;
}

std::vector<RouteUpdate> Router::LocalRoutes() const {
  std::vector<RouteUpdate> routes;
  for (const auto& [filter, count] : plain_counts_) routes.push_back({true, filter, {}, self_});
  for (const auto& [key, group] : shared_groups_) routes.push_back({true, group.filter, key, self_});
  return routes;
}

std::vector<std::pair<std::string, std::string>> Router::RoutesOf(Destination destination) const {
  auto it = remote_by_destination_.find(destination);
  if (it == remote_by_destination_.end()) return {};
  return {it->second.begin(), it->second.end()};
}

}  // namespace estuary::core
