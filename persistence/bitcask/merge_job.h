#pragma once
// Internal to BitcaskEngine: the state of an incremental merge, shared by
// bitcask_engine.cc (which owns it) and bitcask_merge.cc (which runs it).
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "persistence/bitcask/bitcask_engine.h"
#include "persistence/bitcask/merge_manifest.h"

namespace estuary::persistence::bitcask {

// One merge output file being written.
struct BitcaskEngine::MergeOutput {
  uint32_t id = 0;
  std::unique_ptr<io::File> file;
  uint64_t size = 0;    // bytes written plus buffered
  std::string pending;  // not yet appended
  std::vector<RecordEntry> entries;
  uint64_t min_seq = UINT64_MAX;
  uint64_t max_tombstone_seq = 0;
  uint64_t tombstone_bytes = 0;
};

// A record copied (or found unreadable); applied at commit only if the key
// still points where it pointed when copied.
struct BitcaskEngine::MergeMove {
  std::string key;
  KeyEntry from;
  std::optional<KeyEntry> to;  // nullopt: unreadable, drop the key
};

struct BitcaskEngine::MergeJob {
  MergeManifest manifest;
  std::set<uint32_t> obsolete;
  std::string cursor;  // the next key to look at
  bool copied_all = false;
  bool copied_tombstones = false;
  // Tombstones at least this new are kept (CopyTombstones).
  uint64_t keep_tombstones_from = 0;
  std::vector<MergeOutput> outputs;
  std::vector<MergeMove> moves;
};

// Renames a committed merge's outputs into place and removes its inputs and
// the manifest (Open after a crash, or the janitor). Touches only `fs`.
Status FinishMergeOnDisk(io::FileSystem& fs, const std::string& dir);

}  // namespace estuary::persistence::bitcask
