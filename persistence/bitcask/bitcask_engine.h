#pragma once
// BitcaskEngine: a StorageEngine on append-only, CRC-checked data files and
// an in-memory ordered key directory (docs/bitcask_format.md).
//
// - Writes append to the active data file, which rotates at max_file_size;
//   older files are immutable and get a hint file for fast start-up.
// - Open() recovers: completes or discards an interrupted merge, loads each
//   file from its hint (or scans the data when the hint is bad), truncates a
//   torn tail (logged), skips corrupt records in the middle (logged), and
//   starts a fresh active file.
// - A merge rewrites the live records of every immutable file into new
//   files and deletes the old ones; a crash at any point loses nothing (the
//   merge commits by renaming a manifest). It runs incrementally, at most
//   merge_step_bytes per step, between writes (StartMerge/MergeStep); Tick()
//   starts one when dead bytes pass merge_dead_ratio; Merge() runs one to
//   the end at once.
// - Group commit: under kAlways, WriteAsync appends at once and shares one
//   fdatasync among all writes of the current loop iteration (a Post on the
//   injected Loop); Write() syncs before it returns.
//
// Threading: one owner thread (StorageEngine). The FileSystem, Loop and
// Clock must outlive the engine.
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/clock.h"
#include "io/file_system.h"
#include "io/loop.h"
#include "persistence/bitcask/format.h"
#include "persistence/storage_engine.h"

namespace estuary::persistence::bitcask {

struct BitcaskOptions {
  SyncPolicy sync = SyncPolicy::kAlways;
  int64_t sync_interval_ms = 100;
  uint64_t max_file_size = 64ull << 20;  // capped below 4 GiB (u32 offsets)
  // Tick() starts a merge when dead/(live+dead) >= ratio and dead >= min
  // bytes.
  // A ratio <= 0 turns automatic merging off.
  double merge_dead_ratio = 0.5;
  uint64_t merge_min_dead_bytes = 16ull << 20;
  // While live bytes fall from one Tick to the next (acks consuming a
  // queue), that merge waits until dead/(live+dead) reaches this ratio: a
  // merge now would copy records about to die. <= merge_dead_ratio: no wait.
  double merge_defer_ratio = 0.9;
  // Live bytes copied per merge step: bounds how long one step blocks.
  uint64_t merge_step_bytes = 4ull << 20;
  // Under kAlways the active file is zero-filled this far ahead of its data
  // (and written in place), so an fdatasync flushes data blocks only, with
  // no size or extent change for the file system's journal to commit. The
  // tail is trimmed at rotation and Close (docs/bitcask_format.md,
  // "Versions and preallocation"). 0, another policy, or a FileSystem
  // without OpenWrite: plain appends.
  uint64_t preallocate_bytes = 1ull << 20;
  // Optional: drives interval syncs (a timer) and group commit (Post).
  io::Loop* loop = nullptr;
  // Record timestamps (wall ms); SystemClock when null.
  const io::Clock* clock = nullptr;
  // Recovery and merge messages; stderr when empty.
  std::function<void(const std::string&)> log;
};

class BitcaskEngine final : public StorageEngine {
 public:
  static Result<std::unique_ptr<BitcaskEngine>> Open(io::FileSystem& fs, std::string dir,
                                                     BitcaskOptions options);
  ~BitcaskEngine() override;
  BitcaskEngine(const BitcaskEngine&) = delete;
  BitcaskEngine& operator=(const BitcaskEngine&) = delete;

  Status Write(const WriteBatch& batch) override;
  void WriteAsync(const WriteBatch& batch, std::function<void(Status)> done) override;
  Result<std::optional<std::string>> Get(std::string_view key) override;
  Status Scan(std::string_view prefix, std::string_view start, const ScanVisitor& visit) override;
  using StorageEngine::Scan;
  Status Sync() override;
  Status Tick(int64_t now_ms) override;
  Stats GetStats() const override;
  Status Close() override;

  // Rewrites live records of all immutable files and deletes them, in one
  // call (by command). Finishes a merge already started.
  Status Merge();
  // Starts an incremental merge of the files immutable now. With a Loop it
  // advances by one MergeStep per loop iteration (a 1 ms timer); without
  // one, Tick() advances it. Writes, reads and scans go on in between.
  Status StartMerge();
  // Copies up to `byte_budget` bytes of live records; commits when all are
  // copied. A no-op when no merge runs.
  Status MergeStep(uint64_t byte_budget);
  bool merging() const { return merge_ != nullptr; }
  // Closes the active file and starts a new one (tests and merge).
  Status Rotate();

  // The key directory's entry: 24 bytes plus the std::map node and the key.
  struct KeyEntry {
    uint32_t file_id = 0;
    uint32_t offset = 0;
    uint32_t value_size = 0;  // kLoadTombstone marks a delete while loading
    uint64_t seq = 0;
  };

 private:
  struct DataFile {
    std::unique_ptr<io::File> file;
    uint64_t size = 0;  // end of the data
    uint64_t live_bytes = 0;
    uint64_t allocated = 0;  // the active file's length with its zero-filled tail
    bool has_tombstones = false;
  };

