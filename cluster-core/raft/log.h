#pragma once
// RaftLog: the in-memory log of one raft node: a snapshot (everything up to
// snapshot().index, compacted away) followed by entries. Tracks how far
// the caller has persisted, and the membership config in force (the last
// config entry in the log, persisted or not, else the snapshot's).
// Owned by one Raft; not thread-safe.
#include <memory>
#include <optional>
#include <vector>

#include "cluster-core/raft/types.h"

namespace estuary::raft {

class RaftLog {
 public:
  RaftLog();
  // Replaces everything: state as read back from storage on start.
  void Restore(Snapshot snapshot, std::vector<Entry> entries);

  Index FirstIndex() const { return snapshot_->index + 1; }
  Index LastIndex() const { return snapshot_->index + entries_.size(); }
  Term LastTerm() const;
  uint64_t LastTimestamp() const;
  // Timestamp of the entry at index, which must be the snapshot's or in the log.
  uint64_t TimestampAt(Index index) const;
  // Term of the entry at index; nullopt if compacted below the snapshot or
  // past the end. The snapshot's own index answers with its term.
  std::optional<Term> TermAt(Index index) const;
  const Entry& At(Index index) const;
  bool Matches(Index index, Term term) const { return TermAt(index) == term; }
  // Raft's election restriction: is (last_index, last_term) at least as up
  // to date as this log?
  bool IsUpToDateWith(Index last_index, Term last_term) const;
  // The last index <= index whose term is <= term (fast backtracking).
  Index FindHint(Index index, Term term) const;

  // Appends after the last entry (the leader's path).
  void Append(Entry entry);
  // Follower path: entries follow a matching prev entry; entries already
  // present with the same term are skipped, a conflict truncates the
  // suffix. Returns the entries that were actually written (to persist).
  std::vector<Entry> Merge(const std::vector<Entry>& entries);
  // Entries [from, to] capped at max_entries and (after the first) max_bytes.
  std::vector<Entry> Slice(Index from, Index to, size_t max_entries, size_t max_bytes) const;

  // Drops entries up to snapshot.index, which must be in the log.
  void Compact(Snapshot snapshot);
  // Installs a snapshot from the leader, discarding the whole log.
  void Install(Snapshot snapshot);
  const std::shared_ptr<const Snapshot>& snapshot() const { return snapshot_; }

  Index persisted() const { return persisted_; }
  // The caller persisted entries up to (index, term).
  void MarkPersisted(Index index, Term term);

  const Config& config() const { return config_; }
  // Membership as of index (for a snapshot taken there).
  Config ConfigAt(Index index) const;
  Index config_index() const { return config_index_; }

 private:
  void RecomputeConfig();

  std::shared_ptr<const Snapshot> snapshot_;
  std::vector<Entry> entries_;  // entries_[i].index == snapshot_->index + 1 + i
  Index persisted_ = 0;
  Config config_;
  Index config_index_ = 0;
};

}  // namespace estuary::raft
