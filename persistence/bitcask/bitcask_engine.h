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
// - A merge rewrites the live records of immutable files into new files
//   and deletes the old ones; a crash at any point loses nothing (the merge
//   commits by renaming a manifest). It runs incrementally, at most
//   merge_step_bytes per step, between writes (StartMerge/MergeStep);
//   Merge() runs one over every immutable file to the end at once.
// - Maintenance (the Loop's timer, or Tick() without a Loop) drops files
//   with nothing live and merges the files past merge_dead_ratio that are
//   not being drained; unlinks and a merge's last renames run on the
//   FileJanitor (its own thread with background_file_work).
// - With rotate_ahead the janitor also prepares the next data file and
//   trims and hints a rotated one, so rotation on the writer's path is at
//   most one fdatasync of the old file's unsynced records.
// - Group commit: under kAlways, WriteAsync appends at once and shares one
//   fdatasync among all writes of the current loop iteration (a Post on the
//   injected Loop); Write() syncs before it returns.
//
// Threading: one owner thread (StorageEngine), plus the janitor's thread
// with background_file_work (file-system calls only). The FileSystem, Loop
// and Clock must outlive the engine.
#include <atomic>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "io/clock.h"
#include "io/file_system.h"
#include "io/loop.h"
#include "persistence/bitcask/file_janitor.h"
#include "persistence/bitcask/format.h"
#include "persistence/bitcask/key_dir_key.h"
#include "persistence/storage_engine.h"

namespace estuary::persistence::bitcask {

struct BitcaskOptions {
  SyncPolicy sync = SyncPolicy::kAlways;
  int64_t sync_interval_ms = 100;
  uint64_t max_file_size = 64ull << 20;  // capped below 4 GiB (u32 offsets)
  // Maintenance merges the immutable files whose own dead bytes reach this
  // share of the file (tombstones it must keep count as live), once their
  // dead bytes add up to merge_min_dead_bytes. A file whose live bytes fell
  // since the last maintenance pass (acks consuming a queue) waits: it is
  // on its way to holding nothing live, when it is deleted without a copy.
  // A ratio <= 0 turns automatic merging and dropping off.
  double merge_dead_ratio = 0.5;
  uint64_t merge_min_dead_bytes = 16ull << 20;
  // With a Loop, maintenance (dropping dead files, choosing and starting
  // merges) runs on a timer this long after a write makes bytes in an
  // immutable file dead, never inside Write or Tick; without one, Tick runs
  // it.
  int64_t maintenance_delay_ms = 100;
  // Unlinking dropped files and finishing a committed merge on disk (renames,
  // removals, directory syncs) on a thread of the engine's own instead of the
  // owner's. The FileSystem must allow calls from that thread:
  // PosixFileSystem does, SimFileSystem does not.
  bool background_file_work = false;
  // Rotation off the writer's path: the janitor creates the next data file
  // ahead (under kAlways zero-filled and synced, with its directory entry)
  // and finishes a rotated file (trims its zero-filled tail, writes its
  // hint) after the writer has moved on. Records not yet synced (under
  // none/interval: since the last write-behind) are still synced by the
  // writer before it moves on, so a crash leaves a prefix. With an inline
  // janitor (no background_file_work) the same jobs run at once.
  bool rotate_ahead = false;
  // Tests: file jobs wait in the janitor's queue until WaitForFileWork(),
  // Close() or a merge's commit runs them on the owner's thread, so a test
  // can crash a SimFileSystem with a rotation's jobs still pending.
  bool defer_file_work_for_tests = false;
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
  // Encoded straight from `key` and `value` (no WriteBatch copy).
  Status Put(std::string_view key, std::string_view value) override;
  Status Delete(std::string_view key) override;
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
  // Returns once the janitor has done every file job handed to it so far
  // (dropped files unlinked, a merge's renames): for tests and the bench's
  // disk figures. Its failure, if one happened.
  Status WaitForFileWork();
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
    uint64_t min_seq = UINT64_MAX;   // its oldest record, put or tombstone
    uint64_t max_tombstone_seq = 0;  // its newest tombstone; 0: none
    uint64_t tombstone_bytes = 0;
    uint64_t live_at_last_pass = 0;  // maintenance: is it being drained?
  };

  // Ordered bytewise; keys up to 28 bytes stored in the node (key_dir_key.h).
  using KeyDir = std::map<KeyDirKey, KeyEntry, KeyDirLess>;
  struct MergeOutput;
  struct MergeMove;
  struct MergeJob;

  BitcaskEngine(io::FileSystem& fs, std::string dir, BitcaskOptions options);

