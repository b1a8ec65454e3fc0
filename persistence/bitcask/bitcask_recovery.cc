// BitcaskEngine: Open and recovery (docs/bitcask_format.md, "Recovery").
#include <algorithm>

#include "persistence/bitcask/bitcask_engine.h"
#include "persistence/bitcask/merge_job.h"
#include "persistence/bitcask/merge_manifest.h"

namespace estuary::persistence::bitcask {
namespace {

constexpr uint32_t kLoadTombstone = UINT32_MAX;


bool EndsWith(std::string_view name, std::string_view suffix) {
  return name.size() >= suffix.size() && name.substr(name.size() - suffix.size()) == suffix;
}

}  // namespace

Result<std::unique_ptr<BitcaskEngine>> BitcaskEngine::Open(io::FileSystem& fs, std::string dir,
                                                           BitcaskOptions options) {
  std::unique_ptr<BitcaskEngine> engine(new BitcaskEngine(fs, std::move(dir), std::move(options)));
  if (auto made = fs.CreateDir(engine->dir_); !made) return MakeError(Error{Errc::kIo, made.error().message});
  if (auto s = engine->Recover(); !s) {
    engine->closed_ = true;
    return MakeError(s.error());
  }
  engine->ArmIntervalTimer();
  return engine;
}

Status BitcaskEngine::Recover() {
  auto names = fs_.ListDir(dir_);
  if (!names) return Fault(names.error());
  if (std::count(names->begin(), names->end(), kMergeManifestName)) {
    if (auto s = FinishCommittedMerge(); !s) return s;
    names = fs_.ListDir(dir_);
    if (!names) return Fault(names.error());
  }
  std::vector<uint32_t> ids;
  for (const std::string& name : *names) {
    if (EndsWith(name, ".merge") || EndsWith(name, ".tmp")) {
      Log("removing leftover of an uncommitted merge: " + name);
      if (auto s = fs_.Remove(PathOf(name)); !s) return Fault(s.error());
    } else if (auto id = ParseDataFileName(name)) {
      ids.push_back(*id);
    }
  }
  for (uint32_t id : ids) {
    next_file_id_ = std::max(next_file_id_, id + 1);
    if (auto s = LoadFile(id); !s) return s;
  }
  for (auto it = keydir_.begin(); it != keydir_.end();) {
    it = it->second.value_size == kLoadTombstone ? keydir_.erase(it) : std::next(it);
  }
  for (const auto& [key, entry] : keydir_) {
    files_[entry.file_id].live_bytes += RecordSize(key.size(), entry.value_size);
  }
  for (auto& [id, file] : files_) file.live_at_last_pass = file.live_bytes;
  return StartActiveFile();
}

Status BitcaskEngine::LoadFile(uint32_t id) {
  std::string data_path = PathOf(DataFileName(id));
  std::string hint_path = PathOf(HintFileName(id));
  auto file = fs_.OpenRead(data_path);
  if (!file) return Fault(file.error());
  auto size = (*file)->Size();
  if (!size) return Fault(size.error());
  if (fs_.Exists(hint_path)) {
    auto hint_file = fs_.OpenRead(hint_path);
    auto hint_size = fs_.FileSize(hint_path);
    if (hint_file && hint_size) {
      auto hint = (*hint_file)->ReadAt(0, *hint_size);
      if (hint) {
        if (auto entries = DecodeHint(*hint, *size)) {
          files_[id] = DataFile{std::move(*file), *size, 0};
          NoteEntries(files_[id], *entries);
          ApplyLoaded(id, *entries);
          return {};
        }
      }
    }
    Log("hint file " + hint_path + " is bad; scanning " + data_path);
  }
  auto data = (*file)->ReadAt(0, *size);
  if (!data) return Fault(data.error());
  DataScan scan = ScanDataFile(*data);
  for (const std::string& problem : scan.problems) Log(data_path + ": " + problem);
  if (scan.valid_end < *size) {
    auto writable = fs_.OpenAppend(data_path);
    if (!writable) return Fault(writable.error());
    if (auto s = (*writable)->Truncate(scan.valid_end); !s) return Fault(s.error());
    if (auto s = (*writable)->Sync(); !s) return Fault(s.error());
    // A zero-filled tail is the unused preallocated space of a file that was
    // active when the process stopped: trimmed, not torn.
    std::string what = scan.zero_tail && scan.problems.empty() ? "trimmed the zero-filled tail of "
                                                                : "truncated ";
    Log(what + data_path + " from " + std::to_string(*size) + " to " +
        std::to_string(scan.valid_end) + " bytes");
    *size = scan.valid_end;
  }
  if (*size == 0) {
    // An active file that never got a durable record: drop it.
    if (auto s = fs_.Remove(data_path); !s) return Fault(s.error());
    if (fs_.Exists(hint_path)) (void)fs_.Remove(hint_path);
    return {};
  }
  // The hint comes from the scan just made (before ApplyLoaded takes the
  // keys), not from reading the file a second time.
  std::string hint = EncodeHint(scan.entries, *size);
  files_[id] = DataFile{std::move(*file), *size, 0};
  NoteEntries(files_[id], scan.entries);
  ApplyLoaded(id, scan.entries);
  if (auto s = WriteHintBytes(id, "", hint); !s) Log("hint write failed: " + s.error().message);
  return {};
}

void BitcaskEngine::NoteEntries(DataFile& file, const std::vector<RecordEntry>& entries) {
  for (const RecordEntry& entry : entries) {
    file.min_seq = std::min(file.min_seq, entry.seq);
    if (entry.flags & kTombstone) {
      file.max_tombstone_seq = std::max(file.max_tombstone_seq, entry.seq);
      file.tombstone_bytes += RecordSize(entry.key.size(), 0);
    }
  }
}

Result<std::vector<RecordEntry>> BitcaskEngine::ReadEntries(uint32_t id) {
  const DataFile& data = files_[id];
  std::string hint_path = PathOf(HintFileName(id));
  if (fs_.Exists(hint_path)) {
    auto hint_file = fs_.OpenRead(hint_path);
    auto hint_size = fs_.FileSize(hint_path);
    if (hint_file && hint_size) {
      auto hint = (*hint_file)->ReadAt(0, *hint_size);
      if (hint) {
        if (auto entries = DecodeHint(*hint, data.size)) return std::move(*entries);
      }
    }
  }
  auto bytes = data.file->ReadAt(0, data.size);
  if (!bytes) return MakeError(Fault(bytes.error()).error());
  return std::move(ScanDataFile(*bytes).entries);
}

void BitcaskEngine::ApplyLoaded(uint32_t id, std::vector<RecordEntry>& entries) {
  for (RecordEntry& entry : entries) {
    next_seq_ = std::max(next_seq_, entry.seq + 1);
    uint32_t value_size = (entry.flags & kTombstone) ? kLoadTombstone : entry.value_size;
    KeyEntry loaded{id, entry.offset, value_size, entry.seq};
    // try_emplace moves the key only when it inserts.
    auto [it, inserted] = EmplaceKey(std::move(entry.key), loaded);
    // The highest sequence number wins, whatever file it is in: merge output
    // files may carry older records under newer file ids.
    if (!inserted && it->second.seq <= entry.seq) it->second = loaded;
  }
}

Status BitcaskEngine::WriteHint(uint32_t id, const std::string& suffix) {
  auto& data_file = files_[id];
  auto data = data_file.file->ReadAt(0, data_file.size);
  if (!data) return Fault(data.error());
  return WriteHintBytes(id, suffix, EncodeHint(ScanDataFile(*data).entries, data_file.size));
}

Status BitcaskEngine::WriteActiveHint() {
  if (!active_hint_complete_) return WriteHint(active_id_, "");
  // The file must still be what the hint describes: its handle works and
  // its size is the one we appended to (a rescan would have checked both
  // by reading it).
  DataFile& active = files_[active_id_];
  auto size = active.file->Size();
  if (!size) return Fault(size.error());
  if (*size != active.size) return Fail(Errc::kIo, "active file changed size under the engine");
  // The entries stay until the next active file starts, so a failed write
  // can be retried (by Close) with a complete hint.
  size_t entries_end = active_hint_.size();
  AppendHintTrailer(&active_hint_, active_hint_count_, active.size);
  if (janitor_->threaded() && !closed_) {
    // Rotation: the janitor writes it (the data file is synced already). A
    // hint is optional: one missing, torn or failed (its trailer's CRC)
    // only means a scan at Open, so its errors stop nothing.
    janitor_->Submit([fs = &fs_, path = PathOf(HintFileName(active_id_)),
                      hint = active_hint_]() -> std::optional<std::string> {
      if (fs->Exists(path) && !fs->Remove(path)) return std::nullopt;
      auto file = fs->OpenAppend(path);
      if (file && (*file)->Append(hint)) (void)(*file)->Sync();
      return std::nullopt;
    });
    active_hint_.resize(entries_end);
    return {};
  }
  Status status = WriteHintBytes(active_id_, "", active_hint_);
  active_hint_.resize(entries_end);
  return status;
}

Status BitcaskEngine::WriteHintBytes(uint32_t id, const std::string& suffix,
                                     const std::string& hint) {
  std::string path = PathOf(HintFileName(id)) + suffix;
  if (fs_.Exists(path)) {
    if (auto s = fs_.Remove(path); !s) return Fault(s.error());
  }
  auto file = fs_.OpenAppend(path);
  if (!file) return Fault(file.error());
  if (auto s = (*file)->Append(hint); !s) return Fault(s.error());
  if (auto s = (*file)->Sync(); !s) return Fault(s.error());
  return {};
}

Status BitcaskEngine::StartActiveFile() {
  uint32_t id = 0;
  std::unique_ptr<io::File> opened;
  uint64_t allocated = 0;
  if (auto prepared = TakePreparedFile()) {
    // rotate_ahead: made, zero-filled and its directory entry synced by the
    // janitor (bitcask_rotation.cc).
    id = prepared->id;
    preallocate_ = prepared->preallocated;
    opened = std::move(prepared->file);
    allocated = prepared->allocated;
  } else {
    id = next_file_id_++;
    preallocate_ = options_.sync == SyncPolicy::kAlways && options_.preallocate_bytes > 0;
    auto file = preallocate_ ? fs_.OpenWrite(PathOf(DataFileName(id)))
                             : fs_.OpenAppend(PathOf(DataFileName(id)));
    if (!file && preallocate_ && file.error().code == io::FsErrc::kInvalid) {
      preallocate_ = false;  // no positional writes in this FileSystem
      file = fs_.OpenAppend(PathOf(DataFileName(id)));
    }
    if (!file) return Fault(file.error());
    // The new file's directory entry must be durable before any write in it
    // is acknowledged.
    if (auto s = fs_.SyncDir(dir_); !s) return Fault(s.error());
    opened = std::move(*file);
  }
  files_[id] = DataFile{std::move(opened), 0, 0};
  files_[id].allocated = allocated;
  active_id_ = id;
  active_ = &files_[id];
  dirty_ = false;
  active_hint_.clear();
  active_hint_count_ = 0;
  active_hint_complete_ = true;
  write_behind_bytes_ = 0;  // the old file was synced whole
  PrepareNextFile();
  return {};
}

Status BitcaskEngine::FinishCommittedMerge() { return FinishMergeOnDisk(fs_, dir_); }

Status FinishMergeOnDisk(io::FileSystem& fs, const std::string& dir) {
  auto PathOf = [&dir](const std::string& name) { return dir + "/" + name; };
  auto Fault = [](const io::FsError& error) -> Status {
    return Fail(error.code == io::FsErrc::kNoSpace ? Errc::kNoSpace : Errc::kIo, error.message);
  };
  std::string path = PathOf(kMergeManifestName);
  auto size = fs.FileSize(path);
  if (!size) return Fault(size.error());
  auto file = fs.OpenRead(path);
  if (!file) return Fault(file.error());
  auto text = (*file)->ReadAt(0, *size);
  if (!text) return Fault(text.error());
  auto manifest = DecodeMergeManifest(*text);
  if (!manifest) {
    // Guessing could delete the only copy of a record: stop instead.
    return Fail(Errc::kCorruption, "corrupt merge manifest " + path);
  }
  for (uint32_t id : manifest->outputs) {
    for (const std::string& name : {DataFileName(id), HintFileName(id)}) {
      if (fs.Exists(PathOf(name) + ".merge")) {
        if (auto s = fs.Rename(PathOf(name) + ".merge", PathOf(name)); !s) return Fault(s.error());
      }
    }
  }
  if (auto s = fs.SyncDir(dir); !s) return Fault(s.error());
  for (uint32_t id : manifest->obsolete) {
    for (const std::string& name : {DataFileName(id), HintFileName(id)}) {
      if (fs.Exists(PathOf(name))) {
        if (auto s = fs.Remove(PathOf(name)); !s) return Fault(s.error());
      }
    }
  }
  if (auto s = fs.SyncDir(dir); !s) return Fault(s.error());
  if (auto s = fs.Remove(path); !s) return Fault(s.error());
  if (auto s = fs.SyncDir(dir); !s) return Fault(s.error());
  return {};
}

}  // namespace estuary::persistence::bitcask