  using KeyDir = std::map<std::string, KeyEntry, std::less<>>;
  struct MergeOutput;
  struct MergeMove;
  struct MergeJob;

  BitcaskEngine(io::FileSystem& fs, std::string dir, BitcaskOptions options);

  // Merge (bitcask_merge.cc).
  void ScheduleMergeStep();
  void AbandonMerge(const std::string& why);
  Status CopyLiveRecords(MergeJob& job, uint64_t byte_budget);
  Status CopyRecord(MergeJob& job, const std::string& key, const KeyEntry& entry,
                    const DecodedRecord& record, const std::string& bytes);
  Status FlushMergeOutput(MergeOutput& out);
  Status SealMergeOutputs(MergeJob& job);
  Status CommitMerge(MergeJob& job);
  // Deletes immutable files holding neither live records nor tombstones
  // (every record superseded): reclaimed without copying anything.
  Status DropDeadFiles();

  // Recovery (bitcask_recovery.cc).
  Status Recover();
  Status FinishCommittedMerge();
  Status LoadFile(uint32_t id);
  void ApplyLoaded(uint32_t id, std::vector<RecordEntry>& entries);  // moves the keys out
  Status WriteHint(uint32_t id, const std::string& suffix);  // rescans the data file
  Status WriteHintBytes(uint32_t id, const std::string& suffix, const std::string& hint);
  Status WriteActiveHint();
  Status StartActiveFile();

  // Writing (bitcask_engine.cc).
  Status CheckWritable() const;
  Status AppendBatch(const WriteBatch& batch);  // Write without the sync
  Status AppendEncoded(const std::string& bytes, const WriteBatch& batch, uint64_t first_seq,
                       int64_t timestamp_ms);
  // Updates the key directory and the active file's hint for an appended batch.
  void ApplyToKeyDir(const WriteBatch& batch, uint64_t first_seq, uint64_t first_offset,
                     int64_t timestamp_ms);
  void AddRecordToKeyDir(const std::string& key, KeyEntry entry);
  // Inserts a new key; keys arriving in ascending order (queues) take the
  // O(1) end-hinted path instead of a tree search.
  template <typename Key>
  std::pair<KeyDir::iterator, bool> EmplaceKey(Key&& key, const KeyEntry& entry) {
    if (keydir_.empty() || std::prev(keydir_.end())->first < key) {
      return {keydir_.emplace_hint(keydir_.end(), std::forward<Key>(key), entry), true};
    }
    return keydir_.try_emplace(std::forward<Key>(key), entry);
  }
  // Writes an encoded batch at the end of the active file's data.
  Status WriteActive(DataFile& active, const std::string& bytes);
  // Cuts the active file's zero-filled tail (before rotation and Close).
  Status TrimActive();
  Status SyncActive();
  void FlushGroup();
  void ArmIntervalTimer();
  Result<std::string> ReadValue(const std::string& key, const KeyEntry& entry);
  // Scan's read-ahead: reads the records of [first, last) with one pread.
  Result<std::string> ReadRun(KeyDir::const_iterator first, KeyDir::const_iterator last);
  Status Fault(const io::FsError& error);
  int64_t NowWallMs() const;
  void Log(const std::string& message) const;
  std::string PathOf(const std::string& name) const { return dir_ + "/" + name; }

  io::FileSystem& fs_;
  const std::string dir_;
  BitcaskOptions options_;
  KeyDir keydir_;
  std::map<uint32_t, DataFile> files_;
  uint32_t active_id_ = 0;
  DataFile* active_ = nullptr;  // files_[active_id_] (map nodes do not move)
  // The file `id`, without a map lookup for the active one (every write).
  DataFile& FileOf(uint32_t id) { return id == active_id_ ? *active_ : files_[id]; }
  uint32_t next_file_id_ = 1;
  uint64_t next_seq_ = 1;
  uint64_t syncs_ = 0;
  bool dirty_ = false;           // appended bytes not yet synced
  bool preallocate_ = false;     // the active file is written in place
  // The active file's hint, built as records are appended, so rotation and
  // Close need not read the file back and check every CRC again: (29 + key)
  // bytes per record, given up past kMaxActiveHintBytes (then the file is
  // rescanned as before), so it costs at most 4 MiB per engine.
  static constexpr size_t kMaxActiveHintBytes = 4u << 20;
  std::string active_hint_;
  uint32_t active_hint_count_ = 0;
  bool active_hint_complete_ = true;
  std::string append_buffer_;    // reused encoding buffer of AppendBatch
  bool closed_ = false;
  std::optional<Error> failed_;  // a failed sync or append: writes refused
  int64_t last_sync_ms_ = 0;
  std::optional<uint64_t> last_tick_live_bytes_;  // Tick's merge deferral
  io::TimerId interval_timer_ = 0;
  std::vector<std::function<void(Status)>> group_;  // waiting for FlushGroup
  bool group_flush_posted_ = false;
  std::unique_ptr<MergeJob> merge_;  // an incremental merge in progress
  io::TimerId merge_timer_ = 0;
  std::shared_ptr<BitcaskEngine*> self_;  // posted work checks it is alive
};

}  // namespace estuary::persistence::bitcask