  // Merge (bitcask_merge.cc).
  void ScheduleMergeStep();
  void AbandonMerge(const std::string& why);
  Status CopyLiveRecords(MergeJob& job, uint64_t byte_budget);
  Status CopyRecord(MergeJob& job, std::string_view key, const KeyEntry& entry,
                    const DecodedRecord& record, const std::string& bytes);
  Status FlushMergeOutput(MergeOutput& out);
  Status SealMergeOutputs(MergeJob& job);
  Status CommitMerge(MergeJob& job);
  // Deletes immutable files holding no live record whose tombstones no
  // other file needs (every record superseded): reclaimed without copying.
  Status DropDeadFiles();
  // Drops dead files and starts a merge of the files past the dead ratio.
  Status Maintain();
  void ScheduleMaintenance();
  Status StartMergeOf(std::vector<uint32_t> ids);
  // The oldest sequence number in any file not in `excluded`: a
  // tombstone older than it deletes nothing elsewhere and may be dropped.
  uint64_t OldestSeqOutside(const std::set<uint32_t>& excluded) const;
  Status CopyTombstones(MergeJob& job);
  Result<MergeOutput*> OutputFor(MergeJob& job, uint64_t record_size);
  // A file's entries from its hint, or by scanning it when the hint is bad.
  Result<std::vector<RecordEntry>> ReadEntries(uint32_t id);
  // A janitor failure makes the engine refuse writes (reopen repairs).
  Status CheckJanitor();

  // Recovery (bitcask_recovery.cc).
  Status Recover();
  Status FinishCommittedMerge();
  static void NoteEntries(DataFile& file, const std::vector<RecordEntry>& entries);
  Status LoadFile(uint32_t id);
  void ApplyLoaded(uint32_t id, std::vector<RecordEntry>& entries);  // moves the keys out
  Status WriteHint(uint32_t id, const std::string& suffix);  // rescans the data file
  Status WriteHintBytes(uint32_t id, const std::string& suffix, const std::string& hint);
  Status WriteActiveHint();
  Status StartActiveFile();

  // Writing (bitcask_engine.cc).
  Status CheckWritable() const;
  Status AppendBatch(const WriteBatch& batch);  // Write without the sync
  // Put or Delete of one record, without the sync.
  Status AppendOne(std::string_view key, std::string_view value, bool is_delete);
  // Writes encoded records at the end of the active file (rotating first when
  // full); returns where they start.
  Result<uint64_t> WriteEncoded(const std::string& bytes, uint64_t first_seq);
  // Updates the key directory and the active file's hint for one appended
  // record.
  void ApplyRecord(std::string_view key, uint32_t value_size, bool is_delete, uint64_t seq,
                   uint64_t offset, int64_t timestamp_ms);
  void AddRecordToKeyDir(std::string_view key, KeyEntry entry);
  // Inserts a new key; keys arriving in ascending order (queues) take the
  // O(1) end-hinted path instead of a tree search.
  std::pair<KeyDir::iterator, bool> EmplaceKey(std::string_view key, const KeyEntry& entry) {
    auto at = keydir_.empty() || std::prev(keydir_.end())->first.view() < key
                  ? keydir_.end()
                  : keydir_.lower_bound(key);
    if (at != keydir_.end() && at->first.view() == key) return {at, false};
    return {keydir_.emplace_hint(at, std::piecewise_construct, std::forward_as_tuple(key),
                                 std::forward_as_tuple(entry)),
            true};
  }
  void WriteBehind(uint64_t appended);
  // rotate_ahead (bitcask_rotation.cc): the next file, made by the janitor.
  struct PreparedFile {
    uint32_t id = 0;
    bool preallocated = false;  // opened for WriteAt and zero-filled
    // Set by the janitor's job; read by the owner once `done` is true.
    std::unique_ptr<io::File> file;
    uint64_t allocated = 0;
    std::atomic<bool> done{false};
  };
  Status RotateAhead();
  void PrepareNextFile();
  // The prepared file if its job has finished; else nullptr (and the
  // unfinished one is discarded behind its job).
  std::shared_ptr<PreparedFile> TakePreparedFile();
  void DiscardPreparedFile();
  // Writes an encoded batch at the end of the active file's data.
  Status WriteActive(DataFile& active, const std::string& bytes);
  // Cuts the active file's zero-filled tail (before rotation and Close).
  Status TrimActive();
  Status SyncActive();
  void FlushGroup();
  void ArmIntervalTimer();
  Result<std::string> ReadValue(std::string_view key, const KeyEntry& entry);
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
  std::unique_ptr<FileJanitor> janitor_;
  // Write-behind (none/interval with background_file_work): bytes appended
  // since the janitor was last asked to sync the active file, so rotation's
  // sync of a 64 MiB file finds little left to flush.
  static constexpr uint64_t kWriteBehindBytes = 1u << 20;
  static constexpr uint64_t kWriteBehindTailBytes = 256u << 10;
  uint64_t write_behind_bytes_ = 0;
  io::TimerId maintenance_timer_ = 0;
  bool maintenance_wanted_ = false;  // a write made bytes of an immutable file dead
  io::TimerId interval_timer_ = 0;
  std::vector<std::function<void(Status)>> group_;  // waiting for FlushGroup
  bool group_flush_posted_ = false;
  std::shared_ptr<PreparedFile> prepared_;  // rotate_ahead: the next file
  std::unique_ptr<MergeJob> merge_;  // an incremental merge in progress
  io::TimerId merge_timer_ = 0;
  std::shared_ptr<BitcaskEngine*> self_;  // posted work checks it is alive
};

}  // namespace estuary::persistence::bitcask
