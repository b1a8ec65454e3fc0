// Partitioned shared groups (docs/cluster.md "Partitioned shared groups";
// issue 7 point 5, the publisher side): a group configured with K queues
// (--partitioned-group G=K) keeps its messages in K replicated queues
// (partition::QueueMachine) instead of handing each one to a member at
// once. The publisher's node appends a message to one queue, in turn or by
// its topic's hash, and its publisher is acknowledged once a majority of
// that queue's partition has it. Every node holding members of the group
// computes the same assignment of the queues to the nodes that have a
// connected member of the group (each node tells the others which groups it
// has connected members of: kGroupConsumers) and consumes its own: it
// reads a queue with a lease read on the partition's leader (at most
// kReadCount messages a read: the credit it grants), gives each message to
// a connected member here with room (ShardBroker::TakeFromGroupQueue) and,
// once the member's session holds it durably, acknowledges it to the queue
// (Ack), which removes it. What no member can take now stays in the queue.
//
// Delivery is at least once: a consumer that dies, or loses the queue to
// another node, between a member's taking a message and the Ack's commit,
// leaves it to be read again by the next consumer (a QoS 1 duplicate).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "cluster-core/cluster/cluster_agent.h"
#include "cluster-core/partition/queue_assign.h"
#include "cluster-core/partition/queue_machine.h"
#include "cluster-core/ring/hash.h"
#include "cluster-core/store/record_codec.h"

namespace estuary::cluster {

namespace {
constexpr uint32_t kReadCount = 32;             // messages per read (the credit granted)
constexpr uint32_t kReadBytes = 1u << 20;
constexpr uint32_t kRetryMs = 100;              // a failed append or read, or members all busy
constexpr uint32_t kAckRetryMs = 500;

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
  const uint32_t index = group->second.by_topic ? static_cast<uint32_t>(ring::StableHash(message->topic) % count)
                                                : group_turns_[key]++ % count;
  AppendToGroupQueue(message, key, index, origin_shard, safe_token, loop_.NowMs() + config_.group_append_deadline_ms);
}

void ClusterAgent::AppendToGroupQueue(const MessagePtr& message, const std::string& key, uint32_t queue_index,
                                      uint16_t origin_shard, uint64_t safe_token, int64_t deadline_ms) {
  const std::string queue = QueueName(key, queue_index);
  partitions_->Propose(
      partitions_->PartitionOf(partition::QueueKey(queue)), partition::EncodeQueueAppend(queue, *message),
      [this, message, key, queue_index, origin_shard, safe_token, deadline_ms, queue,
       alive = std::weak_ptr<int>(lifetime_)](partition::PartitionResult result) {
        if (alive.expired()) return;
        std::optional<partition::QueueAppendResult> appended;
        if (result.status == meta::ProposeStatus::kOk && result.result) {
          appended = partition::DecodeQueueAppendResult(*result.result);
        }
        if (appended && !appended->full) {
          ++counters_.group_appends;
          if (safe_token != 0) QueueSafe(origin_shard, safe_token);
          // Consumed here: read it now rather than at the next tick.
          if (auto consumer = group_consumers_.find(queue);
              consumer != group_consumers_.end() && consumer->second.wanted && !consumer->second.busy) {
            PollGroupQueue(queue);
          }
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
        loop_.AddTimer(next ? 10 : kRetryMs, [this, message, key, index, origin_shard, safe_token, deadline_ms, alive] {
          if (!alive.expired()) AppendToGroupQueue(message, key, index, origin_shard, safe_token, deadline_ms);
        });
      });
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
      if (added) it->second.key = key;
      it->second.wanted = true;
    }
  }
  for (auto it = group_consumers_.begin(); it != group_consumers_.end();) {
    it = !it->second.wanted && !it->second.busy ? group_consumers_.erase(it) : std::next(it);
  }
  counters_.group_queues_consumed = group_consumers_.size();
  const int64_t now = loop_.NowMs();
  for (auto& [queue, consumer] : group_consumers_) {
    if (consumer.wanted && !consumer.busy && now >= consumer.next_poll_ms) PollGroupQueue(queue);
  }
}

void ClusterAgent::PollGroupQueue(const std::string& queue) {
  GroupQueueConsumer& consumer = group_consumers_.at(queue);
  consumer.busy = true;
  ++counters_.group_reads;
  partitions_->Read(partitions_->PartitionOf(partition::QueueKey(queue)),
                    partition::EncodeQueueRead(queue, consumer.cursor, kReadCount, kReadBytes),
                    [this, queue, alive = std::weak_ptr<int>(lifetime_)](partition::PartitionResult result) {
                      if (!alive.expired()) OnGroupQueueRead(queue, result);
                    });
}

