#include "cluster-core/broker/shared_strategy.h"

#include <algorithm>
#include <string>

#include "base/hash.h"

namespace estuary::core {
namespace {

// How much a member is wanted: 2 connected with room in its queue, 1
// offline with room, 0 full (a delivery there is dropped); -1 excluded.
int Preference(const SubscriberRef& member, const Session* exclude, const SessionLimits& limits) {
  Session& session = *member.session;
  if (&session == exclude) return -1;
  const bool full = session.queued_messages() >= limits.max_queued_messages ||
                    session.queued_bytes() >= limits.max_queued_bytes;
  if (full) return 0;
  return session.connected() ? 2 : 1;
}

}  // namespace

std::optional<std::pair<std::string, PartitionedGroup>> ParsePartitionedGroup(std::string_view spec) {
  const size_t equals = spec.find('=');
  if (equals == 0 || equals == std::string_view::npos) return std::nullopt;
  const std::string_view group = spec.substr(0, equals);
  if (group.find_first_of("/+#") != std::string_view::npos) return std::nullopt;  // not a share name
  std::string_view rest = spec.substr(equals + 1);
  PartitionedGroup setting;
  if (const size_t colon = rest.find(':'); colon != std::string_view::npos) {
    if (rest.substr(colon + 1) != "topic") return std::nullopt;
    setting.by_topic = true;
    rest = rest.substr(0, colon);
  }
  if (rest.empty() || rest.size() > 4) return std::nullopt;
  uint32_t count = 0;
  for (char c : rest) {
    if (c < '0' || c > '9') return std::nullopt;
    count = count * 10 + static_cast<uint32_t>(c - '0');
  }
  if (count < 1 || count > 1024) return std::nullopt;
  setting.queues = count;
  return std::make_pair(std::string(group), setting);
}

std::optional<SharedStrategy> ParseSharedStrategy(std::string_view name) {
  if (name == "round_robin") return SharedStrategy::kRoundRobin;
  if (name == "least_outstanding") return SharedStrategy::kLeastOutstanding;
  if (name == "sticky_topic") return SharedStrategy::kStickyTopic;
  return std::nullopt;
}

std::string_view SharedStrategyName(SharedStrategy strategy) {
  switch (strategy) {
    case SharedStrategy::kLeastOutstanding:
      return "least_outstanding";
    case SharedStrategy::kStickyTopic:
      return "sticky_topic";
    case SharedStrategy::kRoundRobin:
      break;
  }
  return "round_robin";
}

uint64_t StickyScore(std::string_view topic, std::string_view name) {
  // FNV-1a 64 then the finaliser: stable across processes and builds (every
  // node and shard computes the same sticky choice), well spread.
  uint64_t hash = base::Fnv1a64(topic);
  hash = base::Fnv1a64(std::string_view("\0", 1), hash);
  return base::Mix64(base::Fnv1a64(name, hash));
}

std::string MarkRerouted(std::string_view key) {
  std::string marked(1, '\0');
  marked.append(key);
  return marked;
}

bool StripRerouted(std::string& key) {
  if (key.empty() || key.front() != '\0') return false;
  key.erase(0, 1);
  return true;
}

bool HasOtherMember(const SharedGroup& group, const Session* exclude) {
  return std::any_of(group.members.begin(), group.members.end(),
                     [exclude](const SubscriberRef& member) { return member.session != exclude; });
}

size_t Outstanding(Session& session) { return session.queued_messages() + session.inflight().size(); }

size_t PickSharedMember(SharedGroup& group, SharedStrategy strategy, std::string_view topic,
                        const SessionLimits& limits, const Session* exclude) {
  const size_t count = group.members.size();
  int wanted = -1;  // the best preference present
  for (const SubscriberRef& member : group.members) wanted = std::max(wanted, Preference(member, exclude, limits));
  if (wanted < 0) return kNoMember;
  auto eligible = [&](size_t i) { return Preference(group.members[i], exclude, limits) == wanted; };
  size_t pick = kNoMember;
  if (strategy == SharedStrategy::kStickyTopic) {
    uint64_t best = 0;
    for (size_t i = 0; i < count; ++i) {
      if (!eligible(i)) continue;
      const uint64_t score = StickyScore(topic, group.members[i].session->client_id());
      if (pick == kNoMember || score > best) {
        best = score;
        pick = i;
      }
    }
    return pick;
  }
  // Round robin, and least outstanding with ties taken in round-robin order
  // (so equally loaded members still alternate).
  size_t best = 0;
  for (size_t tried = 0; tried < count; ++tried) {
    const size_t i = (group.next + tried) % count;
    if (!eligible(i)) continue;
    if (strategy == SharedStrategy::kRoundRobin) {
      pick = i;
      break;
    }
    const size_t load = Outstanding(*group.members[i].session);
    if (pick == kNoMember || load < best) {
      best = load;
      pick = i;
    }
  }
  if (pick != kNoMember) group.next = pick + 1;
  return pick;
}

Destination PickSharedDestination(SharedStrategy strategy, std::vector<Destination>& destinations,
                                  std::string_view topic, uint32_t& turn) {
  std::sort(destinations.begin(), destinations.end());
  if (strategy != SharedStrategy::kStickyTopic) return destinations[turn++ % destinations.size()];
  Destination chosen = destinations.front();
  uint64_t best = 0;
  for (size_t i = 0; i < destinations.size(); ++i) {
    const std::string name = std::to_string(destinations[i]);
    const uint64_t score = StickyScore(topic, name);
    if (i == 0 || score > best) {
      best = score;
      chosen = destinations[i];
    }
  }
  return chosen;
}

}  // namespace estuary::core
