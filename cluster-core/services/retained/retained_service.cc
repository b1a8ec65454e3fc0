#include "cluster-core/services/retained/retained_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <string_view>

#include "cluster-core/partition/retained_machine.h"

namespace estuary::services {

namespace {
bool HasWildcard(std::string_view filter) { return filter.find_first_of("+#") != std::string_view::npos; }
}  // namespace

RetainedService::RetainedService(io::Loop& loop, partition::PartitionHost& partitions, const meta::MetaGroup& meta,
                                 RetainedConfig config)
    : loop_(loop), partitions_(partitions), meta_(meta), config_(config) {}

// A reader whose metadata copy has not yet seen the index open reads it
// anyway (open_elsewhere), and only before this first write is done can
// such a read find no leader (it then fails after the read deadline).
void RetainedService::Start() {
  partitions_.Propose(partitions_.PartitionOf(partition::kRetainedIndexKey), partition::EncodeRetainedIndexTouch(),
                      scope_.Guard([this](partition::PartitionResult result) {
                        if (result.status == meta::ProposeStatus::kOk) {
                          spdlog::debug("cluster: the retained index's partition is open");
                          return;
                        }
                        loop_.AddTimer(1000, scope_.Guard([this] { Start(); }));
                      }));
}

bool RetainedService::WriteUnacknowledged(const MessagePtr& message) {
  if (counters_.writes_pending >= config_.max_unacknowledged_pending) {
    if (counters_.writes_dropped++ % 1000 == 0) {
      spdlog::warn("cluster: {} retained writes wait for their partitions; a QoS 0 retained message for '{}' is "
                   "kept on this node only ({} so far)",
                   counters_.writes_pending, message->topic, counters_.writes_dropped);
    }
    return false;
  }
  Write(message, [] {});
  return true;
}

void RetainedService::Write(const MessagePtr& message, std::function<void()> done) {
  ++counters_.writes;
  ++counters_.writes_pending;
  WriteAttempt(message, std::move(done), 0);
}

// The Put first, then the partition's entry in the index; the publisher is
// acknowledged after both. A reader that comes after the acknowledgement
// finds the partition in the index and the message in the partition; the
// partition is open before the index names it, so a wildcard read never
// waits on a partition that was never opened.
void RetainedService::WriteAttempt(const MessagePtr& message, std::function<void()> done, uint32_t attempt) {
  const partition::PartitionId target = partitions_.PartitionOf(partition::RetainedKey(message->topic));
  auto retry = scope_.Guard([this, message, done, attempt](meta::ProposeStatus status) {
    ++counters_.write_retries;
    if (attempt == 0) {
      spdlog::warn(
          "cluster: retained message for '{}' not written to its partition yet (status {}); retrying, "
          "its publisher waits",
          message->topic, static_cast<int>(status));
    }
    const uint32_t delay = std::min<uint32_t>(1000, 50u << std::min<uint32_t>(attempt, 5));
    loop_.AddTimer(delay, scope_.Guard([this, message, done, attempt] { WriteAttempt(message, done, attempt + 1); }));
  });
  auto finish = [this, done] {
    --counters_.writes_pending;
    done();
  };
  auto index = [this, target, finish, retry] {
    if (indexed_.contains(target)) return finish();
    partitions_.Propose(partitions_.PartitionOf(partition::kRetainedIndexKey), partition::EncodeRetainedIndexAdd(target),
                        scope_.Guard([this, target, finish, retry](partition::PartitionResult result) {
                          if (result.status != meta::ProposeStatus::kOk) return retry(result.status);
                          indexed_.insert(target);
                          finish();
                        }));
  };
  partitions_.Propose(target, partition::EncodeRetainedPut(*message),
                      scope_.Guard([index, retry](partition::PartitionResult result) {
                        if (result.status != meta::ProposeStatus::kOk) return retry(result.status);
                        index();
                      }));
}

void RetainedService::Read(const std::string& filter, ReadDone done) {
  ++counters_.reads;
  std::optional<partition::PartitionId> only;
  if (!HasWildcard(filter)) {
    only = partitions_.PartitionOf(partition::RetainedKey(filter));
    if (meta_.state().open_partitions().contains(*only)) return ReadPartitions(filter, {*only}, std::move(done));
  }
  const partition::PartitionId index = partitions_.PartitionOf(partition::kRetainedIndexKey);
  partitions_.Read(
      index, partition::EncodeRetainedIndexList(),
      scope_.Guard([this, filter, only, done = std::move(done)](partition::PartitionResult result) mutable {
        if (result.status != meta::ProposeStatus::kOk) {
          ++counters_.reads_failed;
          return done(std::nullopt);
        }
        std::vector<partition::PartitionId> listed;
        if (result.result) {
          auto decoded = partition::DecodeRetainedIndexList(*result.result);
          if (!decoded) {
            ++counters_.reads_failed;
            return done(std::nullopt);
          }
          listed = std::move(*decoded);
        }
        indexed_.insert(listed.begin(), listed.end());
        if (only) {
          const bool named = std::find(listed.begin(), listed.end(), *only) != listed.end();
          listed.clear();
          if (named) listed.push_back(*only);
        }
        ReadPartitions(filter, std::move(listed), std::move(done));
      }),
      /*open_elsewhere=*/true);
}

void RetainedService::ReadPartitions(const std::string& filter, std::vector<partition::PartitionId> partitions,
                                     ReadDone done) {
  if (partitions.empty()) return done(std::vector<MessagePtr>{});
  struct Gather {
    size_t remaining = 0;
    bool failed = false;
    std::vector<MessagePtr> messages;
    ReadDone done;
  };
  auto gather = std::make_shared<Gather>();
  gather->remaining = partitions.size();
  gather->done = std::move(done);
  const std::string query = partition::EncodeRetainedMatch(filter);
  for (partition::PartitionId partition : partitions) {
    partitions_.Read(
        partition, query,
        scope_.Guard([this, gather](partition::PartitionResult result) {
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
            ++counters_.reads_failed;
            return gather->done(std::nullopt);
          }
          gather->done(std::move(gather->messages));
        }),
        /*open_elsewhere=*/true);
  }
}

}  // namespace estuary::services
