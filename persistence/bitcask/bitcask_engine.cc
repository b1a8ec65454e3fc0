// BitcaskEngine: writes, reads, syncs and group commit. Recovery is in
// bitcask_recovery.cc, merge in bitcask_merge.cc.
#include "persistence/bitcask/bitcask_engine.h"

#include "persistence/bitcask/merge_job.h"

#include <cstdio>
#include <limits>

namespace estuary::persistence::bitcask {
namespace {

constexpr uint64_t kMaxFileSize = std::numeric_limits<uint32_t>::max();

}  // namespace

BitcaskEngine::BitcaskEngine(io::FileSystem& fs, std::string dir, BitcaskOptions options)
    : fs_(fs), dir_(std::move(dir)), options_(std::move(options)),
      self_(std::make_shared<BitcaskEngine*>(this)) {
  if (options_.max_file_size > kMaxFileSize) options_.max_file_size = kMaxFileSize;
}

BitcaskEngine::~BitcaskEngine() {
  if (!closed_) (void)Close();
}

int64_t BitcaskEngine::NowWallMs() const {
  return options_.clock ? options_.clock->WallMs() : io::SystemClock::Instance().WallMs();
}

void BitcaskEngine::Log(const std::string& message) const {
  if (options_.log) {
    options_.log(message);
  } else {
    std::fprintf(stderr, "bitcask %s: %s\n", dir_.c_str(), message.c_str());
  }
}

Status BitcaskEngine::Fault(const io::FsError& error) {
  Errc code = error.code == io::FsErrc::kNoSpace ? Errc::kNoSpace : Errc::kIo;
  return Fail(code, error.message);
}

Status BitcaskEngine::CheckWritable() const {
  if (closed_) return Fail(Errc::kClosed, "engine closed");
  if (failed_) return MakeError(*failed_);
  return {};
}

Status BitcaskEngine::Write(const WriteBatch& batch) {
  if (auto s = AppendBatch(batch); !s) return s;
  if (options_.sync == SyncPolicy::kAlways) return SyncActive();
  return {};
}

Status BitcaskEngine::AppendBatch(const WriteBatch& batch) {
  if (auto s = CheckWritable(); !s) return s;
  if (batch.empty()) return {};
  bool has_header = batch.size() > 1;
  uint64_t first_seq = next_seq_;
  int64_t now = NowWallMs();
  std::string members;
  uint64_t seq = first_seq;
  for (const WriteBatch::Op& op : batch.ops()) {
    if (op.key.size() > kMaxFileSize || op.value.size() > kMaxFileSize) {
      return Fail(Errc::kInvalidArgument, "key or value too large");
    }
    AppendRecord(&members, seq++, now, op.is_delete ? kTombstone : 0, op.key,
                 op.is_delete ? std::string_view() : std::string_view(op.value));
  }
  std::string bytes;
  if (has_header) {
    AppendBatchHeader(&bytes, first_seq, now, static_cast<uint32_t>(batch.size()),
                      members.size());
  }
  bytes += members;
  // A batch larger than max_file_size gets a file of its own; offsets are
  // 32 bits, so no file may pass 4 GiB.
  if (bytes.size() > kMaxFileSize) {
    return Fail(Errc::kInvalidArgument, "batch larger than 4 GiB");
  }
  return AppendEncoded(bytes, batch, first_seq);
}

Status BitcaskEngine::AppendEncoded(const std::string& bytes, const WriteBatch& batch,
                                    uint64_t first_seq) {
  if (files_[active_id_].size > 0 &&
      files_[active_id_].size + bytes.size() > options_.max_file_size) {
    if (auto s = Rotate(); !s) return s;
  }
  DataFile& active = files_[active_id_];
  uint64_t offset = active.size;
  if (auto appended = active.file->Append(bytes); !appended) {
    // A partial append must not stay behind the next record: cut it off.
    if (auto cut = active.file->Truncate(offset); !cut) {
      failed_ = Error{Errc::kIo, "append failed and could not be undone: " + cut.error().message};
    }
    return Fault(appended.error());
  }
  active.size += bytes.size();
  dirty_ = true;
  bool has_header = batch.size() > 1;
  uint64_t first_offset = offset + (has_header ? RecordSize(0, kBatchHeaderValueSize) : 0);
  ApplyToKeyDir(batch, first_seq, first_offset, has_header);
  next_seq_ = first_seq + batch.size();
  return {};
}

void BitcaskEngine::ApplyToKeyDir(const WriteBatch& batch, uint64_t first_seq,
                                  uint64_t first_offset, bool /*has_header*/) {
  uint64_t offset = first_offset;
  uint64_t seq = first_seq;
  for (const WriteBatch::Op& op : batch.ops()) {
    uint32_t value_size = op.is_delete ? 0 : static_cast<uint32_t>(op.value.size());
    if (op.is_delete) {
      auto it = keydir_.find(op.key);
      if (it != keydir_.end()) {
        files_[it->second.file_id].live_bytes -= RecordSize(op.key.size(), it->second.value_size);
        keydir_.erase(it);
      }
    } else {
      AddRecordToKeyDir(op.key, KeyEntry{active_id_, static_cast<uint32_t>(offset), value_size,
                                         seq});
    }
    offset += RecordSize(op.key.size(), value_size);
    ++seq;
  }
}

void BitcaskEngine::AddRecordToKeyDir(const std::string& key, KeyEntry entry) {
  auto [it, inserted] = keydir_.try_emplace(key, entry);
  if (!inserted) {
    files_[it->second.file_id].live_bytes -= RecordSize(key.size(), it->second.value_size);
    it->second = entry;
  }
  files_[entry.file_id].live_bytes += RecordSize(key.size(), entry.value_size);
}

void BitcaskEngine::WriteAsync(const WriteBatch& batch, std::function<void(Status)> done) {
  if (options_.sync != SyncPolicy::kAlways || options_.loop == nullptr) {
    done(Write(batch));
    return;
  }
  // Group commit: append now, share one fdatasync at the end of this loop
  // iteration with every other write that arrives before it.
  Status appended = AppendBatch(batch);
  if (!appended) {
    done(appended);
    return;
  }
  group_.push_back(std::move(done));
  if (!group_flush_posted_) {
    group_flush_posted_ = true;
    std::weak_ptr<BitcaskEngine*> weak = self_;
    options_.loop->Post([weak] {
      if (auto self = weak.lock()) (*self)->FlushGroup();
    });
  }
}

void BitcaskEngine::FlushGroup() {
  group_flush_posted_ = false;
  if (group_.empty()) return;
  Status status = closed_ ? Fail(Errc::kClosed, "engine closed") : SyncActive();
  std::vector<std::function<void(Status)>> waiting;
  waiting.swap(group_);
  for (auto& done : waiting) done(status);
}

Status BitcaskEngine::SyncActive() {
  if (failed_) return MakeError(*failed_);
  if (!dirty_) return {};
  if (auto synced = files_[active_id_].file->Sync(); !synced) {
    // After a failed fdatasync the page cache state is unknown (the kernel
    // may have dropped the dirty pages): refuse further writes.
    failed_ = Error{Errc::kIo, "fdatasync failed: " + synced.error().message};
    return MakeError(*failed_);
  }
  ++syncs_;
  dirty_ = false;
  return {};
}

Status BitcaskEngine::Sync() {
  if (closed_) return Fail(Errc::kClosed, "engine closed");
  return SyncActive();
}

Result<std::optional<std::string>> BitcaskEngine::Get(std::string_view key) {
  if (closed_) return Fail(Errc::kClosed, "engine closed");
  auto it = keydir_.find(key);
  if (it == keydir_.end()) return std::optional<std::string>();
  auto value = ReadValue(it->first, it->second);
  if (!value) return MakeError(value.error());
  return std::optional<std::string>(std::move(*value));
}

Result<std::string> BitcaskEngine::ReadValue(const std::string& key, const KeyEntry& entry) {
  auto file = files_.find(entry.file_id);
  if (file == files_.end()) return Fail(Errc::kIo, "missing data file");
  auto bytes = file->second.file->ReadAt(entry.offset, RecordSize(key.size(), entry.value_size));
  if (!bytes) return MakeError(Error{Errc::kIo, bytes.error().message});
  DecodedRecord record = DecodeRecord(*bytes, 0);
  if (record.status != DecodeStatus::kOk || record.key != key) {
    return Fail(Errc::kCorruption, "bad record for a key in " +
                                       PathOf(DataFileName(entry.file_id)) + " at offset " +
                                       std::to_string(entry.offset));
  }
  return std::string(record.value);
}

Status BitcaskEngine::Scan(std::string_view prefix, std::string_view start,
                           const ScanVisitor& visit) {
  if (closed_) return Fail(Errc::kClosed, "engine closed");
  std::string_view from = start < prefix ? prefix : start;
  for (auto it = keydir_.lower_bound(from); it != keydir_.end(); ++it) {
    if (std::string_view(it->first).substr(0, prefix.size()) != prefix) break;
    auto value = ReadValue(it->first, it->second);
    if (!value) return MakeError(value.error());
    if (!visit(it->first, *value)) break;
  }
  return {};
}

Status BitcaskEngine::Tick(int64_t now_ms) {
  if (closed_) return Fail(Errc::kClosed, "engine closed");
  if (options_.sync == SyncPolicy::kInterval &&
      now_ms - last_sync_ms_ >= options_.sync_interval_ms) {
    last_sync_ms_ = now_ms;
    if (auto s = SyncActive(); !s) return s;
  }
  if (!merge_ && options_.merge_dead_ratio > 0) {
    Stats stats = GetStats();
    uint64_t total = stats.live_bytes + stats.dead_bytes;
    if (stats.dead_bytes >= options_.merge_min_dead_bytes && total > 0 &&
        static_cast<double>(stats.dead_bytes) >= options_.merge_dead_ratio * total) {
      if (auto s = StartMerge(); !s) return s;
    }
  }
  // With a Loop the merge advances on its own timer.
  if (merge_ && options_.loop == nullptr) return MergeStep(options_.merge_step_bytes);
  return {};
}

void BitcaskEngine::ArmIntervalTimer() {
  if (options_.loop == nullptr || options_.sync != SyncPolicy::kInterval) return;
  std::weak_ptr<BitcaskEngine*> weak = self_;
  interval_timer_ = options_.loop->AddTimer(options_.sync_interval_ms, [weak] {
    auto self = weak.lock();
    if (!self) return;
    BitcaskEngine* engine = *self;
    if (auto s = engine->Tick(engine->options_.loop->NowMs()); !s) {
      engine->Log("interval tick failed: " + s.error().message);
    }
    engine->ArmIntervalTimer();
  });
}

Stats BitcaskEngine::GetStats() const {
  Stats stats;
  stats.live_keys = keydir_.size();
  uint64_t total = 0;
  for (const auto& [id, file] : files_) {
    total += file.size;
    stats.live_bytes += file.live_bytes;
  }
  stats.dead_bytes = total - stats.live_bytes;
  stats.files = files_.size();
  stats.syncs = syncs_;
  return stats;
}

Status BitcaskEngine::Rotate() {
  if (auto s = CheckWritable(); !s) return s;
  if (files_[active_id_].size == 0) return {};
  // Immutable files are always synced whole, so a torn tail can only be in
  // the newest file; the hint then lets the next start skip the scan.
  dirty_ = true;
  if (auto s = SyncActive(); !s) return s;
  if (auto s = WriteHint(active_id_, ""); !s) Log("hint write failed: " + s.error().message);
  return StartActiveFile();
}

Status BitcaskEngine::Close() {
  if (closed_) return Fail(Errc::kClosed, "engine closed");
  if (options_.loop != nullptr) {
    if (interval_timer_ != 0) options_.loop->CancelTimer(interval_timer_);
    if (merge_timer_ != 0) options_.loop->CancelTimer(merge_timer_);
  }
  AbandonMerge("engine closing");
  FlushGroup();
  Status status = SyncActive();
  if (status && files_.count(active_id_) && files_[active_id_].size > 0) {
    if (auto s = WriteHint(active_id_, ""); !s) Log("hint write failed: " + s.error().message);
  }
  closed_ = true;
  files_.clear();
  keydir_.clear();
  self_.reset();
  return status;
}

}  // namespace estuary::persistence::bitcask
