// Shared subscriptions: which member of a group a message goes to, on this
// shard, another shard or another node (docs/cluster.md, "Shared
// subscriptions across nodes"; the strategies: shared_strategy.h). What
// happens to a departed member's messages: shared_redelivery.cc.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "cluster-core/broker/shard_broker.h"
#include "cluster-core/broker/shared_strategy.h"

namespace estuary::core {

// Shared subscriptions: one member cluster-wide, chosen here. Delivers to
// a group picked on this shard; returns the groups picked elsewhere.
ShardBroker::SharedRouting ShardBroker::DeliverShared(const MessagePtr& message, const MatchResult& match,
                                                      const RouteScope& scope) {
  // A forward from a node stays on this node, and only for its groups
  // (their keys as named, a rerouted mark taken off: copied only then).
  static const std::vector<std::string> kNone;
  const std::vector<std::string>* named = scope.from_node ? scope.shared_keys : &kNone;
  auto marked = [&](size_t i) { return !(*scope.shared_keys)[i].empty() && (*scope.shared_keys)[i].front() == '\0'; };
  std::vector<std::string> unmarked;
  for (size_t i = 0; i < named->size(); ++i) {
    if (!marked(i)) continue;
    unmarked = *named;
    for (std::string& key : unmarked) StripRerouted(key);
    named = &unmarked;
    break;
  }
  const bool node_local = scope.from_node || IsNodeLocalTopic(message->topic);
  auto in_scope = [&](Destination destination, const std::string& key) {
    if (node_local && IsNodeDestination(destination)) return false;
    return !scope.from_node || std::find(named->begin(), named->end(), key) != named->end();
  };
  std::vector<std::pair<std::string, std::vector<Destination>>> candidates;
  auto add_candidate = [&](const std::string& key, Destination destination) {
    if (!in_scope(destination, key)) return;
    auto it = std::find_if(candidates.begin(), candidates.end(),
                           [&](const auto& c) { return c.first == key; });
    if (it == candidates.end()) it = candidates.insert(candidates.end(), {key, {}});
    it->second.push_back(destination);
  };
  for (SharedGroup* group : match.local_shared) add_candidate(group->key, config_.shard_id);
  for (const RemoteShared* remote : match.remote_shared) add_candidate(remote->key, remote->destination);
  SharedRouting routing;
  std::vector<std::pair<Destination, std::string>>& elsewhere = routing.elsewhere;
  // On to another node holding the group, once (marked, so that node never
  // sends it on again); false if there is none or it was sent on already.
  auto pass_on = [&](const std::string& key, bool was_marked) {
    if (was_marked || IsNodeLocalTopic(message->topic)) return false;
    std::vector<Destination> nodes;
    for (const RemoteShared* remote : match.remote_shared) {
      if (remote->key == key && IsNodeDestination(remote->destination)) nodes.push_back(remote->destination);
    }
    if (nodes.empty()) return false;
    ShardMetrics::Add(metrics_.shared_redelivered);
    elsewhere.emplace_back(PickSharedDestination(key, message->topic, nodes), MarkRerouted(key));
    return true;
  };
  auto named_marked = [&](const std::string& key) {
    for (size_t i = 0; i < named->size(); ++i) {
      if ((*named)[i] == key) return marked(i);
    }
    return false;
  };
  const SessionLimits& limits = config_.limits.session;
  // A member recovered from this node's store after a restart may have
  // been taken over elsewhere while the node was down; until the registry
  // says it is still ours (ConfirmRecovered), it cannot take a group's
  // message: if it is another node's now, its changes are refused and the
  // message would be acknowledged and go nowhere. Such a member counts as
  // full.
  auto all_full = [&](const SharedGroup& group) {
    return std::all_of(group.members.begin(), group.members.end(), [&](const SubscriberRef& member) {
      return member.session->queued_messages() >= limits.max_queued_messages ||
             member.session->queued_bytes() >= limits.max_queued_bytes ||
             (!recovered_seq_end_.empty() && recovered_seq_end_.count(member.session->client_id()) != 0);
    });
  };
  for (auto& [key, destinations] : candidates) {
    // A partitioned group's messages go to its queues (the publisher's
    // node appends; nodes holding members take them out), never straight
    // to a member.
    if (!scope.from_node && !IsNodeLocalTopic(message->topic) && IsPartitionedGroup(key)) {
      to_queues_.push_back(key);
      continue;
    }
    const Destination chosen = PickSharedDestination(key, message->topic, destinations);
    if (chosen != config_.shard_id) {
      elsewhere.emplace_back(chosen, key);
      continue;
    }
    SharedGroup* group = router_.FindSharedGroup(key);
    if (group == nullptr) continue;
    // Every member here has a full queue (a member taken over from a dead
    // node, disconnected, fills up while the group's other nodes keep
    // picking this one): another node's member takes it rather than the
    // message being dropped.
    if (all_full(*group) && pass_on(key, named_marked(key))) continue;
    routing.full = DeliverToShared(*group, message) || routing.full;
  }
  for (size_t i = 0; i < named->size(); ++i) {
    const std::string& key = (*named)[i];
    if (std::any_of(candidates.begin(), candidates.end(), [&](const auto& c) { return c.first == key; })) continue;
    // The group left this node while the message was on its way (its last
    // member here unsubscribed or ended): on to another node holding it,
    // once, else dropped.
    if (!pass_on(key, marked(i))) {
      ShardMetrics::Add(metrics_.messages_dropped);
      ShardMetrics::Add(metrics_.shared_dropped_no_member);
    }
  }
  return routing;
}

Destination ShardBroker::PickSharedDestination(const std::string& key, std::string_view topic,
                                               std::vector<Destination>& destinations) {
  return core::PickSharedDestination(config_.shared.strategy, destinations, topic, shared_round_robin_[key]);
}

bool ShardBroker::DeliverToShared(SharedGroup& group, const MessagePtr& message, const Session* exclude) {
  // Connected members with room first (an offline one queues): shared_strategy.h.
  const size_t pick = PickSharedMember(group, config_.shared.strategy, message->topic, config_.limits.session, exclude);
  if (pick == kNoMember) {
    ShardMetrics::Add(metrics_.messages_dropped);
    ShardMetrics::Add(metrics_.shared_dropped_no_member);
    return false;
  }
  const SubscriberRef& member = group.members[pick];
  Delivery delivery;
  delivery.message = message;
  delivery.shared_key = group.key_ref;
  delivery.qos = MinQoS(message->qos, member.options->max_qos);
  delivery.retain = member.options->retain_as_published && message->retain;
  if (member.options->subscription_id != 0) {
    delivery.subscription_ids.push_back(member.options->subscription_id);
  }
  return Offer(*member.session, std::move(delivery));
}

bool ShardBroker::IsPartitionedGroup(std::string_view key) const {
  if (config_.shared.partitioned.empty() || cluster_ == nullptr || !cluster_->QueuesOnPartitions()) return false;
  return config_.shared.partitioned.find(SharedKeyGroup(key)) != config_.shared.partitioned.end();
}

std::vector<std::string> ShardBroker::PartitionedGroupsWithConnectedMembers() const {
  std::vector<std::string> keys;
  if (config_.shared.partitioned.empty()) return keys;
  for (const auto& [key, group] : router_.shared_groups()) {
    if (config_.shared.partitioned.find(SharedKeyGroup(key)) == config_.shared.partitioned.end()) continue;
    if (std::any_of(group.members.begin(), group.members.end(),
                    [](const SubscriberRef& member) { return member.session->connected(); })) {
      keys.push_back(key);
    }
  }
  return keys;
}

namespace {
Delivery GroupQueueDelivery(const MessagePtr& message, const SharedGroup& group, const SubscriberRef& member) {
  Delivery delivery;
  delivery.message = message;
  delivery.shared_key = group.key_ref;
  delivery.qos = MinQoS(message->qos, member.options->max_qos);
  delivery.retain = member.options->retain_as_published && message->retain;
  if (member.options->subscription_id != 0) delivery.subscription_ids.push_back(member.options->subscription_id);
  return delivery;
}
}  // namespace

void ShardBroker::TakeFromGroupQueue(const MessagePtr& message, const std::string& key, uint64_t handoff) {
  SharedGroup* group = router_.FindSharedGroup(key);
  const size_t count = group != nullptr ? group->members.size() : 0;
  for (size_t tried = 0; tried < count; ++tried) {
    const size_t i = (group->next + tried) % count;
    const SubscriberRef& member = group->members[i];
    Session& session = *member.session;
    // Connected and nearly idle: the backlog stays in the replicated queue
    // (any member may take it later) rather than in one member's session.
    if (!session.connected() || session.queued_messages() >= kGroupQueueHandoffDepth) continue;
    group->next = (i + 1) % count;
    Delivery delivery = GroupQueueDelivery(message, *group, member);
    if (delivery.qos == QoS::kExactlyOnce && session.durable() && cluster_->HandsOnGroupQueues()) {
      cluster_->GroupQueueHand(handoff, session.client_id());
      return;
    }
    DeliverGroupQueueMessage(session, std::move(delivery), handoff);
    return;
  }
  cluster_->GroupQueueHandoff(handoff, false);
}

void ShardBroker::PutFromGroupQueue(const MessagePtr& message, const std::string& key, const std::string& client_id,
                                    uint64_t handoff) {
  SharedGroup* group = router_.FindSharedGroup(key);
  Session* session = FindSession(client_id);
  if (group != nullptr && session != nullptr && session->durable()) {
    for (const SubscriberRef& member : group->members) {
      if (member.session != session) continue;
      Delivery delivery = GroupQueueDelivery(message, *group, member);
      delivery.hand_pending = true;
      DeliverGroupQueueMessage(*session, std::move(delivery), handoff);
      return;
    }
  }
  cluster_->GroupQueueHandoff(handoff, false);
}

void ShardBroker::DeliverGroupQueueMessage(Session& session, Delivery delivery, uint64_t handoff) {
  const FlowRef publisher = std::exchange(current_publisher_, FlowRef{});  // nobody to pause
  Offer(session, std::move(delivery));
  current_publisher_ = publisher;
  ClusterPort* port = cluster_;
  AfterDurable([port, handoff] { port->GroupQueueHandoff(handoff, true); });
}

void ShardBroker::ReleaseHanded(const std::string& client_id, const MessageId& id) {
  Session* session = FindSession(client_id);
  if (session == nullptr || !session->ReleaseHanded(id)) return;
  if (SessionSink* sink = session->sink()) sink->OnDeliveriesReady();
}

void ShardBroker::ReportGroupSessionArrived(Session& session) {
  if (cluster_ == nullptr || !session.durable() || config_.shared.partitioned.empty()) return;
  std::vector<std::string> keys;
  for (const auto& [key, group] : router_.shared_groups()) {
    if (!IsPartitionedGroup(key)) continue;
    if (std::any_of(group.members.begin(), group.members.end(),
                    [&](const SubscriberRef& member) { return member.session == &session; })) {
      keys.push_back(key);
    }
  }
  if (keys.empty()) return;
  std::vector<MessageId> held;
  session.ForEachDelivery([&held](Delivery& delivery) {
    if (delivery.message && delivery.shared_key != nullptr) held.push_back(delivery.message->id);
  });
  cluster_->GroupSessionArrived(session.client_id(), std::move(keys), std::move(held));
}

}  // namespace estuary::core
