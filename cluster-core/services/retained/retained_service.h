#pragma once
// RetainedService: retained messages on partitions (docs/partitions.md
// "Retained messages on partitions"), the one path by which they are
// replicated. A retained PUBLISH is written to the partition its topic
// hashes to, then (once per partition, as far as this node knows) that
// partition is added to the retained index; a SUBSCRIBE reads the
// matching messages from the partitions' leaders (lease reads). A write
// that fails is made again (50 ms, doubling up to 1 s) until it commits; a
// read that fails is answered with nullopt (the shard falls back to its
// own copy).
//
// Owned by the node's coordinator (cluster::ClusterAgent), which creates
// it once partitions run and turns the shards' calls into these.
//
// Threading: the partition host's loop; every callback runs there.
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cluster-core/meta/meta_group.h"
#include "cluster-core/partition/partition_host.h"
#include "io/loop.h"
#include "io/scope.h"
#include "model/message.h"

namespace estuary::services {

struct RetainedConfig {
  // Writes nobody waits for (QoS 0) past this many pending are not made
  // (the message stays on this node only); acknowledged ones are bounded by
  // their publishers' windows.
  uint64_t max_unacknowledged_pending = 65536;
};

struct RetainedCounters {
  uint64_t writes = 0;          // retained messages written to partitions
  uint64_t write_retries = 0;   // attempts that failed and were made again
  uint64_t writes_pending = 0;  // not committed yet (now)
  uint64_t writes_dropped = 0;  // QoS 0 ones not written: too many were pending
  uint64_t reads = 0;           // reads asked for (one per SUBSCRIBE filter)
  uint64_t reads_failed = 0;    // not answered in time, or an answer that did not decode
};

class RetainedService {
 public:
  RetainedService(io::Loop& loop, partition::PartitionHost& partitions, const meta::MetaGroup& meta,
                  RetainedConfig config = {});
  RetainedService(const RetainedService&) = delete;
  RetainedService& operator=(const RetainedService&) = delete;

  // Opens the retained index's partition (by a no-op write, tried again
  // every second until it commits), so a reader can always read it.
  void Start();
  // `done` once the message's partition and the index have it.
  void Write(const MessagePtr& message, std::function<void()> done);
  // A write nobody waits for: not made (false, counted, logged 1 in 1000)
  // while max_unacknowledged_pending writes are pending.
  bool WriteUnacknowledged(const MessagePtr& message);
  // The live retained messages matching `filter` (nullopt: not read in
  // time). A filter without wildcards reads the one partition its topic
  // hashes to (straight away if the metadata shows it open, else only if
  // the index names it); a wildcard filter reads every partition the index
  // names, in parallel.
  using ReadDone = std::function<void(std::optional<std::vector<MessagePtr>>)>;
  void Read(const std::string& filter, ReadDone done);

  const RetainedCounters& counters() const { return counters_; }

 private:
  void WriteAttempt(const MessagePtr& message, std::function<void()> done, uint32_t attempt);
  void ReadPartitions(const std::string& filter, std::vector<partition::PartitionId> partitions, ReadDone done);

  io::Loop& loop_;
  partition::PartitionHost& partitions_;
  const meta::MetaGroup& meta_;
  RetainedConfig config_;
  RetainedCounters counters_;
  std::set<partition::PartitionId> indexed_;  // partitions the index is known to name
  io::Scope scope_;                           // last: guards the callbacks that capture this
};

}  // namespace estuary::services
