#include "persistence/rocksdb/power_loss_file_system.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>

namespace estuary::persistence {
namespace {

using ::rocksdb::FileOptions;
using ::rocksdb::FSDirectory;
using ::rocksdb::FSWritableFile;
using ::rocksdb::IODebugContext;
using ::rocksdb::IOOptions;
using ::rocksdb::IOStatus;
using ::rocksdb::Slice;

constexpr uint64_t kKeepOnRenameLimit = 1 << 20;

class TrackedWritableFile final : public ::rocksdb::FSWritableFileOwnerWrapper {
 public:
  TrackedWritableFile(std::unique_ptr<FSWritableFile> target, PowerLossFileSystem& fs, std::string name,
                      uint64_t size)
      : FSWritableFileOwnerWrapper(std::move(target)), fs_(fs), name_(std::move(name)), size_(size) {}

  IOStatus Append(const Slice& data, const IOOptions& options, IODebugContext* debug) override {
    if (!fs_.OnAppend(name_, size_, data.size())) return IOStatus::OK();
    size_ += data.size();
    return target()->Append(data, options, debug);
  }
  IOStatus Append(const Slice& data, const IOOptions& options, const ::rocksdb::DataVerificationInfo& info,
                  IODebugContext* debug) override {
    if (!fs_.OnAppend(name_, size_, data.size())) return IOStatus::OK();
    size_ += data.size();
    return target()->Append(data, options, info, debug);
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t offset, const IOOptions& options,
                            IODebugContext* debug) override {
    if (!fs_.OnAppend(name_, offset, data.size())) return IOStatus::OK();
    size_ = std::max(size_, offset + data.size());
    return target()->PositionedAppend(data, offset, options, debug);
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t offset, const IOOptions& options,
                            const ::rocksdb::DataVerificationInfo& info, IODebugContext* debug) override {
    if (!fs_.OnAppend(name_, offset, data.size())) return IOStatus::OK();
    size_ = std::max(size_, offset + data.size());
    return target()->PositionedAppend(data, offset, options, info, debug);
  }
  IOStatus Truncate(uint64_t size, const IOOptions& options, IODebugContext* debug) override {
    if (fs_.frozen()) return IOStatus::OK();
    size_ = size;
    fs_.OnTruncate(name_, size);
    return target()->Truncate(size, options, debug);
  }
  // Flush moves RocksDB's buffer to the kernel: not durable.
  IOStatus Sync(const IOOptions& options, IODebugContext* debug) override {
    IOStatus status = target()->Flush(options, debug);
    if (!status.ok() || !fs_.OnSync(name_)) return status;
    return target()->Sync(options, debug);
  }
  IOStatus Fsync(const IOOptions& options, IODebugContext* debug) override {
    IOStatus status = target()->Flush(options, debug);
    if (!status.ok() || !fs_.OnSync(name_)) return status;
    return target()->Fsync(options, debug);
  }
  // Closing is not syncing (but the descriptor must go).
  IOStatus Close(const IOOptions& options, IODebugContext* debug) override {
    return target()->Close(options, debug);
  }

 private:
  PowerLossFileSystem& fs_;
  std::string name_;
  uint64_t size_;
};

class TrackedDirectory final : public FSDirectory {
 public:
  TrackedDirectory(std::unique_ptr<FSDirectory> target, PowerLossFileSystem& fs, std::string name)
      : target_(std::move(target)), fs_(fs), name_(std::move(name)) {}
  IOStatus Fsync(const IOOptions& options, IODebugContext* debug) override {
    if (fs_.frozen()) return IOStatus::OK();
    IOStatus status = target_->Fsync(options, debug);
    if (status.ok()) fs_.OnDirectorySync(name_);
    return status;
  }
  IOStatus FsyncWithDirOptions(const IOOptions& options, IODebugContext* debug,
                               const ::rocksdb::DirFsyncOptions& dir_options) override {
    if (fs_.frozen()) return IOStatus::OK();
    IOStatus status = target_->FsyncWithDirOptions(options, debug, dir_options);
    if (status.ok()) fs_.OnDirectorySync(name_);  // taken as a whole-directory sync
    return status;
  }
  IOStatus Close(const IOOptions& options, IODebugContext* debug) override { return target_->Close(options, debug); }
  size_t GetUniqueId(char* id, size_t max_size) const override { return target_->GetUniqueId(id, max_size); }