void ClusterAgent::OnGroupQueueRead(const std::string& queue, const partition::PartitionResult& result) {
  auto found = group_consumers_.find(queue);
  if (found == group_consumers_.end()) return;
  GroupQueueConsumer& consumer = found->second;
  std::optional<partition::QueueReadResult> read;
  if (result.status == meta::ProposeStatus::kOk) {
    // No result: the partition was never opened (nothing appended yet).
    read = result.result ? partition::DecodeQueueReadResult(*result.result) : partition::QueueReadResult{};
  }
  if (!read || read->messages.empty()) {
    consumer.busy = false;
    consumer.next_poll_ms = loop_.NowMs() + (read ? config_.tick_ms : kRetryMs);
    return;
  }
  consumer.refused_from = UINT64_MAX;
  consumer.batch_end = read->messages.back().offset + 1;
  consumer.pending = 0;
  for (partition::QueuedMessage& queued : read->messages) {
    if (consumer.acking.count(queued.offset) != 0) continue;  // taken already, its Ack on the way
    auto message = core::store::DecodeMessage(queued.record);
    if (!message) {
      // Cannot be delivered, ever: removed rather than read again forever.
      spdlog::warn("cluster: queue '{}' holds an unreadable message at offset {}: removed", queue, queued.offset);
      consumer.acking.insert(queued.offset);
      consumer.to_ack.push_back(queued.offset);
      continue;
    }
    const uint64_t id = next_group_handoff_++;
    group_handoffs_.emplace(id, GroupHandoff{queue, queued.offset, std::move(*message), next_handoff_shard_, 0});
    next_handoff_shard_ = static_cast<uint16_t>((next_handoff_shard_ + 1) % config_.shard_count);
    ++consumer.pending;
    TryGroupHandoff(id);
  }
  if (consumer.pending == 0) FinishGroupBatch(queue);
}

// Offered to the shards in turn, from a different first shard each time,
// until one has a member that takes it.
void ClusterAgent::TryGroupHandoff(uint64_t handoff) {
  const GroupHandoff& h = group_handoffs_.at(handoff);
  const auto consumer = group_consumers_.find(h.queue);
  const uint16_t shard = static_cast<uint16_t>((h.first_shard + h.tried) % config_.shard_count);
  PostToShard(shard, [message = h.message, key = consumer->second.key, handoff](core::ShardBroker& broker) {
    broker.TakeFromGroupQueue(message, key, handoff);
  });
}

void ClusterAgent::OnGroupQueueHandoff(uint64_t handoff, bool taken) {
  auto found = group_handoffs_.find(handoff);
  if (found == group_handoffs_.end()) return;
  GroupHandoff& h = found->second;
  if (!taken && ++h.tried < config_.shard_count) return TryGroupHandoff(handoff);
  const std::string queue = h.queue;
  const uint64_t offset = h.offset;
  group_handoffs_.erase(found);
  GroupQueueConsumer& consumer = group_consumers_.at(queue);  // kept while busy
  if (taken) {
    ++counters_.group_handed_off;
    consumer.acking.insert(offset);
    consumer.to_ack.push_back(offset);
  } else {
    consumer.refused_from = std::min(consumer.refused_from, offset);
  }
  if (--consumer.pending == 0) FinishGroupBatch(queue);
}

void ClusterAgent::FinishGroupBatch(const std::string& queue) {
  GroupQueueConsumer& consumer = group_consumers_.at(queue);
  consumer.busy = false;
  if (!consumer.to_ack.empty()) AckGroupQueue(queue, std::exchange(consumer.to_ack, {}));
  if (consumer.refused_from != UINT64_MAX) {
    // Every member here is busy: from the first message none took, a bit later.
    consumer.cursor = consumer.refused_from;
    consumer.next_poll_ms = loop_.NowMs() + kRetryMs;
    return;
  }
  consumer.cursor = consumer.batch_end;
  if (consumer.wanted) PollGroupQueue(queue);  // more may be there: at once
}

void ClusterAgent::AckGroupQueue(const std::string& queue, std::vector<uint64_t> offsets) {
  const std::string command = partition::EncodeQueueAck(queue, 0, offsets);
  partitions_->Propose(
      partitions_->PartitionOf(partition::QueueKey(queue)), command,
      [this, queue, offsets = std::move(offsets), alive = std::weak_ptr<int>(lifetime_)](
          partition::PartitionResult result) mutable {
        if (alive.expired()) return;
        if (result.status == meta::ProposeStatus::kOk) {
          counters_.group_acked += offsets.size();
          if (auto consumer = group_consumers_.find(queue); consumer != group_consumers_.end()) {
            for (uint64_t offset : offsets) consumer->second.acking.erase(offset);
          }
          return;
        }
        // Made again (acks are idempotent); meanwhile the offsets are not
        // handed off again here.
        loop_.AddTimer(kAckRetryMs, [this, queue, offsets = std::move(offsets), alive]() mutable {
          if (!alive.expired()) AckGroupQueue(queue, std::move(offsets));
        });
      });
}

}  // namespace estuary::cluster
