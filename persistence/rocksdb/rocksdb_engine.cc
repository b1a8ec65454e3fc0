#include "persistence/rocksdb/rocksdb_engine.h"

#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/metadata.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/table_properties_collectors.h>
#include <rocksdb/write_batch.h>

#include <cstdio>

namespace estuary::persistence {
namespace {

Unexpected<Error> FromRocks(const rocksdb::Status& status) {
  Errc code = Errc::kIo;
  if (status.IsNoSpace()) code = Errc::kNoSpace;
  if (status.IsCorruption()) code = Errc::kCorruption;
  if (status.IsInvalidArgument()) code = Errc::kInvalidArgument;
  return Fail(code, status.ToString());
}

rocksdb::Slice ToSlice(std::string_view bytes) {
  return rocksdb::Slice(bytes.data(), bytes.size());
}

// The smallest key above every key starting with `prefix`: drop trailing
// 0xff bytes and increment the last byte. Empty when there is none (the
// prefix is empty or all 0xff): the scan is then unbounded above.
std::string PrefixSuccessor(std::string_view prefix) {
  std::string bound(prefix);
  while (!bound.empty() && static_cast<unsigned char>(bound.back()) == 0xff) bound.pop_back();
  if (!bound.empty())
    bound.back() = static_cast<char>(static_cast<unsigned char>(bound.back()) + 1);
  return bound;
}

}  // namespace

rocksdb::Options QueueWorkloadOptions(const RocksDbOptions& options) {
  rocksdb::Options o;
  o.create_if_missing = true;
  if (options.env != nullptr) o.env = options.env;
  // Point-in-time recovery: replay stops at the first bad WAL record, which
  // is the "prefix of acknowledged writes" contract.
  o.wal_recovery_mode = rocksdb::WALRecoveryMode::kPointInTimeRecovery;
  o.manual_wal_flush = false;  // each Write reaches the kernel: kill -9 safe
  // No WAL recycling (recycle_log_file_num): RocksDB 7.8 silently turns it
  // off under point-in-time recovery (a known hole in recovered data).
  if (options.recycle_log_file_num > 0) {
    o.recycle_log_file_num = options.recycle_log_file_num;
    o.wal_recovery_mode = rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;
  }
  o.write_buffer_size = options.write_buffer_size;
  o.max_write_buffer_number = 3;
  o.max_background_jobs = 2;
  o.level_compaction_dynamic_level_bytes = true;
  o.compression = rocksdb::kLZ4Compression;
  o.bottommost_compression = rocksdb::kZSTD;
  o.table_properties_collector_factories.push_back(rocksdb::NewCompactOnDeletionCollectorFactory(
      options.deletion_window, options.deletion_trigger, options.deletion_ratio));
  rocksdb::BlockBasedTableOptions table;
  // Bloom filters make Gets of acked (deleted) or unknown keys skip files.
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  return o;
}

Result<std::unique_ptr<RocksDbEngine>> RocksDbEngine::Open(std::string dir,
                                                           RocksDbOptions options) {
  rocksdb::DB* raw = nullptr;
  rocksdb::Status status = rocksdb::DB::Open(QueueWorkloadOptions(options), dir, &raw);
  if (!status.ok()) return FromRocks(status);
  std::unique_ptr<rocksdb::DB> db(raw);
  std::unique_ptr<RocksDbEngine> engine(
      new RocksDbEngine(std::move(dir), std::move(options), std::move(db)));
  engine->ArmIntervalTimer();
  return engine;
}

RocksDbEngine::RocksDbEngine(std::string dir, RocksDbOptions options,
                             std::unique_ptr<rocksdb::DB> db)
    : dir_(std::move(dir)),
      options_(std::move(options)),
      db_(std::move(db)),
      self_(std::make_shared<RocksDbEngine*>(this)) {}

RocksDbEngine::~RocksDbEngine() {
  if (!closed_) (void)Close();
}

void RocksDbEngine::Log(const std::string& message) const {
  if (options_.log) {
    options_.log(message);
  } else {
    std::fprintf(stderr, "rocksdb %s: %s\n", dir_.c_str(), message.c_str());
  }
}

Status RocksDbEngine::CheckWritable() const {
  if (closed_) return Fail(Errc::kClosed, "engine closed");
  if (failed_) return MakeError(*failed_);
  return {};
}

Status RocksDbEngine::WriteToDb(const WriteBatch& batch, bool sync) {
  if (auto s = CheckWritable(); !s) return s;
  if (batch.empty()) return {};
  rocksdb::WriteBatch rocks_batch;
  for (const WriteBatch::Op& op : batch.ops()) {
    rocksdb::Status s = op.is_delete ? rocks_batch.Delete(ToSlice(op.key))
                                     : rocks_batch.Put(ToSlice(op.key), ToSlice(op.value));
    if (!s.ok()) return FromRocks(s);
  }
  rocksdb::WriteOptions write_options;
  write_options.sync = sync;
  rocksdb::Status status = db_->Write(write_options, &rocks_batch);
  if (!status.ok()) {
    // A failed synced write leaves the WAL's state unknown, as a failed
    // fdatasync does for Bitcask: refuse further writes until reopened.
    if (sync) failed_ = Error{Errc::kIo, "synced WAL write failed: " + status.ToString()};
    return FromRocks(status);
  }
  if (sync) {
    ++syncs_;
  } else {
    dirty_ = true;
  }
  return {};
}

Status RocksDbEngine::Write(const WriteBatch& batch) {
  return WriteToDb(batch, options_.sync == SyncPolicy::kAlways);
}

void RocksDbEngine::WriteAsync(const WriteBatch& batch, std::function<void(Status)> done) {
  if (options_.sync != SyncPolicy::kAlways || options_.loop == nullptr) {
    done(Write(batch));
    return;
  }
  // Group commit: write now (readable at once), share one WAL sync at the
  // end of this loop iteration with every write that arrives before it.
  Status written = WriteToDb(batch, false);
  if (!written) {
    done(written);
    return;
  }
  group_.push_back(std::move(done));
  if (!group_flush_posted_) {
    group_flush_posted_ = true;
    std::weak_ptr<RocksDbEngine*> weak = self_;
    options_.loop->Post([weak] {
      if (auto self = weak.lock()) (*self)->FlushGroup();
    });
  }
}

void RocksDbEngine::FlushGroup() {
  group_flush_posted_ = false;
  if (group_.empty()) return;
  Status status = closed_ ? Fail(Errc::kClosed, "engine closed") : SyncWal();
  std::vector<std::function<void(Status)>> waiting;
  waiting.swap(group_);
  for (auto& done : waiting) done(status);
}

Status RocksDbEngine::SyncWal() {
  if (failed_) return MakeError(*failed_);
  if (!dirty_) return {};
  rocksdb::Status status = db_->FlushWAL(/*sync=*/true);
  if (!status.ok()) {
    failed_ = Error{Errc::kIo, "WAL sync failed: " + status.ToString()};
    return MakeError(*failed_);
  }
  ++syncs_;
  dirty_ = false;
  return {};
}

Status RocksDbEngine::Sync() {
  if (closed_) return Fail(Errc::kClosed, "engine closed");
  return SyncWal();
}

Result<std::optional<std::string>> RocksDbEngine::Get(std::string_view key) {
  if (closed_) return Fail(Errc::kClosed, "engine closed");
  std::string value;
  rocksdb::Status status = db_->Get(rocksdb::ReadOptions(), ToSlice(key), &value);
  if (status.IsNotFound()) return std::optional<std::string>();
  if (!status.ok()) return FromRocks(status);
  return std::optional<std::string>(std::move(value));
}

Status RocksDbEngine::Scan(std::string_view prefix, std::string_view start,
                           const ScanVisitor& visit) {
  if (closed_) return Fail(Errc::kClosed, "engine closed");
  std::string_view from = start < prefix ? prefix : start;
  // The upper bound lets the iterator stop at the prefix's end without
  // stepping over the tombstones beyond it; it must outlive the iterator.
  std::string bound = PrefixSuccessor(prefix);
  rocksdb::Slice bound_slice(bound);
  rocksdb::ReadOptions read_options;
  if (!bound.empty()) read_options.iterate_upper_bound = &bound_slice;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read_options));
  for (it->Seek(ToSlice(from)); it->Valid(); it->Next()) {
    std::string_view key(it->key().data(), it->key().size());
    if (key.substr(0, prefix.size()) != prefix) break;
    if (!visit(key, std::string_view(it->value().data(), it->value().size()))) break;
  }
  if (!it->status().ok()) return FromRocks(it->status());
  return {};
}

