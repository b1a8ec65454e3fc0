// Partitioned shared groups (docs/cluster.md "Partitioned shared groups";
// issue 7 points 4 and 5): a group configured with K queues
// (--partitioned-group G=K) keeps its messages in K replicated queues
// (partition::QueueMachine) instead of handing each one to a member at
// once. The publisher's node appends a message to one queue, in turn or by
// its topic's hash, and its publisher is acknowledged once a majority of
// that queue's partition has it.
//
// Consumers. Every node holding members of the group computes the same
// assignment of the queues to the nodes that have a connected member of
// the group (each node tells the others which groups it has connected
// members of: kGroupConsumers) and consumes its own. It records itself as
// the queue's consumer with an Assign under a new, larger epoch (a
// compare-and-set in the machine: one node per epoch), then grants the
// queue's partition leader credit (a pull frame, 0x60; QueuePuller). The
// leader pushes the queue's messages within that credit over the
// inter-node link (push frames, 0x61; QueuePusher), as they are appended:
// its replica's apply hooks tell it. The consumer gives each message to a
// connected member with room (ShardBroker::TakeFromGroupQueue) and, once
// the member's session holds it durably, acknowledges it to the queue
// (an Ack proposal), which removes it; the leader sees the Ack apply and
// frees the credit's flight. What no member can take now waits on the
// consumer (at most the puller's window) and is offered again.
//
// The leader follows the largest epoch it has been pulled with: a pull at
// an older one (a node whose view of the members lags) is refused
// (kStaleEpoch), and that node assigns itself again only if it still should.
// A leader that loses its leadership, or a consumer that does not consume
// the queue any more, says so (kNotLeader, kNotConsumer); a lost link or a
// new leader resets both ends' credit, and whatever was pushed and not
// acknowledged is pushed again (the puller drops what it holds already).
//
// Delivery is at least once: a consumer that dies, or loses the queue to
// another node, between a member's taking a message and the Ack's commit,
// leaves it to be pushed again to the next consumer (a QoS 1 duplicate).
//
// Exactly once for QoS 2 (a durable member, every node minor >= 2): the
// consumer first records in the queue which member session it hands the
// message to (Hand; the queue then pushes it to nobody), puts it into that
// session, acknowledges it, and lets the session send it to its client
// only once the Ack has committed. A node that a member session arrives
// on (taken over from a dead node, moved, or kept after a restart)
// settles with the group's queues what other consumers had handed it
// (Settle: what the session holds is removed, the rest handed back and
// pushed again). The session cannot have sent its client anything it does
// not hold any more, since it sends only after the Ack.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "base/hash.h"
#include "cluster-core/cluster/cluster_agent.h"
#include "cluster-core/partition/queue_assign.h"
#include "cluster-core/partition/queue_machine.h"
#include "cluster-core/store/record_codec.h"

