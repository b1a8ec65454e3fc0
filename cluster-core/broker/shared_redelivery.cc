// Shared subscriptions: a departed member's messages go to another member
// (docs/cluster.md, "Shared subscriptions across nodes").
//
// Every delivery made through a shared group carries the group's key
// (Delivery::shared_key). When the member leaves, the QoS 1/2 deliveries it
// holds for the group and has not acknowledged are taken out of its session
// and given to the group again, excluding it: a member of this shard, or a
// destination holding the group (another shard of this node, another node)
// through the ordinary forward path. They are new deliveries there (no DUP).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <unordered_map>
#include <utility>

#include "cluster-core/broker/shard_broker.h"
#include "model/topic.h"

namespace estuary::core {

std::vector<Destination> ShardBroker::SharedDestinations(const std::string& key, std::string_view topic,
                                                         const Session* departed) {
  std::vector<Destination> destinations;
  if (SharedGroup* group = router_.FindSharedGroup(key); group != nullptr && HasOtherMember(*group, departed)) {
    destinations.push_back(config_.shard_id);
  }
  // A local MatchResult: this may run inside a delivery (a connection that
  // closes while it is being offered a message), whose scratch is in use.
  MatchResult match;
  router_.Match(topic, match);
  const bool node_local = IsNodeLocalTopic(topic);
  for (const RemoteShared* remote : match.remote_shared) {
    if (remote->key != key || (node_local && IsNodeDestination(remote->destination))) continue;
    if (std::find(destinations.begin(), destinations.end(), remote->destination) == destinations.end()) {
      destinations.push_back(remote->destination);
    }
  }
  return destinations;
}

std::vector<Delivery> ShardBroker::TakeShared(Session& session, bool inflight, const std::string* only_key,
                                              bool keep_without_member, bool sent_qos2) {
  const size_t queued_before = session.queued_messages();
  const size_t inflight_before = session.inflight().size();
  auto take = [&](const Delivery& delivery) {
    if (!delivery.shared_key || (only_key != nullptr && *delivery.shared_key != *only_key)) return false;
    return !keep_without_member || !SharedDestinations(*delivery.shared_key, delivery.message->topic, &session).empty();
  };
  std::vector<Delivery> taken = session.TakeDeliveries(take, inflight, sent_qos2);
  ShardMetrics::Sub(metrics_.queued_messages, queued_before - session.queued_messages());
  ShardMetrics::Sub(metrics_.inflight_messages, inflight_before - session.inflight().size());
  if (!session.paused_publishers().empty() && session.Relieved(config_.limits.session)) ReleasePublishers(session);
  return taken;
}

void ShardBroker::RedeliverShared(std::vector<Delivery> taken, const Session* departed) {
  if (taken.empty()) return;
  // Nobody publishes these now: no flow to pause or credit, nothing waits.
  const FlowRef publisher = std::exchange(current_publisher_, FlowRef{});
  const int64_t now = loop_.clock().WallMs();
  for (Delivery& delivery : taken) {
    const MessagePtr& message = delivery.message;
    if (message->properties.expiry_at_ms && *message->properties.expiry_at_ms <= now) {
      ShardMetrics::Add(metrics_.messages_dropped);
      continue;
    }
    const std::string& key = *delivery.shared_key;
    std::vector<Destination> destinations = SharedDestinations(key, message->topic, departed);
    if (destinations.empty()) {
      ShardMetrics::Add(metrics_.messages_dropped);
      ShardMetrics::Add(metrics_.shared_dropped_no_member);
      continue;
    }
    const Destination chosen = PickSharedDestination(key, message->topic, destinations);
    ShardMetrics::Add(metrics_.shared_redelivered);
    if (chosen == config_.shard_id) {
      DeliverToShared(*router_.FindSharedGroup(key), message, departed);
    } else {
      SendForward(chosen, message, /*plain=*/false, {key}, /*flow=*/0, /*safe_token=*/0);
    }
  }
  current_publisher_ = publisher;
}

void ShardBroker::RerouteSharedToShard(const MessagePtr& message, const std::string& key) {
  // A forward from another shard whose group left this shard on the way:
  // on to another shard of this node holding it (the shards' route views
  // converge within a few posts, so this ends), else dropped. Never to
  // another node from here: the forward may have come from one.
  std::vector<Destination> shards = SharedDestinations(key, message->topic, nullptr);
  std::erase_if(shards, [this](Destination d) { return d == config_.shard_id || IsNodeDestination(d); });
  if (shards.empty()) {
    ShardMetrics::Add(metrics_.messages_dropped);
    ShardMetrics::Add(metrics_.shared_dropped_no_member);
    return;
  }
  ShardMetrics::Add(metrics_.shared_redelivered);
  const FlowRef publisher = std::exchange(current_publisher_, FlowRef{});
  SendForward(PickSharedDestination(key, message->topic, shards), message, /*plain=*/false, {key}, 0, 0);
  current_publisher_ = publisher;
}

void ShardBroker::ScheduleSharedRedelivery(Session& session) {
  const int64_t delay_ms = config_.shared.redelivery_delay_ms;
  if (delay_ms < 0) return;
  bool shared = std::any_of(session.subscriptions().begin(), session.subscriptions().end(),
                            [](const auto& entry) { return IsSharedFilter(entry.first); });
  if (!shared) session.ForEachDelivery([&shared](Delivery& delivery) { shared = shared || delivery.shared_key; });
  if (!shared) return;
  loop_.AddTimer(delay_ms, BoundToGeneration(session, [this](Session& current) {
    if (current.connected()) return;
    // Still away: what another member can take goes there; the rest (no
    // other member) stays for this one. A QoS 2 message already sent to its
    // client stays too: the client may have it, and the server must finish
    // that delivery when it reconnects [MQTT-4.8.2-4] (given away, it would
    // reach two members, and its packet id, free again here, could be
    // reused for another message the client then takes for a resend).
    RedeliverShared(TakeShared(current, /*inflight=*/true, nullptr, /*keep_without_member=*/true,
                               /*sent_qos2=*/false),
                    &current);
  }));
}

namespace {

// Deliveries whose records kept their group's key come back with a string
// of their own: they share one per group, the group's key_ref when it has
// a member on this shard (as a delivery made here would).
void ShareStoredKeys(Router& router, Session& session) {
  std::unordered_map<std::string, std::shared_ptr<const std::string>> keys;
  session.ForEachDelivery([&](Delivery& delivery) {
    if (!delivery.shared_key) return;
    auto [it, added] = keys.try_emplace(*delivery.shared_key);
    if (added) {
      SharedGroup* group = router.FindSharedGroup(it->first);
      it->second = group != nullptr ? group->key_ref : delivery.shared_key;
    }
    delivery.shared_key = it->second;
  });
}

}  // namespace

void ShardBroker::TagSharedDeliveries(Session& session) {
  // A stored key is the truth, whatever the session subscribes to now (it
  // may have left the group since, or match the topic plainly as well).
  ShareStoredKeys(router_, session);
  // Records written before the key was stored have none: it is guessed
  // from the session's subscriptions, as it was then.
  std::vector<std::pair<std::string, std::shared_ptr<const std::string>>> shared;  // (filter, key)
  std::vector<std::string> plain;
  for (const auto& [filter, options] : session.subscriptions()) {
    if (!IsSharedFilter(filter)) {
      plain.push_back(filter);
      continue;
    }
    auto parsed = ParseSharedFilter(filter);
    if (!parsed) continue;
    const std::string key = SharedKey(parsed->group, parsed->filter);
    SharedGroup* group = router_.FindSharedGroup(key);
    shared.emplace_back(parsed->filter, group != nullptr ? group->key_ref : std::make_shared<const std::string>(key));
  }
  if (shared.empty()) return;
  // A delivery that also matches a plain subscription of the session may
  // have come through either: it stays the session's (never lost, maybe
  // not moved).
  session.ForEachDelivery([&](Delivery& delivery) {
    if (delivery.shared_key || !delivery.message) return;
    const std::string& topic = delivery.message->topic;
    if (std::any_of(plain.begin(), plain.end(), [&](const std::string& f) { return TopicMatches(f, topic); })) return;
    for (const auto& [filter, key] : shared) {
      if (TopicMatches(filter, topic)) {
        delivery.shared_key = key;
        return;
      }
    }
  });
}

void ShardBroker::SharedSessionRestored(Session& session, bool disconnected_member) {
  TagSharedDeliveries(session);
  if (disconnected_member && !session.connected()) ScheduleSharedRedelivery(session);
}

}  // namespace estuary::core
