// BitcaskEngine's maintenance: which immutable files to drop and which to
// merge, and when (docs/bitcask_format.md, "Maintenance"). The file work
// itself goes to the FileJanitor, off the owner thread when it has one.
#include <algorithm>

#include "persistence/bitcask/bitcask_engine.h"
#include "persistence/bitcask/merge_job.h"

namespace estuary::persistence::bitcask {

Status BitcaskEngine::CheckJanitor() {
  if (failed_) return {};
  if (auto failure = janitor_->failure()) {
    failed_ = Error{Errc::kIo, "file maintenance failed (reopen completes it): " + *failure};
    Log(failed_->message);
    return MakeError(*failed_);
  }
  return {};
}

Status BitcaskEngine::WaitForFileWork() {
  if (auto failure = janitor_->Drain()) return CheckJanitor();
  return {};
}

void BitcaskEngine::ScheduleMaintenance() {
  maintenance_wanted_ = false;
  if (options_.loop == nullptr || maintenance_timer_ != 0 || closed_) return;
  std::weak_ptr<BitcaskEngine*> weak = self_;
  maintenance_timer_ = options_.loop->AddTimer(options_.maintenance_delay_ms, [weak] {
    auto self = weak.lock();
    if (!self) return;
    BitcaskEngine* engine = *self;
    engine->maintenance_timer_ = 0;
    if (auto s = engine->Maintain(); !s) engine->Log("maintenance failed: " + s.error().message);
  });
}

uint64_t BitcaskEngine::OldestSeqOutside(const std::set<uint32_t>& excluded) const {
  uint64_t oldest = UINT64_MAX;
  for (const auto& [id, file] : files_) {
    if (!excluded.count(id)) oldest = std::min(oldest, file.min_seq);
  }
  return oldest;
}

Status BitcaskEngine::Maintain() {
  maintenance_wanted_ = false;
  if (closed_ || failed_ || merge_ || options_.merge_dead_ratio <= 0) return {};
  if (auto s = CheckJanitor(); !s) return s;
  // Only the active file (a rotate_ahead's prepared file is not in files_):
  // nothing to drop or merge. Tick without a Loop calls this after every write.
  if (files_.size() <= 1) return {};
  if (auto s = DropDeadFiles(); !s) return s;
  std::vector<uint32_t> chosen;
  uint64_t dead_total = 0;
  bool draining = false;
  for (auto& [id, file] : files_) {
    if (id == active_id_) continue;
    // Live bytes falling: acks are consuming this file; it will soon hold
    // nothing live and be dropped without a copy. Look again later.
    bool falling = file.live_bytes < file.live_at_last_pass;
    file.live_at_last_pass = file.live_bytes;
    if (falling) {
      draining = true;
      continue;
    }
    uint64_t dead = file.size - file.live_bytes;
    // Tombstones a merge would have to keep reclaim nothing.
    if (file.max_tombstone_seq >= OldestSeqOutside({id})) dead -= file.tombstone_bytes;
    if (dead > 0 && static_cast<double>(dead) >=
                        options_.merge_dead_ratio * static_cast<double>(file.size)) {
      chosen.push_back(id);
      dead_total += dead;
    }
  }
  if (!chosen.empty() && dead_total >= options_.merge_min_dead_bytes) {
    if (auto s = StartMergeOf(std::move(chosen)); !s) return s;
  }
  if (draining) ScheduleMaintenance();
  return {};
}

namespace {

// Removes dropped files, oldest first. A file holding tombstones is removed
// only once the removals before it are durable: its tombstones may delete
// puts in those files.
struct DropJob {
  io::FileSystem* fs;
  std::string dir;
  std::string sync_first;  // the file holding what superseded them, or empty
  std::vector<std::pair<uint32_t, bool>> files;  // id, holds tombstones

  std::optional<std::string> operator()() const {
    auto path = [this](const std::string& name) { return dir + "/" + name; };
    if (!sync_first.empty()) {
      auto file = fs->OpenRead(sync_first);
      if (!file) return file.error().message;
      if (auto s = (*file)->Sync(); !s) return s.error().message;
    }
    bool unsynced = false;
    for (auto [id, tombstones] : files) {
      if (tombstones && unsynced) {
        if (auto s = fs->SyncDir(dir); !s) return s.error().message;
      }
      // The hint first: a data file without its hint is scanned, a hint
      // without its data file would be litter.
      if (fs->Exists(path(HintFileName(id)))) {
        if (auto s = fs->Remove(path(HintFileName(id))); !s) return s.error().message;
      }
      if (auto s = fs->Remove(path(DataFileName(id))); !s) return s.error().message;
      unsynced = true;
    }
    if (auto s = fs->SyncDir(dir); !s) return s.error().message;
    return std::nullopt;
  }
};

}  // namespace

Status BitcaskEngine::DropDeadFiles() {
  if (merge_) return {};
  std::vector<std::pair<uint64_t, uint32_t>> by_age;
  for (const auto& [id, file] : files_) {
    if (id != active_id_ && file.live_bytes == 0) by_age.emplace_back(file.min_seq, id);
  }
  if (by_age.empty()) return {};
  std::sort(by_age.begin(), by_age.end());
  std::set<uint32_t> dropped;
  DropJob job{&fs_, dir_, {}, {}};
  for (auto [min_seq, id] : by_age) {
    const DataFile& file = files_[id];
    std::set<uint32_t> others = dropped;
    others.insert(id);
    // Its tombstones must not be newer than any record left elsewhere.
    if (file.max_tombstone_seq != 0 && file.max_tombstone_seq >= OldestSeqOutside(others)) {
      continue;
    }
    dropped.insert(id);
    job.files.emplace_back(id, file.max_tombstone_seq != 0);
  }
  if (job.files.empty()) return {};
  // What superseded these records may be unsynced in the active file (under
  // none/interval): durable first, or a crash would lose both versions.
  if (dirty_) job.sync_first = PathOf(DataFileName(active_id_));
  for (uint32_t id : dropped) files_.erase(id);
  Log("dropped " + std::to_string(dropped.size()) + " files with no live records");
  janitor_->Submit(std::move(job));
  return CheckJanitor();
}

}  // namespace estuary::persistence::bitcask
