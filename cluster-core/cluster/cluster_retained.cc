// The agent's side of retained messages on partitions (docs/partitions.md
// "Retained messages on partitions"): writes to the topic's partition and
// the retained index, and linearizable reads for SUBSCRIBE.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "cluster-core/cluster/cluster_agent.h"
#include "cluster-core/partition/retained_machine.h"

namespace estuary::cluster {

namespace {
constexpr uint64_t kMaxUnacknowledgedRetainedWrites = 65536;
bool HasWildcard(std::string_view filter) { return filter.find_first_of("+#") != std::string_view::npos; }
}  // namespace

// The retained index's partition is opened (by a no-op write) as soon as
// the partitions take writes, so that a reader can always read it: a
// reader whose metadata copy has not yet seen it open reads it anyway
// (open_elsewhere), and only before this first write is done can such a
// read find no leader (it then falls back to the node's copy after 3 s).
void ClusterAgent::OpenRetainedIndex() {
  partitions_->Propose(partitions_->PartitionOf(partition::kRetainedIndexKey), partition::EncodeRetainedIndexTouch(),
                       scope_.Guard([this](partition::PartitionResult result) {
                         if (result.status == meta::ProposeStatus::kOk) {
                           spdlog::debug("cluster: the retained index's partition is open");
                           return;
                         }
                         loop_.AddTimer(1000, scope_.Guard([this] { OpenRetainedIndex(); }));
                       }));
}

void ClusterAgent::OnRetainedToPartition(const MessagePtr& message, uint16_t origin_shard, uint64_t safe_token) {
  // Writes nobody waits for (QoS 0) are not held without bound while the
  // partitions cannot take them; acknowledged ones are bounded by their
  // publishers' windows.
  if (safe_token == 0 && counters_.retained_writes_pending >= kMaxUnacknowledgedRetainedWrites) {
    if (counters_.retained_writes_dropped++ % 1000 == 0) {
      spdlog::warn("cluster: {} retained writes wait for their partitions; a QoS 0 retained message for '{}' is "
                   "kept on this node only ({} so far)",
                   counters_.retained_writes_pending, message->topic, counters_.retained_writes_dropped);
    }
    return;
  }
  WriteRetained(message, [this, origin_shard, safe_token] {
    if (safe_token != 0) QueueSafe(origin_shard, safe_token);
  });
}

void ClusterAgent::OnReadRetained(uint16_t shard, const std::string& filter, core::ClusterPort::RetainedReadDone done) {
  ReadRetained(filter, [this, shard, done = std::move(done)](std::optional<std::vector<MessagePtr>> messages) mutable {
    PostToShard(shard, [done = std::move(done), messages = std::move(messages)](core::ShardBroker& broker) mutable {
      done(broker, std::move(messages));
    });
  });
}

void ClusterAgent::WriteRetained(const MessagePtr& message, std::function<void()> done) {
  if (!partitions_) {
    done();
    return;
  }
  ++counters_.retained_writes;
  ++counters_.retained_writes_pending;
  WriteRetainedAttempt(message, std::move(done), 0);
}

// The Put first, then (once per partition, as far as this node knows) the
// partition's entry in the retained index; the publisher is acknowledged
// after both. A reader that comes after the acknowledgement finds the
// partition in the index and the message in the partition; the partition
// is open before the index names it, so a wildcard read never waits on a
// partition that was never opened.
void ClusterAgent::WriteRetainedAttempt(const MessagePtr& message, std::function<void()> done, uint32_t attempt) {
  const partition::PartitionId target = partitions_->PartitionOf(partition::RetainedKey(message->topic));
  auto retry = scope_.Guard([this, message, done, attempt](meta::ProposeStatus status) {
    ++counters_.retained_write_retries;
    if (attempt == 0) {
      spdlog::warn(
          "cluster: retained message for '{}' not written to its partition yet (status {}); retrying, "
          "its publisher waits",
          message->topic, static_cast<int>(status));
    }
    const uint32_t delay = std::min<uint32_t>(1000, 50u << std::min<uint32_t>(attempt, 5));
    loop_.AddTimer(delay,
                   scope_.Guard([this, message, done, attempt] { WriteRetainedAttempt(message, done, attempt + 1); }));
  });
  auto finish = [this, done] {
    --counters_.retained_writes_pending;
    done();
  };
  auto index = [this, target, finish, retry] {
    if (retained_indexed_.contains(target)) return finish();
    partitions_->Propose(partitions_->PartitionOf(partition::kRetainedIndexKey),
                         partition::EncodeRetainedIndexAdd(target),
                         scope_.Guard([this, target, finish, retry](partition::PartitionResult result) {
                           if (result.status != meta::ProposeStatus::kOk) return retry(result.status);
                           retained_indexed_.insert(target);
                           finish();
                         }));
  };
  partitions_->Propose(target, partition::EncodeRetainedPut(*message),
                       scope_.Guard([index, retry](partition::PartitionResult result) {
                         if (result.status != meta::ProposeStatus::kOk) return retry(result.status);
                         index();
                       }));
}

// A filter without wildcards reads the one partition its topic hashes to
// (straight away if this node's metadata shows it open, else only if the
// retained index names it); a wildcard filter reads every partition the
// index names.
void ClusterAgent::ReadRetained(const std::string& filter,
                                std::function<void(std::optional<std::vector<MessagePtr>>)> done) {
  if (!partitions_) {
    done(std::vector<MessagePtr>{});
    return;
  }
  ++counters_.retained_reads;
  std::optional<partition::PartitionId> only;
  if (!HasWildcard(filter)) {
    only = partitions_->PartitionOf(partition::RetainedKey(filter));
    if (meta_->state().open_partitions().contains(*only)) {
      return ReadRetainedPartitions(filter, {*only}, std::move(done));
    }
  }
  const partition::PartitionId index = partitions_->PartitionOf(partition::kRetainedIndexKey);
  partitions_->Read(
      index, partition::EncodeRetainedIndexList(),
      scope_.Guard([this, filter, only, done = std::move(done)](partition::PartitionResult result) mutable {
        if (result.status != meta::ProposeStatus::kOk) {
          ++counters_.retained_reads_failed;
          return done(std::nullopt);
        }
        std::vector<partition::PartitionId> listed;
        if (result.result) {
          auto decoded = partition::DecodeRetainedIndexList(*result.result);
          if (!decoded) {
            ++counters_.retained_reads_failed;
            return done(std::nullopt);
          }
          listed = std::move(*decoded);
        }
        retained_indexed_.insert(listed.begin(), listed.end());
        if (only) {
          const bool named = std::find(listed.begin(), listed.end(), *only) != listed.end();
          listed.clear();
          if (named) listed.push_back(*only);
        }
        ReadRetainedPartitions(filter, std::move(listed), std::move(done));
      }),
      /*open_elsewhere=*/true);
}

void ClusterAgent::ReadRetainedPartitions(const std::string& filter, std::vector<partition::PartitionId> partitions,
                                          std::function<void(std::optional<std::vector<MessagePtr>>)> done) {
  if (partitions.empty()) return done(std::vector<MessagePtr>{});
  struct Gather {
    size_t remaining = 0;
    bool failed = false;
    std::vector<MessagePtr> messages;
    std::function<void(std::optional<std::vector<MessagePtr>>)> done;
  };
  auto gather = std::make_shared<Gather>();
  gather->remaining = partitions.size();
  gather->done = std::move(done);
  const std::string query = partition::EncodeRetainedMatch(filter);
  for (partition::PartitionId partition : partitions) {
    partitions_->Read(partition, query, scope_.Guard([this, gather](partition::PartitionResult result) {
      if (result.status != meta::ProposeStatus::kOk) {
        gather->failed = true;
      } else if (result.result) {
        auto decoded = partition::DecodeRetainedMatchResult(*result.result);
        if (!decoded) {
          gather->failed = true;
        } else {
          for (MessagePtr& message : *decoded) gather->messages.push_back(std::move(message));
        }
      }
      if (--gather->remaining != 0) return;
      if (gather->failed) {
        ++counters_.retained_reads_failed;
        return gather->done(std::nullopt);
      }
      gather->done(std::move(gather->messages));
    }),
                      /*open_elsewhere=*/true);
  }
}

}  // namespace estuary::cluster
