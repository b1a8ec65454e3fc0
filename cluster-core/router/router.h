#pragma once
// Router: one shard's view of who wants a topic.
//
// It keeps two kinds of routes apart, as the cluster needs:
//  - local routes: sessions on this shard, by filter (plain and $share);
//  - remote routes: a replica of the filters other destinations hold. A
//    destination is another shard of this node or another node of the
//    cluster (see Destination); a publish is forwarded once per destination,
//    which then matches its own local routes.
// AddLocal/RemoveLocal report a RouteUpdate when this shard's route set
// changes (first subscriber to a filter, last one gone), for the owner to
// broadcast; ApplyRemote applies updates received from elsewhere.
// Owned by one shard; not thread-safe.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cluster-core/broker/session.h"
#include "model/filter_trie.h"

namespace estuary::core {

// A Destination names where a publish is forwarded: another shard of this
// node (its shard id, 0..65535) or another node of the cluster
// (kNodeDestinationBase + node id). The two ranges never overlap, so one
// trie holds both and a match says at once which link carries the forward.
using Destination = uint32_t;
inline constexpr Destination kNodeDestinationBase = 0x10000;
inline constexpr Destination NodeDestination(uint16_t node) { return kNodeDestinationBase + node; }
inline constexpr bool IsNodeDestination(Destination destination) {
  return destination >= kNodeDestinationBase;
}
inline constexpr uint16_t NodeOfDestination(Destination destination) {
  return static_cast<uint16_t>(destination - kNodeDestinationBase);
}

struct SubscriberRef {
  Session* session = nullptr;
  const SubscriptionOptions* options = nullptr;  // points into session->subscriptions()
  friend bool operator==(const SubscriberRef& a, const SubscriberRef& b) {
    return a.session == b.session;
  }
};

// The members of one shared subscription ($share/group/filter) on this shard.
struct SharedGroup {
  std::string key;  // SharedKey(group, filter)
  // The same key, shared by every delivery made through the group
  // (Delivery::shared_key), so a departed member's messages find it again.
  std::shared_ptr<const std::string> key_ref;
  std::string filter;
  std::vector<SubscriberRef> members;
  size_t next = 0;  // round-robin position
};

std::string SharedKey(std::string_view group, std::string_view filter);

struct RouteUpdate {
  bool add = true;
  std::string filter;
  std::string shared_key;  // empty for a plain route
  Destination destination = 0;
};

struct RemoteShared {
  std::string key;
  Destination destination = 0;
  friend bool operator==(const RemoteShared&, const RemoteShared&) = default;
};

struct MatchResult {
  std::vector<SubscriberRef> local;  // a session may appear once per matching filter
  std::vector<SharedGroup*> local_shared;
  std::vector<Destination> remote;   // destinations with plain routes, no duplicates
  std::vector<const RemoteShared*> remote_shared;
  void Clear() {
    local.clear();
    local_shared.clear();
    remote.clear();
    remote_shared.clear();
  }
};

class Router {
 public:
  explicit Router(Destination self) : self_(self) {}

  // `filter` is the plain filter; `shared_key` non-empty for $share routes.
  std::optional<RouteUpdate> AddLocal(std::string_view filter, std::string_view shared_key,
                                      SubscriberRef subscriber);
  std::optional<RouteUpdate> RemoveLocal(std::string_view filter, std::string_view shared_key,
                                         Session* session);
  void ApplyRemote(const RouteUpdate& update);
  // Drops every remote route of `destination` (it left or restarted).
  void ForgetDestination(Destination destination);

  void Match(std::string_view topic, MatchResult& out) const;
  // As Match, through a small cache of match results by topic that every
  // route change (AddLocal, RemoveLocal, ApplyRemote, ForgetDestination,
  // whatever its outcome) invalidates at once: a stream of publishes to a
  // few topics walks the tries once per route change, not once per publish.
  // Results with more than kMaxCachedRefs entries are not kept.
  void MatchCached(std::string_view topic, MatchResult& out) const;
  SharedGroup* FindSharedGroup(const std::string& key);
  const std::map<std::string, SharedGroup, std::less<>>& shared_groups() const { return shared_groups_; }

  // The local route set, for replaying to a destination that (re)joins.
  std::vector<RouteUpdate> LocalRoutes() const;
  // The routes held for one destination, as (filter, shared key) pairs.
  std::vector<std::pair<std::string, std::string>> RoutesOf(Destination destination) const;

  size_t local_subscriptions() const { return plain_.size() + shared_members_; }
  size_t remote_routes() const { return remote_plain_.size() + remote_shared_.size(); }

  static constexpr size_t kMatchCacheSlots = 64;
  static constexpr size_t kMaxCachedRefs = 256;

 private:
  struct CachedMatch {
    std::string topic;
    uint64_t generation = 0;  // of the routes it was matched against; 0: empty
    MatchResult result;
  };
  void RoutesChanged() { ++generation_; }

  Destination self_;
  uint64_t generation_ = 1;
  mutable std::vector<CachedMatch> match_cache_;  // kMatchCacheSlots, by topic hash, once used
  mutable size_t last_slot_ = 0;
  FilterTrie<SubscriberRef> plain_;
  std::map<std::string, size_t, std::less<>> plain_counts_;  // filter -> local subscribers
  std::map<std::string, SharedGroup, std::less<>> shared_groups_;  // by key
  FilterTrie<SharedGroup*> shared_trie_;
  size_t shared_members_ = 0;
  FilterTrie<Destination> remote_plain_;
  FilterTrie<RemoteShared> remote_shared_;
  // (filter, shared key) pairs per destination, for ForgetDestination.
  std::map<Destination, std::set<std::pair<std::string, std::string>>> remote_by_destination_;
};

}  // namespace estuary::core
