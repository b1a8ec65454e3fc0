#pragma once
// Shared subscriptions ($share/G/F): how one member, and before it one
// destination (a shard of this node or another node holding the group), is
// picked for each message; and the settings of the group rules
// (docs/cluster.md, "Shared subscriptions across nodes").
//
// Pure functions over the router's SharedGroup; called on the owning
// shard's thread only (round robin moves the group's position).
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cluster-core/router/router.h"

namespace estuary::core {

enum class SharedStrategy : uint8_t {
  kRoundRobin,        // members in turn, connected ones first; nodes in turn
  kLeastOutstanding,  // the connected member with the fewest queued + in flight; nodes in turn
  kStickyTopic,       // rendezvous hash of (topic, member): one member per topic while the set holds
};

std::optional<SharedStrategy> ParseSharedStrategy(std::string_view name);
std::string_view SharedStrategyName(SharedStrategy strategy);

// A shared group whose messages are kept in replicated queues on the
// cluster's partitions (--partitioned-group; docs/cluster.md "Partitioned
// shared groups"): the publisher's node appends each message to one of
// `queues` queues, in turn or by its topic's hash, and the nodes holding
// members take them out.
struct PartitionedGroup {
  uint32_t queues = 0;
  bool by_topic = false;
  friend bool operator==(const PartitionedGroup&, const PartitionedGroup&) = default;
};

// "G=K" or "G=K:topic" (--partitioned-group): the group's name and setting;
// nullopt when malformed (K from 1 to 1024).
std::optional<std::pair<std::string, PartitionedGroup>> ParsePartitionedGroup(std::string_view spec);
// The group name of a SharedKey (the part before its NUL).
inline std::string_view SharedKeyGroup(std::string_view key) { return key.substr(0, key.find('\0')); }

struct SharedGroupConfig {
  SharedStrategy strategy = SharedStrategy::kRoundRobin;
  // By group name (the G of $share/G/F). Empty: no group is partitioned.
  std::map<std::string, PartitionedGroup, std::less<>> partitioned;
  // A member whose session is persistent and merely disconnected keeps its
  // shared deliveries this long (so a reconnect resumes them, QoS 2
  // handshakes included); then they go to another member. 0: at once;
  // negative: never (kept until the session ends).
  int64_t redelivery_delay_ms = 5000;
};

inline constexpr size_t kNoMember = static_cast<size_t>(-1);

// The member of `group` a message on `topic` goes to, never `exclude`
// (a departing member). Preferred, in order: connected members with room
// in their queue (`limits`), offline ones with room, then any (whose full
// queue drops it, counted). kNoMember if none is left.
size_t PickSharedMember(SharedGroup& group, SharedStrategy strategy, std::string_view topic,
                        const SessionLimits& limits, const Session* exclude = nullptr);

// The destination among `destinations` (sorted in place) a message on
// `topic` goes to. `turn` is the group's round-robin counter on this shard.
Destination PickSharedDestination(SharedStrategy strategy, std::vector<Destination>& destinations,
                                  std::string_view topic, uint32_t& turn);

// The rendezvous score of (topic, name): the highest score wins.
uint64_t StickyScore(std::string_view topic, std::string_view name);

// A shared key as sent to another node for a message rerouted there (its
// group left the node it was first sent to): that node delivers it to its
// own members or drops it, never sends it on again. The mark (a leading
// NUL) never begins a real key: a share name is not empty and cannot hold
// U+0000, and the internode frame carries keys (NULs and all) unchanged.
std::string MarkRerouted(std::string_view key);
// Takes the mark off `key`; returns whether it was there.
bool StripRerouted(std::string& key);

// Whether `group` has a member other than `exclude`.
bool HasOtherMember(const SharedGroup& group, const Session* exclude);

// The outstanding deliveries of a session: queued plus in flight.
size_t Outstanding(Session& session);

}  // namespace estuary::core
