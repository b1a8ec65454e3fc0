#pragma once
// RetainedMachine: the retained messages of the topics that hash to one
// partition (issue 7 point 3, docs/partitions.md "Retained messages").
// A retained topic lives in PartitionOf(topic); its partition's raft group
// holds the last retained message per topic, replicated before the
// publisher is acknowledged, and answers reads through the leader's lease
// (PartitionHost::Read), so a SUBSCRIBE that reads every partition holding
// retained messages sees every acknowledged value or a later one.
//
// The ordering rules are core::RetainedStore's: between two changes of a
// topic the newer message id wins, a clear (empty payload) leaves a
// tombstone so a late older value cannot bring the topic back, and
// tombstones are dropped after the TTL. "Now" for expiry is the entry's
// HLC timestamp, so every replica drops the same entries at the same
// point of the log (a replica's own clock would let them diverge).
//
// Commands (one byte tag, then the body; tags 0x10-0x1F, see
// PartitionState):
//   0x10 Put: a message record (record_codec EncodeMessage), retain set;
//        an empty payload clears the topic. Result "1" stored, "0" older.
// Queries:
//   0x10 Match: a topic filter. Result: u32 count, then count x bytes (a
//        message record): the live retained messages matching the filter
//        whose expiry has not passed at the leader's wall clock.
//
// RetainedIndex: which partitions hold retained topics, kept in one
// well-known partition (kRetainedIndexKey), so a wildcard SUBSCRIBE knows
// which partitions to read. A writer adds a partition to the index (and
// waits for that commit) before its first Put there commits, so a reader
// that reads the index after a Put was acknowledged finds its partition.
//   0x20 Add: u32 partition. Result "1" added, "0" already there.
//   0x21 Touch: nothing; written once at start so the index's partition is
//        open before any client needs it (readers then always read it).
//        Result "1".
//   query 0x20 List: u32 count, count x u32 partition.
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cluster-core/broker/retained_store.h"
#include "cluster-core/partition/partition_host.h"

namespace estuary::partition {

// The key whose partition holds the RetainedIndex.
inline constexpr std::string_view kRetainedIndexKey = "$retained-index";
// The key a retained topic hashes by (DESIGN.md's keyspace).
inline std::string RetainedKey(std::string_view topic) { return "retained/" + std::string(topic); }

std::string EncodeRetainedIndexAdd(PartitionId partition);
std::string EncodeRetainedIndexTouch();
std::string EncodeRetainedIndexList();
std::optional<std::vector<PartitionId>> DecodeRetainedIndexList(std::string_view bytes);

std::string EncodeRetainedPut(const Message& message);
std::string EncodeRetainedMatch(std::string_view filter);
// nullopt if the bytes are malformed.
std::optional<std::vector<MessagePtr>> DecodeRetainedMatchResult(std::string_view bytes);

class RetainedMachine final : public PartitionMachine {
 public:
  // How often (in entry time) tombstones and expired messages are swept.
  static constexpr uint64_t kSweepEveryMs = 60'000;

  // `wall_ms` gives the leader's wall clock for query-time expiry.
  explicit RetainedMachine(std::function<int64_t()> wall_ms,
                           int64_t tombstone_ttl_ms = core::RetainedStore::kDefaultTombstoneTtlMs);

  std::string Apply(const raft::Entry& entry) override;
  std::vector<uint8_t> Snapshot() const override;
  bool Restore(const std::vector<uint8_t>& data) override;
  std::string Query(std::string_view query) const override;

  const core::RetainedStore& store() const { return store_; }
  uint64_t malformed() const { return malformed_; }

 private:
  std::function<int64_t()> wall_ms_;
  int64_t tombstone_ttl_ms_;
  core::RetainedStore store_;
  uint64_t last_sweep_ms_ = 0;  // entry time of the last sweep
  uint64_t malformed_ = 0;
};

class RetainedIndex final : public PartitionMachine {
 public:
  std::string Apply(const raft::Entry& entry) override;
  std::vector<uint8_t> Snapshot() const override;
  bool Restore(const std::vector<uint8_t>& data) override;
  std::string Query(std::string_view query) const override;
  const std::set<PartitionId>& partitions() const { return partitions_; }
  uint64_t malformed() const { return malformed_; }

 private:
  std::set<PartitionId> partitions_;
  uint64_t malformed_ = 0;
};

}  // namespace estuary::partition
