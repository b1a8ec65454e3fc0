#pragma once
// RocksDbEngine: a StorageEngine on RocksDB (Debian librocksdb-dev 7.8),
// tuned for the queue pattern (append big-endian sequence keys, read in
// order, delete after ack). The options and why are in docs/storage.md.
//
// Durability maps onto RocksDB's write-ahead log (WAL):
//   kAlways:   Write() uses WriteOptions::sync (the WAL is fdatasync'ed
//              before it returns). With a Loop, WriteAsync writes at once
//              without sync and shares one FlushWAL(sync) among all writes
//              of the loop iteration (group commit on one thread; RocksDB's
//              own group commit needs concurrent writer threads).
//   kInterval: unsynced WAL writes (they reach the kernel at once and
//              survive kill -9), FlushWAL(sync) every sync_interval_ms from
//              the Loop's timer or from Tick(now).
//   kNone:     unsynced WAL writes; synced on Sync() and Close().
// Recovery is WALRecoveryMode::kPointInTimeRecovery: replay stops at the
// first bad WAL record, so a crash leaves a prefix of the writes, and a
// WriteBatch (one WAL record) survives whole or not at all.
//
// RocksDB does its own file IO through its Env, not through io::FileSystem:
// the SimFileSystem crash and fault tests do not apply to this engine (it is
// tested on a real directory, and by kill -9 of a real process).
//
// Stats are RocksDB's estimates, not exact counts: live_keys is
// rocksdb.estimate-num-keys (entries minus twice the deletes, so off after
// overwrites or deletes of missing keys until compaction), live_bytes is
// rocksdb.estimate-live-data-size plus the memtables' size, dead_bytes is
// total-sst-files-size minus estimate-live-data-size, files counts SST files.
//
// Threading: one owner thread, as StorageEngine; RocksDB runs flushes and
// compactions on its own background threads. The Loop must outlive the
// engine.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "io/loop.h"
#include "persistence/storage_engine.h"

namespace rocksdb {
class DB;
class Env;
struct Options;
class Status;
}  // namespace rocksdb

// In estuary::persistence itself: a nested `rocksdb` namespace would hide
// ::rocksdb inside the engine.
namespace estuary::persistence {

struct RocksDbOptions {
  SyncPolicy sync = SyncPolicy::kAlways;
  int64_t sync_interval_ms = 100;
  // Memtable size: a queue whose messages are acked within one memtable's
  // worth of writes never reaches an SST file.
  uint64_t write_buffer_size = 64ull << 20;
  // An SST file is marked for compaction when any window of this many
  // entries holds at least deletion_trigger deletes (or the whole file's
  // deletes reach deletion_ratio), so acked ranges of tombstones are
  // compacted away instead of slowing every scan from the queue head.
  size_t deletion_window = 1024;
  size_t deletion_trigger = 512;
  double deletion_ratio = 0.5;
  // Measurement only (the storage bench's --rocksdb-recycle-logs): > 0 sets
  // recycle_log_file_num, reusing old WAL files so a sync under `always`
  // overwrites allocated blocks, as Bitcask's preallocation does. RocksDB
  // turns recycling off under kPointInTimeRecovery, so this also switches
  // to kTolerateCorruptedTailRecords, which is not the engine contract.
  size_t recycle_log_file_num = 0;
  // Optional: drives interval syncs (a timer) and group commit (Post).
  io::Loop* loop = nullptr;
  // Tests: RocksDB's file IO goes through this Env (e.g. one made by
  // rocksdb::NewCompositeEnv over PowerLossFileSystem); null = the default.
  // It must outlive the engine.
  ::rocksdb::Env* env = nullptr;
  // Engine messages; stderr when empty. RocksDB itself logs to <dir>/LOG.
  std::function<void(const std::string&)> log;
};

// The rocksdb::Options this engine opens with (documented in docs/storage.md).
::rocksdb::Options QueueWorkloadOptions(const RocksDbOptions& options);

class RocksDbEngine final : public StorageEngine {
 public:
  static Result<std::unique_ptr<RocksDbEngine>> Open(std::string dir, RocksDbOptions options);
  ~RocksDbEngine() override;
  RocksDbEngine(const RocksDbEngine&) = delete;
  RocksDbEngine& operator=(const RocksDbEngine&) = delete;

  Status Write(const WriteBatch& batch) override;
  void WriteAsync(const WriteBatch& batch, std::function<void(Status)> done) override;
  Result<std::optional<std::string>> Get(std::string_view key) override;
  Status Scan(std::string_view prefix, std::string_view start, const ScanVisitor& visit) override;
  using StorageEngine::Scan;
  Status Sync() override;
  Status Tick(int64_t now_ms) override;
  Stats GetStats() const override;
  Status Close() override;

  // Compacts the whole key range now (by command; the bench's "space after
  // compaction"). Background compaction otherwise runs on its own.
  Status CompactAll();

 private:
  RocksDbEngine(std::string dir, RocksDbOptions options, std::unique_ptr<::rocksdb::DB> db);

  Status CheckWritable() const;
  Status WriteToDb(const WriteBatch& batch, bool sync);
  Status SyncWal();
  void FlushGroup();
  void ArmIntervalTimer();
  uint64_t IntProperty(const char* name) const;
  void Log(const std::string& message) const;

  const std::string dir_;
  RocksDbOptions options_;
  std::unique_ptr<::rocksdb::DB> db_;
  uint64_t syncs_ = 0;
  bool dirty_ = false;  // WAL bytes written since the last sync
  bool closed_ = false;
  std::optional<Error> failed_;  // a failed WAL sync: writes refused
  int64_t last_sync_ms_ = 0;
  io::TimerId interval_timer_ = 0;
  std::vector<std::function<void(Status)>> group_;  // waiting for FlushGroup
  bool group_flush_posted_ = false;
  std::shared_ptr<RocksDbEngine*> self_;  // posted work checks it is alive
};

}  // namespace estuary::persistence