 private:
  std::unique_ptr<FSDirectory> target_;
  PowerLossFileSystem& fs_;
  std::string name_;
};

std::optional<std::string> ReadSmallFile(const std::string& name) {
  std::error_code error;
  const auto size = std::filesystem::file_size(name, error);
  if (error || size > kKeepOnRenameLimit) return std::nullopt;
  std::ifstream in(name, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

std::string PowerLossFileSystem::DirOf(const std::string& name) {
  const auto slash = name.find_last_of('/');
  return slash == std::string::npos ? std::string(".") : name.substr(0, slash);
}

IOStatus PowerLossFileSystem::Frozen() const { return IOStatus::IOError("simulated power loss"); }

bool PowerLossFileSystem::frozen() const {
  std::lock_guard lock(mutex_);
  return frozen_;
}

uint64_t PowerLossFileSystem::syncs() const {
  std::lock_guard lock(mutex_);
  return syncs_;
}

uint64_t PowerLossFileSystem::dir_syncs() const {
  std::lock_guard lock(mutex_);
  return dir_syncs_;
}

void PowerLossFileSystem::PowerLoss() {
  std::lock_guard lock(mutex_);
  frozen_ = true;
}

void PowerLossFileSystem::PowerLossAtNextSync() {
  std::lock_guard lock(mutex_);
  lose_at_next_sync_ = true;
}

void PowerLossFileSystem::Track(const std::string& name, uint64_t size, bool entry_durable) {
  files_[name] = FileState{size, size, entry_durable};
}

IOStatus PowerLossFileSystem::NewWritableFile(const std::string& name, const FileOptions& options,
                                              std::unique_ptr<FSWritableFile>* result, IODebugContext* debug) {
  if (frozen()) return Frozen();
  const bool existed = target()->FileExists(name, IOOptions(), debug).ok();
  std::unique_ptr<FSWritableFile> file;
  IOStatus status = target()->NewWritableFile(name, options, &file, debug);
  if (!status.ok()) return status;
  {
    std::lock_guard lock(mutex_);
    auto it = files_.find(name);
    const bool entry_durable = existed && (it == files_.end() || it->second.entry_durable);
    files_[name] = FileState{0, 0, entry_durable};
  }
  *result = std::make_unique<TrackedWritableFile>(std::move(file), *this, name, 0);
  return status;
}

IOStatus PowerLossFileSystem::ReopenWritableFile(const std::string& name, const FileOptions& options,
                                                 std::unique_ptr<FSWritableFile>* result, IODebugContext* debug) {
  if (frozen()) return Frozen();
  const bool existed = target()->FileExists(name, IOOptions(), debug).ok();
  std::unique_ptr<FSWritableFile> file;
  IOStatus status = target()->ReopenWritableFile(name, options, &file, debug);
  if (!status.ok()) return status;
  uint64_t size = 0;
  (void)target()->GetFileSize(name, IOOptions(), &size, debug);
  {
    std::lock_guard lock(mutex_);
    if (files_.count(name) == 0) Track(name, size, existed);
  }
  *result = std::make_unique<TrackedWritableFile>(std::move(file), *this, name, size);
  return status;
}

IOStatus PowerLossFileSystem::ReuseWritableFile(const std::string& name, const std::string& old_name,
                                                const FileOptions& options,
                                                std::unique_ptr<FSWritableFile>* result, IODebugContext* debug) {
  // A rename then a rewrite from offset 0; tracked as a new file.
  if (frozen()) return Frozen();
  std::unique_ptr<FSWritableFile> file;
  IOStatus status = target()->ReuseWritableFile(name, old_name, options, &file, debug);
  if (!status.ok()) return status;
  {
    std::lock_guard lock(mutex_);
    files_.erase(old_name);
    files_[name] = FileState{0, 0, false};
  }
  *result = std::make_unique<TrackedWritableFile>(std::move(file), *this, name, 0);
  return status;
}

IOStatus PowerLossFileSystem::NewDirectory(const std::string& name, const IOOptions& options,
                                           std::unique_ptr<FSDirectory>* result, IODebugContext* debug) {
  std::unique_ptr<FSDirectory> directory;
  IOStatus status = target()->NewDirectory(name, options, &directory, debug);
  if (!status.ok()) return status;
  std::string dir = name;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  *result = std::make_unique<TrackedDirectory>(std::move(directory), *this, std::move(dir));
  return status;
}

IOStatus PowerLossFileSystem::DeleteFile(const std::string& name, const IOOptions& options, IODebugContext* debug) {
  if (frozen()) return Frozen();
  IOStatus status = target()->DeleteFile(name, options, debug);
  if (status.ok()) {
    std::lock_guard lock(mutex_);
    files_.erase(name);
  }
  return status;
}

IOStatus PowerLossFileSystem::RenameFile(const std::string& from, const std::string& to, const IOOptions& options,
                                         IODebugContext* debug) {
  if (frozen()) return Frozen();
  std::optional<std::string> previous;
  bool known_previous = true;
  if (target()->FileExists(to, options, debug).ok()) {
    previous = ReadSmallFile(to);
    known_previous = previous.has_value();
  }
  uint64_t size = 0;
  (void)target()->GetFileSize(from, options, &size, debug);
  IOStatus status = target()->RenameFile(from, to, options, debug);
  if (!status.ok()) return status;
  std::lock_guard lock(mutex_);
  FileState state{size, size, false};
  if (auto it = files_.find(from); it != files_.end()) {
    state = it->second;
    state.entry_durable = false;
    files_.erase(it);
  }
  files_[to] = state;
  if (known_previous) renames_[DirOf(to)].push_back(PendingRename{to, std::move(previous)});
  return status;
}

IOStatus PowerLossFileSystem::Truncate(const std::string& name, size_t size, const IOOptions& options,
                                       IODebugContext* debug) {
  if (frozen()) return Frozen();
  IOStatus status = target()->Truncate(name, size, options, debug);
  if (status.ok()) OnTruncate(name, size);
  return status;
}

bool PowerLossFileSystem::OnAppend(const std::string& name, uint64_t offset, uint64_t bytes) {
  std::lock_guard lock(mutex_);
  if (frozen_) return false;
  FileState& state = files_[name];
  state.size = std::max(state.size, offset + bytes);
  return true;
}

bool PowerLossFileSystem::OnSync(const std::string& name) {
  std::lock_guard lock(mutex_);
  if (lose_at_next_sync_) {
    lose_at_next_sync_ = false;
    frozen_ = true;
  }
  if (frozen_) return false;
  FileState& state = files_[name];
  state.synced = state.size;
  ++syncs_;
  return true;
}

void PowerLossFileSystem::OnTruncate(const std::string& name, uint64_t size) {
  std::lock_guard lock(mutex_);
  auto it = files_.find(name);
  if (it == files_.end()) return;
  it->second.size = size;
  it->second.synced = std::min(it->second.synced, size);
}

void PowerLossFileSystem::OnDirectorySync(const std::string& dir) {
  std::lock_guard lock(mutex_);
  ++dir_syncs_;
  for (auto& [name, state] : files_) {
    if (DirOf(name) == dir) state.entry_durable = true;
  }
  renames_.erase(dir);
}

void PowerLossFileSystem::Restore(std::mt19937_64* random) {
  std::lock_guard lock(mutex_);
  const IOOptions options;
  // Renames first: an undone rename's target gets its old content back.
  for (auto& [dir, pending] : renames_) {
    for (auto it = pending.rbegin(); it != pending.rend(); ++it) {
      ++renames_undone_;
      files_.erase(it->target);
      if (it->previous) {
        std::ofstream out(it->target, std::ios::binary | std::ios::trunc);
        out.write(it->previous->data(), static_cast<std::streamsize>(it->previous->size()));
      } else {
        (void)target()->DeleteFile(it->target, options, nullptr);
      }
    }
  }
  renames_.clear();
  for (const auto& [name, state] : files_) {
    uint64_t actual = 0;
    if (!target()->GetFileSize(name, options, &actual, nullptr).ok()) continue;
    if (!state.entry_durable) {
      ++files_dropped_;
      bytes_dropped_ += actual;
      (void)target()->DeleteFile(name, options, nullptr);
      continue;
    }
    uint64_t keep = std::min(state.synced, actual);
    if (random != nullptr && actual > keep) keep += (*random)() % (actual - keep + 1);
    if (keep < actual) {
      bytes_dropped_ += actual - keep;
      (void)target()->Truncate(name, keep, options, nullptr);
    }
  }
  files_.clear();
  frozen_ = false;
  lose_at_next_sync_ = false;
}

}  // namespace estuary::persistence
