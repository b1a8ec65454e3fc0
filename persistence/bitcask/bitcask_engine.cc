// BitcaskEngine: writes, reads, syncs and group commit. Recovery is in
// bitcask_recovery.cc, merge in bitcask_merge.cc.
#include "persistence/bitcask/bitcask_engine.h"

#include "persistence/bitcask/merge_job.h"

#include <algorithm>
#include <cstdio>
#include <limits>

namespace estuary::persistence::bitcask {
namespace {

constexpr uint64_t kMaxFileSize = std::numeric_limits<uint32_t>::max();

}  // namespace

BitcaskEngine::BitcaskEngine(io::FileSystem& fs, std::string dir, BitcaskOptions options)
    : fs_(fs), dir_(std::move(dir)), options_(std::move(options)),
      janitor_(std::make_unique<FileJanitor>(
          options_.defer_file_work_for_tests ? FileJanitor::Mode::kDeferred
          : options_.background_file_work    ? FileJanitor::Mode::kThread
                                             : FileJanitor::Mode::kInline)),
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
  uint64_t member_bytes = 0;
  for (const WriteBatch::Op& op : batch.ops()) {
    if (op.key.size() > kMaxFileSize || op.value.size() > kMaxFileSize) {
      return Fail(Errc::kInvalidArgument, "key or value too large");
    }
    member_bytes += RecordSize(op.key.size(), op.is_delete ? 0 : op.value.size());
  }
  uint64_t total = member_bytes + (has_header ? RecordSize(0, kBatchHeaderValueSize) : 0);
  // A batch larger than max_file_size gets a file of its own; offsets are
  // 32 bits, so no file may pass 4 GiB.
  if (total > kMaxFileSize) return Fail(Errc::kInvalidArgument, "batch larger than 4 GiB");
  // One buffer, sized once and reused: the batch is encoded in place and
  // handed to the file in one write.
  std::string& bytes = append_buffer_;
  bytes.clear();
  bytes.reserve(total);
  uint64_t first_seq = next_seq_;
  int64_t now = NowWallMs();
  if (has_header) {
    AppendBatchHeader(&bytes, first_seq, now, static_cast<uint32_t>(batch.size()), member_bytes);
  }
  uint64_t seq = first_seq;
  for (const WriteBatch::Op& op : batch.ops()) {
    AppendRecord(&bytes, seq++, now, op.is_delete ? kTombstone : 0, op.key,
                 op.is_delete ? std::string_view() : std::string_view(op.value));
  }
  auto offset = WriteEncoded(bytes, first_seq);
  if (offset) {
    uint64_t at = *offset + (has_header ? RecordSize(0, kBatchHeaderValueSize) : 0);
    seq = first_seq;
    for (const WriteBatch::Op& op : batch.ops()) {
      uint32_t value_size = op.is_delete ? 0 : static_cast<uint32_t>(op.value.size());
      ApplyRecord(op.key, value_size, op.is_delete, seq++, at, now);
      at += RecordSize(op.key.size(), value_size);
    }
    next_seq_ = seq;
    if (maintenance_wanted_) ScheduleMaintenance();
  }
  constexpr size_t kKeepBufferBytes = 4u << 20;
  if (bytes.capacity() > kKeepBufferBytes) std::string().swap(bytes);
  if (!offset) return MakeError(offset.error());
  return {};
}

Status BitcaskEngine::Put(std::string_view key, std::string_view value) {
  if (auto s = AppendOne(key, value, false); !s) return s;
  if (options_.sync == SyncPolicy::kAlways) return SyncActive();
  return {};
}

Status BitcaskEngine::Delete(std::string_view key) {
  if (auto s = AppendOne(key, {}, true); !s) return s;
  if (options_.sync == SyncPolicy::kAlways) return SyncActive();
  return {};
}

