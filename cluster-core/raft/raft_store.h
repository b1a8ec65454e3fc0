#pragma once
// RaftStore: a raft group's durable state (hard state, snapshot, log
// entries) in a persistence::StorageEngine, under the key prefix
// "raft/<group>/" (layout in docs/raft.md). Save() writes one Ready's
// durable part as one atomic WriteBatch; Load() reads back the Storage a
// restarted Raft starts from. The raft state machine itself stays pure:
// the shell calls Save() in step 1 of the Ready contract (types.h).
//
// Threading: the engine's owner thread, like the engine.
#include <string>

#include "cluster-core/raft/raft.h"
#include "persistence/storage_engine.h"

namespace estuary::raft {

class RaftStore {
 public:
  RaftStore(persistence::StorageEngine& engine, std::string group);

  // Reads the state back (and learns where the log ends). A group never
  // saved loads as an empty Storage; the caller adds the bootstrap config.
  persistence::Result<Storage> Load();
  // Persists the hard state, snapshot and entries of `ready`: entries
  // overwrite the log from their first index and drop any suffix after
  // them; a snapshot drops the log up to its index (all of it if
  // restore_snapshot). Load() must have been called first.
  persistence::Status Save(const Ready& ready);

  // Keys, exposed for tests and docs.
  std::string HardStateKey() const { return prefix_ + "h"; }
  std::string SnapshotKey() const { return prefix_ + "s"; }
  std::string EntryKey(Index index) const;
  std::string EntryPrefix() const { return prefix_ + "l/"; }

 private:
  void DeleteEntries(persistence::WriteBatch& batch, Index from, Index to) const;

  persistence::StorageEngine& engine_;
  std::string prefix_;
  Index first_ = 1;  // first log entry held (after the snapshot)
  Index last_ = 0;   // last log entry held (first_ - 1 if none)
  bool loaded_ = false;
};

// Encodings, exposed for tests. Decoders reject malformed bytes (the disk
// is outside input) instead of crashing.
std::string EncodeEntry(const Entry& entry);
std::optional<Entry> DecodeEntry(std::string_view bytes);
std::string EncodeSnapshot(const Snapshot& snapshot);
std::optional<Snapshot> DecodeSnapshot(std::string_view bytes);

}  // namespace estuary::raft