namespace estuary::cluster {

namespace {
constexpr uint32_t kRetryMs = 100;     // a failed append, assign or pull; members all busy
constexpr uint32_t kAckRetryMs = 500;
// Refused as the consumer (another node assigned itself later): assigned
// again only after this, if the assignment still says so, so two nodes
// whose views disagree for a moment do not take the queue back and forth.
constexpr uint32_t kReassignMs = 1000;
// Held by the consumer: what its members have not taken plus unused credit.
constexpr uint32_t kPullWindow = 256;
constexpr uint32_t kPullLowWater = 64;
// The leader pushes again what is not acknowledged this long (the
// consumer lost it with its credit; the puller drops it if it holds it).
constexpr int64_t kRedeliverMs = 10'000;
// A handed delivery whose Ack has not committed by then is sent to its
// client all the same (ReleaseHanded).
constexpr uint32_t kHandReleaseFallbackMs = 30'000;

// "G/F" for the key "G\0F": queue names are printable ("G/F/k").
std::string QueuePrefix(std::string_view key) {
  std::string prefix(key);
  std::replace(prefix.begin(), prefix.end(), '\0', '/');
  return prefix;
}
std::string QueueName(std::string_view key, uint32_t index) { return QueuePrefix(key) + "/" + std::to_string(index); }
}  // namespace

// --- the publisher's node --------------------------------------------------------

void ClusterAgent::OnAppendToGroupQueue(const MessagePtr& message, const std::string& key, uint16_t origin_shard,
                                        uint64_t safe_token) {
  const auto group = config_.partitioned_groups.find(core::SharedKeyGroup(key));
  if (!partitions_ || group == config_.partitioned_groups.end()) {
    if (safe_token != 0) QueueSafe(origin_shard, safe_token);
    return;
  }
  const uint32_t count = group->second.queues;
  const uint32_t index = group->second.by_topic ? static_cast<uint32_t>(base::StableHash(message->topic) % count)
                                                : group_turns_[key]++ % count;
  AppendToGroupQueue(message, key, index, origin_shard, safe_token, loop_.NowMs() + config_.group_append_deadline_ms);
}

void ClusterAgent::AppendToGroupQueue(const MessagePtr& message, const std::string& key, uint32_t queue_index,
                                      uint16_t origin_shard, uint64_t safe_token, int64_t deadline_ms) {
  const std::string queue = QueueName(key, queue_index);
  partitions_->Propose(
      partitions_->PartitionOf(partition::QueueKey(queue)), partition::EncodeQueueAppend(queue, *message),
      scope_.Guard([this, message, key, queue_index, origin_shard, safe_token, deadline_ms,
                    queue](partition::PartitionResult result) {
        std::optional<partition::QueueAppendResult> appended;
        if (result.status == meta::ProposeStatus::kOk && result.result) {
          appended = partition::DecodeQueueAppendResult(*result.result);
        }
        if (appended && !appended->full) {
          ++counters_.group_appends;
          if (safe_token != 0) QueueSafe(origin_shard, safe_token);
          return;
        }
        ++counters_.group_append_retries;
        if (loop_.NowMs() >= deadline_ms) {
          if (counters_.group_appends_dropped++ % 1000 == 0) {
            spdlog::warn("cluster: a message for the partitioned group '{}' could not be appended to its queues in "
                         "{} ms ({}): dropped, its publisher released ({} so far)",
                         QueuePrefix(key), config_.group_append_deadline_ms,
                         appended ? "every queue full" : "no quorum", counters_.group_appends_dropped);
          }
          if (safe_token != 0) QueueSafe(origin_shard, safe_token);
          return;
        }
        // A full queue: the next one (unless the topic picks the queue); a
        // failed write: the same queue again.
        const auto group = config_.partitioned_groups.find(core::SharedKeyGroup(key));
        if (group == config_.partitioned_groups.end()) return;
        const bool next = appended && appended->full && !group->second.by_topic;
        const uint32_t index = next ? (queue_index + 1) % group->second.queues : queue_index;
        loop_.AddTimer(next ? 10 : kRetryMs,
                       scope_.Guard([this, message, key, index, origin_shard, safe_token, deadline_ms] {
                         AppendToGroupQueue(message, key, index, origin_shard, safe_token, deadline_ms);
                       }));
      }));
}

// --- the consuming nodes ----------------------------------------------------------

// A shard's partitioned groups with a connected member: when the node's
// set changes, every peer is told (kGroupConsumers).
void ClusterAgent::OnGroupConsumersOn(uint16_t shard, std::vector<std::string> keys) {
  if (group_ready_local_.size() != config_.shard_count) group_ready_local_.resize(config_.shard_count);
  group_ready_local_.at(shard) = std::set<std::string>(keys.begin(), keys.end());
  std::set<std::string> ready;
  for (const auto& on_shard : group_ready_local_) ready.insert(on_shard.begin(), on_shard.end());
  if (ready == group_ready_announced_) return;
  group_ready_announced_ = std::move(ready);
  Broadcast(kGroupConsumers, EncodeClientIds({group_ready_announced_.begin(), group_ready_announced_.end()}));
}

// Each tick: the shards are asked again which groups have connected members
// (answers come back as OnGroupConsumersOn), and the queues this node
// consumes are worked out. Every node with a connected member of a group
// computes the same assignment from the same sets (its own and what the
// reachable peers announced), so each queue has one consumer once the views
// agree; two for a moment only duplicate, never lose. A group with no
// connected member anywhere is consumed by nobody: its messages wait in the
// queues.
void ClusterAgent::TickGroupQueues() {
  if (!partitions_) return;
  for (uint16_t shard = 0; shard < config_.shard_count; ++shard) {
    PostToShard(shard, [port = &port()](core::ShardBroker& broker) {
      port->GroupConsumersOn(broker.config().shard_id, broker.PartitionedGroupsWithConnectedMembers());
    });
  }
  for (auto& [queue, consumer] : group_consumers_) consumer.wanted = false;
  for (const std::string& key : group_ready_announced_) {
    std::vector<partition::GroupNode> nodes{{config_.self, 1}};
    for (const auto& [node, keys] : group_ready_remote_) {
      if (node == config_.self || IsGone(node) || PeerUnreachable(node) || keys.count(key) == 0) continue;
      nodes.push_back({node, 1});
    }
    const auto group = config_.partitioned_groups.find(core::SharedKeyGroup(key));
    const auto queues = partition::GroupQueueNames(QueuePrefix(key), group->second.queues);
    for (const auto& [queue, node] : partition::AssignQueues(queues, nodes, {})) {
      if (node != config_.self) continue;
      auto [it, added] = group_consumers_.try_emplace(queue);
      if (added) {
        it->second.key = key;
        it->second.partition = partitions_->PartitionOf(partition::QueueKey(queue));
        it->second.generation = next_group_generation_++;
      }
      it->second.wanted = true;
    }
  }
  for (auto it = group_consumers_.begin(); it != group_consumers_.end();) {
    if (it->second.wanted) {
      ++it;
    } else {
      auto next = std::next(it);
      DropGroupConsumer(it);
      it = next;
    }
  }
  counters_.group_queues_consumed = group_consumers_.size();
  for (auto& [queue, consumer] : group_consumers_) StepGroupConsumer(queue);
  // Handed deliveries whose Ack has not committed in kHandReleaseFallbackMs.
  const int64_t now = loop_.NowMs();
  std::vector<std::pair<std::string, uint64_t>> overdue;
  for (const auto& [at, release] : group_hand_releases_) {
    if (release.force_at_ms <= now) overdue.push_back(at);
  }
  for (const auto& [queue, offset] : overdue) ReleaseHanded(queue, offset, /*forced=*/true);
}

// A queue this node no longer consumes: what its members took is still
// acknowledged (the Acks are on their way); what waits here is left to the
// next consumer, which the leader pushes it to.
void ClusterAgent::DropGroupConsumer(std::map<std::string, GroupQueueConsumer>::iterator consumer) {
  FlushGroupAcks(consumer->first);
  group_consumers_.erase(consumer);
}

void ClusterAgent::StepGroupConsumer(const std::string& queue) {
  GroupQueueConsumer& consumer = group_consumers_.at(queue);
  const int64_t now = loop_.NowMs();
  if (consumer.epoch == 0) {
    if (!consumer.assigning && now >= consumer.next_assign_ms) AssignGroupQueue(queue);
    return;
  }
  // A leader this node knows better than the one it pulls from (its own
  // replica's view, a hint): credit starts again there.
  const NodeId leader = partitions_->KnownLeader(consumer.partition);
  if (consumer.target != 0 && leader != 0 && leader != consumer.target &&
      (partitions_->group(consumer.partition) != nullptr || !peers_[consumer.target].up)) {
    consumer.target = 0;
    consumer.puller->Reset(consumer.epoch);
  }
  PullGroupQueue(queue);
  if (!consumer.waiting.empty() && consumer.offered.empty()) OfferGroupMessages(queue);
  FlushGroupAcks(queue);
}

// Records this node as the queue's consumer under an epoch larger than the
// queue's (read first: the machine keeps the largest).
void ClusterAgent::AssignGroupQueue(const std::string& queue) {
  GroupQueueConsumer& consumer = group_consumers_.at(queue);
  consumer.assigning = true;
  auto retry = [this, queue] {
    auto found = group_consumers_.find(queue);
    if (found == group_consumers_.end()) return;
    found->second.assigning = false;
    found->second.next_assign_ms = loop_.NowMs() + kRetryMs;
  };
  partitions_->Read(
      consumer.partition, partition::EncodeQueueStats(),
      scope_.Guard([this, queue, retry](partition::PartitionResult result) {
        auto found = group_consumers_.find(queue);
        if (found == group_consumers_.end()) return;
        if (result.status != meta::ProposeStatus::kOk) return retry();
        uint64_t epoch = 0;
        if (result.result) {  // no result: the partition was never opened
          auto stats = partition::DecodeQueueStats(*result.result);
          if (!stats) return retry();
          for (const partition::QueueStats& stat : *stats) {
            if (stat.name == queue) epoch = stat.epoch;
          }
        }
        const uint64_t wanted = epoch + 1;
        partitions_->Propose(
            found->second.partition, partition::EncodeQueueAssign(queue, config_.self, wanted),
            scope_.Guard([this, queue, wanted, retry](partition::PartitionResult assigned) {
              auto entry = group_consumers_.find(queue);
              if (entry == group_consumers_.end()) return;
              if (assigned.status != meta::ProposeStatus::kOk || assigned.result != std::optional<std::string>("1")) {
                return retry();  // failed, or another node took a later epoch meanwhile: read again
              }
              ++counters_.group_assigns;
              GroupQueueConsumer& assigned_here = entry->second;
              assigned_here.assigning = false;
              assigned_here.epoch = wanted;
              assigned_here.target = 0;
              if (assigned_here.puller) {
                assigned_here.puller->Reset(wanted);
              } else {
                assigned_here.puller.emplace(wanted, partition::QueuePullerLimits{kPullWindow, kPullLowWater});
              }
              PullGroupQueue(queue);
            }));
      }));
}

// Grants the leader what the window allows (nothing while most of it is
// still out), or everything again after a reset.
void ClusterAgent::PullGroupQueue(const std::string& queue) {
  GroupQueueConsumer& consumer = group_consumers_.at(queue);
  if (consumer.epoch == 0 || !consumer.puller) return;
  if (consumer.target == 0) {
    if (loop_.NowMs() < consumer.next_pull_ms) return;
    const NodeId leader = partitions_->KnownLeader(consumer.partition);
    if (leader == 0 || (leader != config_.self && !peers_[leader].up)) return;
    consumer.target = leader;
  }
  const uint32_t credit = consumer.puller->TakeGrant();
  if (credit == 0) return;
  ++counters_.group_pulls;
  if (!SendQueueFrame(consumer.target, partition::kQueuePull,
                      partition::Encode(partition::QueuePullFrame{queue, consumer.epoch, credit}))) {
    consumer.target = 0;
    consumer.puller->Reset(consumer.epoch);
  }
}

void ClusterAgent::OnQueuePush(NodeId from, partition::QueuePushFrame push) {
  auto found = group_consumers_.find(push.queue);
  if (found == group_consumers_.end() || found->second.epoch == 0) {
    // Not consumed here (any more): the leader should stop.
    SendQueueFrame(from, partition::kQueueReject,
                   partition::Encode(partition::QueueRejectFrame{push.queue, 0, partition::QueueRejectReason::kNotConsumer}));
    return;
  }
  GroupQueueConsumer& consumer = found->second;
  if (push.epoch != consumer.epoch) return;  // for an earlier assignment of this node: credit long reset
  const size_t duplicates = consumer.puller->duplicates();
  for (partition::QueuedMessage& queued : consumer.puller->OnPush(push.messages)) {
    auto message = core::store::DecodeMessage(queued.record);
    if (!message) {
      // Cannot be delivered, ever: removed rather than pushed again forever.
      spdlog::warn("cluster: queue '{}' holds an unreadable message at offset {}: removed", push.queue, queued.offset);
      consumer.puller->Acked(queued.offset);
      continue;
    }
    consumer.waiting.emplace(queued.offset, std::move(*message));
  }
  counters_.group_push_duplicates += consumer.puller->duplicates() - duplicates;
  if (consumer.offered.empty()) OfferGroupMessages(push.queue);
  FlushGroupAcks(push.queue);  // duplicates of acknowledged ones are acknowledged again
}

// Offers every waiting message to the shards (each in turn, from a
// different first shard each time, until one has a member that takes it).
void ClusterAgent::OfferGroupMessages(const std::string& queue) {
  GroupQueueConsumer& consumer = group_consumers_.at(queue);
  for (const auto& [offset, message] : consumer.waiting) {
    if (!consumer.offered.insert(offset).second) continue;
    const uint64_t id = next_group_handoff_++;
    group_handoffs_.emplace(id, GroupHandoff{queue, offset, message, next_handoff_shard_, 0, consumer.generation, {}, 0});
    next_handoff_shard_ = static_cast<uint16_t>((next_handoff_shard_ + 1) % config_.shard_count);
    TryGroupHandoff(id);
  }
}

void ClusterAgent::TryGroupHandoff(uint64_t handoff) {
  const GroupHandoff& h = group_handoffs_.at(handoff);
  const auto consumer = group_consumers_.find(h.queue);
  const uint16_t shard = static_cast<uint16_t>((h.first_shard + h.tried) % config_.shard_count);
  group_handoffs_.at(handoff).shard = shard;
  PostToShard(shard, [message = h.message, key = consumer->second.key, handoff](core::ShardBroker& broker) {
    broker.TakeFromGroupQueue(message, key, handoff);
  });
}

// A shard picked a durable member for a QoS 2 message: the queue records
// the hand first, then the shard puts the message into that session.
void ClusterAgent::OnGroupQueueHand(uint64_t handoff, std::string client_id) {
  auto found = group_handoffs_.find(handoff);
  if (found == group_handoffs_.end()) return;
  GroupHandoff& h = found->second;
  auto consumer = group_consumers_.find(h.queue);
  if (consumer == group_consumers_.end() || consumer->second.generation != h.generation || !consumer->second.puller) {
    return OnGroupQueueHandoff(handoff, false);  // the queue moved on: nothing handed
  }
  h.hand_client = std::move(client_id);
  partitions_->Propose(
      consumer->second.partition, partition::EncodeQueueHand(h.queue, h.offset, HandTo(h.hand_client, handoff)),
      scope_.Guard([this, handoff](partition::PartitionResult result) {
        auto entry = group_handoffs_.find(handoff);
        if (entry == group_handoffs_.end()) return;
        GroupHandoff& hand = entry->second;
        if (result.status != meta::ProposeStatus::kOk) {
          // Perhaps recorded all the same: handed back before anything else.
          return UnhandGroupHandoff(handoff);
        }
        if (result.result == std::optional<std::string>("1")) {
          ++counters_.group_hands;
          auto owner = group_consumers_.find(hand.queue);
          const std::string key = owner != group_consumers_.end() ? owner->second.key : std::string();
          PostToShard(hand.shard, [message = hand.message, key, client = hand.hand_client,
                                   handoff](core::ShardBroker& broker) {
            broker.PutFromGroupQueue(message, key, client, handoff);
          });
          return;
        }
        // Another consumer's member holds it (or it left the queue): not
        // this node's to deliver, nor to acknowledge.
        ++counters_.group_hands_refused;
        const std::string queue = hand.queue;
        const uint64_t offset = hand.offset;
        const uint64_t generation = hand.generation;
        group_handoffs_.erase(entry);
        auto owner = group_consumers_.find(queue);
        if (owner == group_consumers_.end() || owner->second.generation != generation) return;
        GroupQueueConsumer& c = owner->second;
        c.offered.erase(offset);
        c.waiting.erase(offset);
        if (c.puller) c.puller->Forget(offset);
        if (c.offered.empty()) {
          FlushGroupAcks(queue);
          PullGroupQueue(queue);
        }
      }));
}

void ClusterAgent::UnhandGroupHandoff(uint64_t handoff) {
  GroupHandoff& h = group_handoffs_.at(handoff);
  partitions_->Propose(partitions_->PartitionOf(partition::QueueKey(h.queue)),
                       partition::EncodeQueueUnhand(h.queue, h.offset, HandTo(h.hand_client, handoff)),
                       scope_.Guard([this, handoff](partition::PartitionResult result) {
                         auto entry = group_handoffs_.find(handoff);
                         if (entry == group_handoffs_.end()) return;
                         if (result.status != meta::ProposeStatus::kOk) {
                           // Not offered to anyone else before it is surely not handed.
                           loop_.AddTimer(kAckRetryMs, scope_.Guard([this, handoff] {
                             if (group_handoffs_.count(handoff) != 0) UnhandGroupHandoff(handoff);
                           }));
                           return;
                         }
                         if (result.result == std::optional<std::string>("1")) ++counters_.group_unhands;
                         entry->second.hand_client.clear();
                         OnGroupQueueHandoff(handoff, false);
                       }));
}

void ClusterAgent::OnGroupQueueHandoff(uint64_t handoff, bool taken) {
  auto found = group_handoffs_.find(handoff);
  if (found == group_handoffs_.end()) return;
  GroupHandoff& h = found->second;
  if (!h.hand_client.empty()) {
    // The put of a handed message: failed (the session went), handed back
    // first; made, the session sends it once its Ack commits.
    if (!taken) return UnhandGroupHandoff(handoff);
    group_hand_releases_[{h.queue, h.offset}] =
        HandRelease{h.shard, h.hand_client, h.message->id, loop_.NowMs() + kHandReleaseFallbackMs};
  }
  auto consumer = group_consumers_.find(h.queue);
  const bool current = consumer != group_consumers_.end() && consumer->second.generation == h.generation;
  if (!taken && current && consumer->second.puller && ++h.tried < config_.shard_count) return TryGroupHandoff(handoff);
  const std::string queue = h.queue;
  const uint64_t offset = h.offset;
  group_handoffs_.erase(found);
  if (!current) {
    // The queue moved on meanwhile; a member that took it still acknowledges it.
    if (taken) AckGroupQueue(queue, {offset});
    return;
  }
  GroupQueueConsumer& c = consumer->second;
  c.offered.erase(offset);
  if (taken) ++counters_.group_handed_off;
  if (!c.puller) {
    // Refused as the consumer meanwhile (OnQueueReject): nothing waits any
    // more; what a member took is acknowledged all the same.
    c.waiting.erase(offset);
    if (taken) AckGroupQueue(queue, {offset});
    return;
  }
  if (taken) {
    c.waiting.erase(offset);
    // Not held: pushed under an assignment this node lost and took again.
    if (!c.puller->Acked(offset)) AckGroupQueue(queue, {offset});
  }
  if (!c.offered.empty()) return;
  // The round is over: acknowledge what was taken, grant what that freed,
  // and offer the rest again a bit later (every member here is busy).
  FlushGroupAcks(queue);
  PullGroupQueue(queue);
  if (!c.waiting.empty() && !c.retry_armed) {
    c.retry_armed = true;
    loop_.AddTimer(kRetryMs, scope_.Guard([this, queue] {
      auto entry = group_consumers_.find(queue);
      if (entry == group_consumers_.end()) return;
      entry->second.retry_armed = false;
      if (entry->second.offered.empty()) OfferGroupMessages(queue);
    }));
  }
}

void ClusterAgent::FlushGroupAcks(const std::string& queue) {
  GroupQueueConsumer& consumer = group_consumers_.at(queue);
  if (!consumer.puller) return;
  while (consumer.puller->has_acks()) AckGroupQueue(queue, consumer.puller->TakeAcks());
}

void ClusterAgent::AckGroupQueue(const std::string& queue, std::vector<uint64_t> offsets) {
  const uint64_t epoch = [&] {
    auto consumer = group_consumers_.find(queue);
    return consumer == group_consumers_.end() ? 0 : consumer->second.epoch;
  }();
  // Encoded before the callback takes the offsets (argument order is unspecified).
  std::string command = partition::EncodeQueueAck(queue, epoch, offsets);
  partitions_->Propose(
      partitions_->PartitionOf(partition::QueueKey(queue)), std::move(command),
      scope_.Guard([this, queue, offsets = std::move(offsets)](partition::PartitionResult result) mutable {
        if (result.status == meta::ProposeStatus::kOk) {
          counters_.group_acked += offsets.size();
          if (!group_hand_releases_.empty()) {
            for (uint64_t offset : offsets) ReleaseHanded(queue, offset, /*forced=*/false);
          }
          return;
        }
        // Made again (acks are idempotent). Meanwhile a push of these
        // offsets is dropped as a duplicate: the puller remembers them.
        loop_.AddTimer(kAckRetryMs, scope_.Guard([this, queue, offsets = std::move(offsets)]() mutable {
          AckGroupQueue(queue, std::move(offsets));
        }));
      }));
}

// A handed delivery's Ack committed: its session may send it now. Forced
// (the Ack has not committed for kHandReleaseFallbackMs): sent all the
// same, counted, since a member session must not stall for good; exactly
// once then holds unless this node dies before the Ack commits.
void ClusterAgent::ReleaseHanded(const std::string& queue, uint64_t offset, bool forced) {
  auto found = group_hand_releases_.find({queue, offset});
  if (found == group_hand_releases_.end()) return;
  HandRelease release = std::move(found->second);
  group_hand_releases_.erase(found);
  if (forced) {
    if (counters_.group_hand_releases_forced++ % 1000 == 0) {
      spdlog::warn("cluster: the Ack of queue '{}' offset {} has not committed in {} ms: its member session "
                   "sends it all the same (exactly once is not assured for it if this node dies now)",
                   queue, offset, kHandReleaseFallbackMs);
    }
  }
  PostToShard(release.shard, [client = std::move(release.client_id), id = release.id](core::ShardBroker& broker) {
    broker.ReleaseHanded(client, id);
  });
}

// A durable member session arrived on this node: for every queue of its
// partitioned groups, what other consumers (or this node's earlier
// process) handed it is settled against what it holds. Retried until
// committed; the session's own client may meanwhile be sent what it
// holds, which the queue pushes to nobody while it is handed.
void ClusterAgent::OnGroupSessionArrived(const std::string& client_id, const std::vector<std::string>& keys,
                                         const std::vector<MessageId>& held) {
  if (!partitions_) return;
  for (const std::string& key : keys) {
    const auto group = config_.partitioned_groups.find(core::SharedKeyGroup(key));
    if (group == config_.partitioned_groups.end()) continue;
    for (const std::string& queue : partition::GroupQueueNames(QueuePrefix(key), group->second.queues)) {
      SettleGroupQueue(queue, client_id, held);
    }
  }
}

void ClusterAgent::SettleGroupQueue(const std::string& queue, const std::string& client_id,
                                    const std::vector<MessageId>& held) {
  partitions_->Propose(
      partitions_->PartitionOf(partition::QueueKey(queue)),
      partition::EncodeQueueSettle(queue, HandTo(client_id), held),
      scope_.Guard([this, queue, client_id, held](partition::PartitionResult result) {
        if (result.status != meta::ProposeStatus::kOk) {
          loop_.AddTimer(kAckRetryMs,
                         scope_.Guard([this, queue, client_id, held] { SettleGroupQueue(queue, client_id, held); }));
          return;
        }
        ++counters_.group_settles;
        if (!result.result) return;
        if (auto settled = partition::DecodeQueueSettleResult(*result.result)) {
          counters_.group_settled_removed += settled->removed;
          counters_.group_settled_handed_back += settled->handed_back;
          if (settled->removed + settled->handed_back != 0) {
            spdlog::info("cluster: queue '{}' settled for session '{}': {} held (removed), {} handed back", queue,
                         client_id, settled->removed, settled->handed_back);
          }
        }
      }));
}

// --- the queues' leaders -----------------------------------------------------------

bool ClusterAgent::SendQueueFrame(NodeId node, uint8_t type, std::string body) {
  if (node == config_.self) {
    // This node leads the queue it consumes: the frame goes round the loop.
    loop_.Post(scope_.Guard([this, type, body = std::move(body)] { OnQueueFrame(config_.self, type, body); }));
    return true;
  }
  // Never held for a link that is down: both ends reset their credit when
  // it comes back, so a frame from before would count twice.
  if (!peers_[node].up) return false;
  Send(node, Control(type, std::move(body)));
  return true;
}

void ClusterAgent::OnQueueFrame(NodeId from, uint8_t type, std::string_view body) {
  switch (type) {
    case partition::kQueuePull:
      if (auto pull = partition::DecodeQueuePull(body)) return OnQueuePull(from, std::move(*pull));
      break;
    case partition::kQueuePush:
      if (auto push = partition::DecodeQueuePush(body)) return OnQueuePush(from, std::move(*push));
      break;
    case partition::kQueueReject:
      if (auto reject = partition::DecodeQueueReject(body)) return OnQueueReject(from, *reject);
      break;
    default:  // 0x62: acks go through the partition (a proposal), not this frame
      spdlog::debug("cluster: node {} sent queue frame type {:#x}, not used", from, type);
      return;
  }
  bad_frames_->fetch_add(1, std::memory_order_relaxed);
  spdlog::warn("cluster: malformed queue frame {:#x} from node {}", type, from);
}

void ClusterAgent::OnQueuePull(NodeId from, partition::QueuePullFrame pull) {
  auto reject = [&](NodeId node, partition::QueueRejectReason reason) {
    SendQueueFrame(from, partition::kQueueReject, partition::Encode(partition::QueueRejectFrame{pull.queue, node, reason}));
  };
  if (!partitions_) return reject(0, partition::QueueRejectReason::kNotLeader);
  const partition::PartitionId part = partitions_->PartitionOf(partition::QueueKey(pull.queue));
  if (!partitions_->Leads(part)) {
    group_pushers_.erase(pull.queue);
    const NodeId leader = partitions_->KnownLeader(part);
    return reject(leader == config_.self ? 0 : leader, partition::QueueRejectReason::kNotLeader);
  }
  auto found = group_pushers_.find(pull.queue);
  if (found == group_pushers_.end()) {
    found = group_pushers_
                .emplace(pull.queue, GroupQueuePusher{part, partition::QueuePusher(from, pull.epoch,
                                                                                 {.redeliver_after_ms = kRedeliverMs})})
                .first;
  }
  partition::QueuePusher& pusher = found->second.pusher;
  // The largest epoch pulled with wins: Assign's compare-and-set gives each
  // epoch to one node, so a larger one is a later decision. The same node
  // at a new epoch reset its credit too (it assigned itself again).
  if (pull.epoch > pusher.epoch()) {
    const bool same = pusher.consumer() == from;
    pusher.OnConsumerChanged(from, pull.epoch);
    if (same) pusher.Reset();
  }
  if (!pusher.Grant(from, pull.epoch, pull.credit)) {
    return reject(pusher.consumer(), partition::QueueRejectReason::kStaleEpoch);
  }
  PumpGroupQueue(pull.queue);
}

void ClusterAgent::OnQueueReject(NodeId from, const partition::QueueRejectFrame& reject) {
  if (reject.reason == partition::QueueRejectReason::kNotConsumer) {
    auto pusher = group_pushers_.find(reject.queue);
    if (pusher != group_pushers_.end() && pusher->second.pusher.consumer() == from) group_pushers_.erase(pusher);
    return;
  }
  auto found = group_consumers_.find(reject.queue);
  if (found == group_consumers_.end() || found->second.epoch == 0) return;
  GroupQueueConsumer& consumer = found->second;
  if (from != consumer.target) return;  // about an earlier target: pulls go elsewhere now
  if (reject.reason == partition::QueueRejectReason::kStaleEpoch) {
    // Another node assigned itself later: it consumes the queue (and is
    // pushed what waits here) unless this node's next look at the members
    // still says otherwise. What members here took is acknowledged first.
    FlushGroupAcks(reject.queue);
    consumer.puller.reset();
    for (auto it = consumer.waiting.begin(); it != consumer.waiting.end();) {
      it = consumer.offered.count(it->first) != 0 ? std::next(it) : consumer.waiting.erase(it);
    }
    consumer.epoch = 0;
    consumer.target = 0;
    consumer.next_assign_ms = loop_.NowMs() + kReassignMs;
    return;
  }
  consumer.puller->Reset(consumer.epoch);
  // Not the leader: the one it names, at once; none named, a bit later.
  consumer.target = reject.node != 0 && reject.node != from ? reject.node : 0;
  if (consumer.target != 0 && consumer.target != config_.self && !peers_[consumer.target].up) consumer.target = 0;
  if (consumer.target == 0) {
    consumer.next_pull_ms = loop_.NowMs() + kRetryMs;
    return;
  }
  PullGroupQueue(reject.queue);
}

// Inside a replica's Apply: noted, worked on after.
void ClusterAgent::OnQueueApplied(std::string_view queue, std::optional<uint64_t> appended,
                                  const std::vector<uint64_t>* acked, const std::vector<uint64_t>* released) {
  auto found = group_pushers_.find(queue);
  if (found == group_pushers_.end()) return;
  if (appended) found->second.pusher.OnAppended(*appended);
  if (acked) found->second.pusher.OnAck(*acked);
  if (released) found->second.pusher.OnReleased(*released);
  group_pumps_due_.insert(found->first);
  if (group_pump_posted_) return;
  group_pump_posted_ = true;
  loop_.Post(scope_.Guard([this] { PumpDueGroupQueues(); }));
}

void ClusterAgent::PumpDueGroupQueues() {
  group_pump_posted_ = false;
  for (const std::string& queue : std::exchange(group_pumps_due_, {})) PumpGroupQueue(queue);
}

// Reads the queue on this replica (it leads: its machine holds every
// committed message; a moment behind at worst, which only delays a push)
// and pushes what the credit allows.
void ClusterAgent::PumpGroupQueue(const std::string& queue) {
  auto found = group_pushers_.find(queue);
  if (found == group_pushers_.end()) return;
  GroupQueuePusher& p = found->second;
  partition::PartitionMachine* machine = partitions_ ? partitions_->machine(p.partition) : nullptr;
  if (machine == nullptr || !partitions_->Leads(p.partition)) return;  // the tick says so to the consumer
  std::vector<partition::QueuedMessage> push;
  while (auto read = p.pusher.NextRead()) {
    auto answer = partition::DecodeQueueReadResult(
        machine->Query(partition::EncodeQueueRead(queue, read->from, read->max_count, read->max_bytes)));
    if (!answer) {
      p.pusher.OnReadFailed(read->token);
      break;
    }
    const uint64_t repushed = p.pusher.repushed();
    auto batch = p.pusher.OnRead(read->token, *answer, loop_.NowMs());
    counters_.group_pushed += batch.size();
    counters_.group_repushed += p.pusher.repushed() - repushed;
    if (batch.empty()) break;
    push.insert(push.end(), std::make_move_iterator(batch.begin()), std::make_move_iterator(batch.end()));
  }
  if (push.empty()) return;
  if (!SendQueueFrame(p.pusher.consumer(), partition::kQueuePush,
                      partition::Encode(partition::QueuePushFrame{queue, p.pusher.epoch(), std::move(push)}))) {
    p.pusher.Reset();  // the link is down: pushed again once the consumer grants afresh
  }
}

// A link went down: credit given over it is gone on both ends.
void ClusterAgent::ResetGroupQueueLinks(NodeId node, bool gone) {
  for (auto it = group_pushers_.begin(); it != group_pushers_.end();) {
    if (it->second.pusher.consumer() != node) {
      ++it;
    } else if (gone) {
      it = group_pushers_.erase(it);
    } else {
      it->second.pusher.Reset();
      ++it;
    }
  }
  for (auto& [queue, consumer] : group_consumers_) {
    if (consumer.target != node || !consumer.puller) continue;
    consumer.target = 0;
    consumer.puller->Reset(consumer.epoch);
  }
}

// Each tick: pushers of partitions this node no longer leads go (their
// consumers are told); pushes not acknowledged for long are due again.
void ClusterAgent::TickGroupPushers() {
  const int64_t now = loop_.NowMs();
  counters_.group_push_in_flight = 0;
  for (auto it = group_pushers_.begin(); it != group_pushers_.end();) {
    GroupQueuePusher& p = it->second;
    if (!partitions_->Leads(p.partition)) {
      const NodeId leader = partitions_->KnownLeader(p.partition);
      SendQueueFrame(p.pusher.consumer(), partition::kQueueReject,
                     partition::Encode(partition::QueueRejectFrame{it->first, leader == config_.self ? NodeId{0} : leader,
                                                                   partition::QueueRejectReason::kNotLeader}));
      it = group_pushers_.erase(it);
      continue;
    }
    if (auto deadline = p.pusher.NextDeadline(); deadline && *deadline <= now) {
      p.pusher.Tick(now);
      PumpGroupQueue(it->first);
    }
    counters_.group_push_in_flight += p.pusher.in_flight();
    ++it;
  }
}

}  // namespace estuary::cluster
