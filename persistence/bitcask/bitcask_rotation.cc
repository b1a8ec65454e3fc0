// BitcaskEngine: rotation off the writer's path (BitcaskOptions::
// rotate_ahead; docs/bitcask_format.md, "Rotation ahead"). The janitor
// prepares the next data file before it is needed and finishes a rotated
// one (trim and hint) after the writer has moved on.
#include <algorithm>

#include "persistence/bitcask/bitcask_engine.h"

namespace estuary::persistence::bitcask {
namespace {

// A hint is optional (one missing or torn only means a scan at Open), so
// its errors stop nothing.
void WriteHintFile(io::FileSystem& fs, const std::string& path, const std::string& hint) {
  if (fs.Exists(path) && !fs.Remove(path)) return;
  auto file = fs.OpenAppend(path);
  if (file && (*file)->Append(hint)) (void)(*file)->Sync();
}

// The hint of a data file of `size` bytes, by scanning it (when the
// in-memory one was given up).
std::string ScanForHint(io::FileSystem& fs, const std::string& path, uint64_t size) {
  auto file = fs.OpenRead(path);
  if (!file) return {};
  auto data = (*file)->ReadAt(0, size);
  if (!data || data->size() != size) return {};
  return EncodeHint(ScanDataFile(*data).entries, size);
}

}  // namespace

void BitcaskEngine::PrepareNextFile() {
  if (!options_.rotate_ahead || closed_ || failed_ || prepared_) return;
  auto prepared = std::make_shared<PreparedFile>();
  prepared->id = next_file_id_++;
  prepared->preallocated = options_.sync == SyncPolicy::kAlways && options_.preallocate_bytes > 0;
  constexpr uint64_t kBlock = 4096;
  uint64_t fill = prepared->preallocated
                      ? std::min((options_.preallocate_bytes + kBlock - 1) / kBlock * kBlock,
                                 options_.max_file_size)
                      : 0;
  prepared_ = prepared;
  // Failures here are not the janitor's: the file stays unprepared and the
  // writer creates one itself at rotation, meeting the error there.
  janitor_->Submit([fs = &fs_, dir = dir_, path = PathOf(DataFileName(prepared->id)), prepared,
                    fill]() -> std::optional<std::string> {
    auto file = prepared->preallocated ? fs->OpenWrite(path) : fs->OpenAppend(path);
    if (!file && prepared->preallocated && file.error().code == io::FsErrc::kInvalid) {
      prepared->preallocated = false;  // no positional writes in this FileSystem
      file = fs->OpenAppend(path);
    }
    bool ok = static_cast<bool>(file);
    uint64_t allocated = 0;
    if (ok && prepared->preallocated) {
      // Zero-filled and synced now, so the first writes land in place and
      // their fdatasync has no size or extent change to commit.
      static const std::string kZeros(64u << 10, '\0');
      for (uint64_t at = 0; at < fill; at += kZeros.size()) {
        size_t n = static_cast<size_t>(std::min<uint64_t>(kZeros.size(), fill - at));
        if (!(*file)->WriteAt(at, std::string_view(kZeros).substr(0, n))) break;
        allocated = at + n;
      }
      ok = allocated == 0 || static_cast<bool>((*file)->Sync());
    }
    // Its directory entry is durable before any write in it is acknowledged.
    ok = ok && static_cast<bool>(fs->SyncDir(dir));
    if (ok) {
      prepared->file = std::move(*file);
      prepared->allocated = allocated;
    }
    prepared->done.store(true, std::memory_order_release);
    return std::nullopt;
  });
}

std::shared_ptr<BitcaskEngine::PreparedFile> BitcaskEngine::TakePreparedFile() {
  if (!prepared_) return nullptr;
  if (prepared_->done.load(std::memory_order_acquire) && prepared_->file) {
    return std::exchange(prepared_, nullptr);
  }
  DiscardPreparedFile();  // not ready (or failed): the writer does not wait
  return nullptr;
}

void BitcaskEngine::DiscardPreparedFile() {
  if (!prepared_) return;
  std::string path = PathOf(DataFileName(prepared_->id));
  // Behind the job that makes it (jobs run in order). A crash before this
  // leaves an empty or zero-filled file, which Open removes.
  janitor_->Submit([fs = &fs_, path, prepared = std::move(prepared_)]()
                       -> std::optional<std::string> {
    prepared->file.reset();
    if (fs->Exists(path)) (void)fs->Remove(path);
    return std::nullopt;
  });
}

Status BitcaskEngine::RotateAhead() {
  // Records appended since the last sync (under none/interval; under kAlways
  // only a group commit's) are synced here, on the writer's path, as before:
  // were they left to the janitor, the kernel could write the next file's
  // records back before this file's tail, and power loss would leave a hole
  // instead of a prefix (found by the model test). Write-behind keeps this
  // to at most about kWriteBehindTailBytes.
  if (dirty_) {
    if (auto s = SyncActive(); !s) return s;
  }
  DataFile& old = *active_;  // map nodes do not move
  uint32_t id = active_id_;
  uint64_t size = old.size;
  bool trim = old.allocated > old.size;
  bool hint_complete = active_hint_complete_;
  uint32_t hint_count = active_hint_count_;
  std::string hint = std::move(active_hint_);
  if (auto s = StartActiveFile(); !s) {
    // Still the active file: nothing may trim it under the writer.
    active_hint_ = std::move(hint);
    return s;
  }
  if (hint_complete) {
    AppendHintTrailer(&hint, hint_count, size);
  } else {
    hint.clear();  // the job rescans the file
  }
  // The rest is the janitor's: cutting the zero-filled tail (its sync is
  // owed to nobody: an untrimmed tail is trimmed at Open) and the hint.
  janitor_->Submit([fs = &fs_, data_path = PathOf(DataFileName(id)),
                    hint_path = PathOf(HintFileName(id)), size, trim,
                    hint = std::move(hint)]() mutable -> std::optional<std::string> {
    if (trim) {
      // A handle of its own: the owner keeps reading through its handle.
      auto file = fs->OpenAppend(data_path);
      io::FsStatus status = file ? io::FsStatus{} : io::FsStatus(MakeError(file.error()));
      if (status) status = (*file)->Truncate(size);
      if (status) status = (*file)->Sync();
      if (!status) return "trimming rotated " + data_path + ": " + status.error().message;
    }
    if (hint.empty()) hint = ScanForHint(*fs, data_path, size);
    if (!hint.empty()) WriteHintFile(*fs, hint_path, hint);
    return std::nullopt;
  });
  old.allocated = size;  // as the job leaves it
  old.live_at_last_pass = old.live_bytes;
  if (old.live_bytes < old.size) maintenance_wanted_ = true;
  return {};
}

}  // namespace estuary::persistence::bitcask