// Write of a batch of one, encoded from the caller's bytes (a record has no
// batch header).
Status BitcaskEngine::AppendOne(std::string_view key, std::string_view value, bool is_delete) {
  if (auto s = CheckWritable(); !s) return s;
  if (key.size() > kMaxFileSize || value.size() > kMaxFileSize ||
      RecordSize(key.size(), value.size()) > kMaxFileSize) {
    return Fail(Errc::kInvalidArgument, "key or value too large");
  }
  std::string& bytes = append_buffer_;
  bytes.clear();
  bytes.reserve(RecordSize(key.size(), value.size()));
  uint64_t seq = next_seq_;
  int64_t now = NowWallMs();
  AppendRecord(&bytes, seq, now, is_delete ? kTombstone : 0, key, value);
  auto offset = WriteEncoded(bytes, seq);
  if (offset) {
    ApplyRecord(key, static_cast<uint32_t>(value.size()), is_delete, seq, *offset, now);
    next_seq_ = seq + 1;
    if (maintenance_wanted_) ScheduleMaintenance();
  }
  constexpr size_t kKeepBufferBytes = 4u << 20;
  if (bytes.capacity() > kKeepBufferBytes) std::string().swap(bytes);
  if (!offset) return MakeError(offset.error());
  return {};
}

Result<uint64_t> BitcaskEngine::WriteEncoded(const std::string& bytes, uint64_t first_seq) {
  if (active_->size > 0 && active_->size + bytes.size() > options_.max_file_size) {
    if (auto s = Rotate(); !s) return MakeError(s.error());
  }
  DataFile& active = *active_;
  uint64_t offset = active.size;
  if (auto appended = WriteActive(active, bytes); !appended) {
    // A partial append must not stay behind the next record: cut it off
    // (with any zero-filled tail).
    if (auto cut = active.file->Truncate(offset); !cut) {
      failed_ = Error{Errc::kIo, "append failed and could not be undone: " + cut.error().message};
    }
    active.allocated = offset;
    return MakeError(appended.error());
  }
  active.size += bytes.size();
  active.min_seq = std::min(active.min_seq, first_seq);
  dirty_ = true;
  WriteBehind(bytes.size());
  return offset;
}

void BitcaskEngine::WriteBehind(uint64_t appended) {
  if (!janitor_->threaded() || options_.sync == SyncPolicy::kAlways) return;
  write_behind_bytes_ += appended;
  // In the file's last MiB, smaller steps: rotation syncs what is left on
  // the writer's path.
  uint64_t step = active_->size + kWriteBehindBytes >= options_.max_file_size
                      ? kWriteBehindTailBytes
                      : kWriteBehindBytes;
  if (write_behind_bytes_ < step) return;
  write_behind_bytes_ = 0;
  // fdatasync through a handle of the janitor's own: the owner keeps
  // appending through its handle meanwhile. Syncing more than the policy asks
  // is always allowed.
  janitor_->Submit([fs = &fs_, path = PathOf(DataFileName(active_id_))]()
                       -> std::optional<std::string> {
    auto file = fs->OpenRead(path);
    if (!file) return file.error().message;
    if (auto s = (*file)->Sync(); !s) return s.error().message;
    return std::nullopt;
  });
}

Status BitcaskEngine::WriteActive(DataFile& active, const std::string& bytes) {
  if (!preallocate_) {
    if (auto s = active.file->Append(bytes); !s) return Fault(s.error());
    return {};
  }
  uint64_t offset = active.size;
  uint64_t end = offset + bytes.size();
  if (auto s = active.file->WriteAt(offset, bytes); !s) return Fault(s.error());
  if (end <= active.allocated) return {};
  // Past the zero-filled space. A large write extends the file by itself
  // (one size change per large write is cheap per byte); a small one
  // zero-fills the next step, so the next small writes land in place.
  active.allocated = end;
  uint64_t step = options_.preallocate_bytes;
  if (bytes.size() >= step / 4) return {};
  constexpr uint64_t kBlock = 4096;
  uint64_t fill_end = std::min((end + step + kBlock - 1) / kBlock * kBlock,
                               std::max(options_.max_file_size, end));
  if (fill_end <= end) return {};
  static const std::string kZeros(64u << 10, '\0');
  for (uint64_t at = end; at < fill_end; at += kZeros.size()) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(kZeros.size(), fill_end - at));
    if (auto s = active.file->WriteAt(at, std::string_view(kZeros).substr(0, n)); !s) {
      // Not fatal (e.g. no space for the tail): the record is written; the
      // file's length is whatever the partial fill left.
      auto size = active.file->Size();
      active.allocated = size ? std::max(*size, end) : end;
      return {};
    }
    active.allocated = at + n;
  }
  return {};
}