Status RocksDbEngine::Tick(int64_t now_ms) {
  if (closed_) return Fail(Errc::kClosed, "engine closed");
  if (options_.sync == SyncPolicy::kInterval &&
      now_ms - last_sync_ms_ >= options_.sync_interval_ms) {
    last_sync_ms_ = now_ms;
    return SyncWal();
  }
  return {};
}

void RocksDbEngine::ArmIntervalTimer() {
  if (options_.loop == nullptr || options_.sync != SyncPolicy::kInterval) return;
  std::weak_ptr<RocksDbEngine*> weak = self_;
  interval_timer_ = options_.loop->AddTimer(options_.sync_interval_ms, [weak] {
    auto self = weak.lock();
    if (!self) return;
    RocksDbEngine* engine = *self;
    if (auto s = engine->Tick(engine->options_.loop->NowMs()); !s) {
      engine->Log("interval tick failed: " + s.error().message);
    }
    engine->ArmIntervalTimer();
  });
}

uint64_t RocksDbEngine::IntProperty(const char* name) const {
  uint64_t value = 0;
  if (!db_->GetIntProperty(name, &value)) return 0;
  return value;
}

Stats RocksDbEngine::GetStats() const {
  Stats stats;
  if (closed_) return stats;
  uint64_t live_sst = IntProperty("rocksdb.estimate-live-data-size");
  uint64_t total_sst = IntProperty("rocksdb.total-sst-files-size");
  stats.live_keys = IntProperty("rocksdb.estimate-num-keys");
  stats.live_bytes = live_sst + IntProperty("rocksdb.cur-size-all-mem-tables");
  stats.dead_bytes = total_sst > live_sst ? total_sst - live_sst : 0;
  rocksdb::ColumnFamilyMetaData metadata;
  db_->GetColumnFamilyMetaData(&metadata);
  stats.files = metadata.file_count;
  stats.syncs = syncs_;
  return stats;
}

Status RocksDbEngine::CompactAll() {
  if (auto s = CheckWritable(); !s) return s;
  rocksdb::CompactRangeOptions compact;
  compact.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  rocksdb::Status status = db_->CompactRange(compact, nullptr, nullptr);
  if (!status.ok()) return FromRocks(status);
  return {};
}

Status RocksDbEngine::Close() {
  if (closed_) return Fail(Errc::kClosed, "engine closed");
  if (options_.loop != nullptr && interval_timer_ != 0) options_.loop->CancelTimer(interval_timer_);
  FlushGroup();
  Status status = SyncWal();
  rocksdb::Status closed = db_->Close();
  if (status && !closed.ok()) status = FromRocks(closed);
  closed_ = true;
  db_.reset();
  self_.reset();
  return status;
}

}  // namespace estuary::persistence