Status BitcaskEngine::TrimActive() {
  auto found = files_.find(active_id_);
  if (found == files_.end()) return {};
  DataFile& active = found->second;
  if (active.allocated <= active.size) return {};
  if (auto s = active.file->Truncate(active.size); !s) return Fault(s.error());
  active.allocated = active.size;
  dirty_ = true;  // the new length must be synced
  return {};
}

void BitcaskEngine::ApplyRecord(std::string_view key, uint32_t value_size, bool is_delete,
                                uint64_t seq, uint64_t offset, int64_t timestamp_ms) {
  if (is_delete) {
    active_->max_tombstone_seq = seq;
    active_->tombstone_bytes += RecordSize(key.size(), 0);
    auto it = keydir_.find(key);
    if (it != keydir_.end()) {
      if (it->second.file_id != active_id_) maintenance_wanted_ = true;
      FileOf(it->second.file_id).live_bytes -= RecordSize(key.size(), it->second.value_size);
      keydir_.erase(it);
    }
  } else {
    AddRecordToKeyDir(key, KeyEntry{active_id_, static_cast<uint32_t>(offset), value_size, seq});
  }
  if (active_hint_complete_) {
    // The same entry ScanDataFile would find for this record.
    AppendHintEntry(&active_hint_, seq, timestamp_ms, static_cast<uint32_t>(offset), key,
                    value_size, is_delete ? kTombstone : 0);
    ++active_hint_count_;
    if (active_hint_.size() > kMaxActiveHintBytes) {
      active_hint_complete_ = false;
      std::string().swap(active_hint_);
    }
  }
}

void BitcaskEngine::AddRecordToKeyDir(std::string_view key, KeyEntry entry) {
  auto [it, inserted] = EmplaceKey(key, entry);
  if (!inserted) {
    if (it->second.file_id != active_id_) maintenance_wanted_ = true;
    FileOf(it->second.file_id).live_bytes -= RecordSize(key.size(), it->second.value_size);
    it->second = entry;
  }
  FileOf(entry.file_id).live_bytes += RecordSize(key.size(), entry.value_size);
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
  if (auto synced = active_->file->Sync(); !synced) {
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

Result<std::string> BitcaskEngine::ReadValue(std::string_view key, const KeyEntry& entry) {
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
  // The value is the record's tail: shift it down instead of copying it out.
  size_t value_size = record.value.size();
  bytes->erase(0, kRecordHeaderSize + key.size());
  bytes->resize(value_size);
  return std::move(*bytes);
}

namespace {

// Scan's read-ahead: a run of records read with one pread starts at 4 KiB
// and doubles while the visitor keeps asking, up to 256 KiB, so a fetch of
// one large message reads one record and a long in-order read costs one
// syscall per 256 KiB. Records of one queue are adjacent in the file but for
// batch headers between them, hence the allowed gap.
constexpr uint64_t kFirstReadAhead = 4u << 10;
constexpr uint64_t kMaxReadAhead = 256u << 10;
constexpr uint64_t kMaxReadGap = 4u << 10;

bool HasPrefix(std::string_view key, std::string_view prefix) {
  return key.substr(0, prefix.size()) == prefix;
}

}  // namespace

Result<std::string> BitcaskEngine::ReadRun(KeyDir::const_iterator first,
                                           KeyDir::const_iterator last) {
  auto file = files_.find(first->second.file_id);
  if (file == files_.end()) return Fail(Errc::kIo, "missing data file");
  const KeyEntry& back = std::prev(last)->second;
  uint64_t end = back.offset + RecordSize(std::prev(last)->first.size(), back.value_size);
  auto bytes = file->second.file->ReadAt(first->second.offset, end - first->second.offset);
  if (!bytes) return MakeError(Error{Errc::kIo, bytes.error().message});
  return std::move(*bytes);
}

Status BitcaskEngine::Scan(std::string_view prefix, std::string_view start,
                           const ScanVisitor& visit) {
  if (closed_) return Fail(Errc::kClosed, "engine closed");
  std::string_view from = start < prefix ? prefix : start;
  uint64_t read_ahead = kFirstReadAhead;
  auto it = keydir_.lower_bound(from);
  while (it != keydir_.end() && HasPrefix(it->first, prefix)) {
    // A run: records of one file, each starting at most kMaxReadGap after
    // the previous one ends, spanning at most read_ahead (at least one).
    auto first = it;
    uint64_t run_start = first->second.offset;
    uint64_t run_end = run_start + RecordSize(first->first.size(), first->second.value_size);
    for (++it; it != keydir_.end() && HasPrefix(it->first, prefix); ++it) {
      const KeyEntry& next = it->second;
      uint64_t next_end = next.offset + RecordSize(it->first.size(), next.value_size);
      if (next.file_id != first->second.file_id || next.offset < run_end ||
          next.offset - run_end > kMaxReadGap || next_end - run_start > read_ahead) {
        break;
      }
      run_end = next_end;
    }
    auto bytes = ReadRun(first, it);
    if (!bytes) return MakeError(bytes.error());
    for (auto member = first; member != it; ++member) {
      DecodedRecord record = DecodeRecord(*bytes, member->second.offset - run_start);
      if (record.status != DecodeStatus::kOk || record.key != member->first) {
        return Fail(Errc::kCorruption, "bad record for a key in " +
                                           PathOf(DataFileName(member->second.file_id)) +
                                           " at offset " + std::to_string(member->second.offset));
      }
      if (!visit(member->first, record.value)) return {};
    }
    read_ahead = std::min(read_ahead * 2, kMaxReadAhead);
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
  if (auto s = CheckJanitor(); !s) return s;
  // With a Loop, maintenance runs on its timer, never inside this call.
  if (options_.loop != nullptr) {
    ScheduleMaintenance();
  } else if (auto s = Maintain(); !s) {
    return s;
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
  if (options_.rotate_ahead) return RotateAhead();
  // Immutable files are always synced whole, so a torn tail can only be in
  // the newest file; the hint then lets the next start skip the scan. An
  // immutable file holds no zero-filled tail.
  if (auto s = TrimActive(); !s) return s;
  dirty_ = true;
  if (auto s = SyncActive(); !s) return s;
  if (auto s = WriteActiveHint(); !s) Log("hint write failed: " + s.error().message);
  active_->live_at_last_pass = active_->live_bytes;
  if (active_->live_bytes < active_->size) maintenance_wanted_ = true;
  return StartActiveFile();
}

Status BitcaskEngine::Close() {
  if (closed_) return Fail(Errc::kClosed, "engine closed");
  if (options_.loop != nullptr) {
    if (interval_timer_ != 0) options_.loop->CancelTimer(interval_timer_);
    if (merge_timer_ != 0) options_.loop->CancelTimer(merge_timer_);
    if (maintenance_timer_ != 0) options_.loop->CancelTimer(maintenance_timer_);
  }
  AbandonMerge("engine closing");
  FlushGroup();
  Status status = failed_ ? Status{} : TrimActive();
  if (status) status = SyncActive();
  if (status && files_.count(active_id_) && files_[active_id_].size > 0) {
    if (auto s = WriteActiveHint(); !s) Log("hint write failed: " + s.error().message);
  }
  // Dropped files and a merge's last renames: done before Close returns.
  DiscardPreparedFile();
  if (auto failure = janitor_->Drain(); failure && status) {
    status = Fail(Errc::kIo, "file maintenance failed (reopen completes it): " + *failure);
  }
  closed_ = true;
  files_.clear();
  active_ = nullptr;
  keydir_.clear();
  self_.reset();
  return status;
}

}  // namespace estuary::persistence::bitcask
