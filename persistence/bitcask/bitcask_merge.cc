// BitcaskEngine::Merge and the merge manifest (docs/bitcask_format.md,
// "Merge").
#include <set>
#include <sstream>

#include "persistence/bitcask/bitcask_engine.h"
#include "persistence/bitcask/crc32c.h"
#include "persistence/bitcask/merge_job.h"
#include "persistence/bitcask/merge_manifest.h"

namespace estuary::persistence::bitcask {
namespace {

constexpr char kManifestHeader[] = "estuary-bitcask-merge 1\n";
constexpr size_t kOutputBufferBytes = 1 << 20;

std::string JoinIds(const char* label, const std::vector<uint32_t>& ids) {
  std::string line = label;
  for (uint32_t id : ids) line += " " + std::to_string(id);
  return line + "\n";
}

bool ParseIds(const std::string& line, const std::string& label, std::vector<uint32_t>* ids) {
  std::istringstream in(line);
  std::string word;
  if (!(in >> word) || word != label) return false;
  uint64_t id = 0;
  while (in >> id) {
    if (id > UINT32_MAX) return false;
    ids->push_back(static_cast<uint32_t>(id));
  }
  return in.eof();
}

}  // namespace

std::string EncodeMergeManifest(const MergeManifest& manifest) {
  std::string text = kManifestHeader;
  text += JoinIds("outputs", manifest.outputs);
  text += JoinIds("obsolete", manifest.obsolete);
  return text + "crc " + std::to_string(Crc32c(text)) + "\n";
}

std::optional<MergeManifest> DecodeMergeManifest(std::string_view text) {
  size_t crc_at = text.rfind("crc ");
  if (crc_at == std::string_view::npos || text.empty() || text.back() != '\n') return std::nullopt;
  std::string body(text.substr(0, crc_at));
  if (std::to_string(Crc32c(body)) + "\n" != text.substr(crc_at + 4)) return std::nullopt;
  if (body.rfind(kManifestHeader, 0) != 0) return std::nullopt;
  std::istringstream lines(body.substr(sizeof(kManifestHeader) - 1));
  std::string outputs;
  std::string obsolete;
  MergeManifest manifest;
  if (!std::getline(lines, outputs) || !std::getline(lines, obsolete) ||
      !ParseIds(outputs, "outputs", &manifest.outputs) ||
      !ParseIds(obsolete, "obsolete", &manifest.obsolete)) {
    return std::nullopt;
  }
  return manifest;
}

Status BitcaskEngine::DropDeadFiles() {
  if (merge_) return {};
  std::vector<uint32_t> dead;
  for (const auto& [id, file] : files_) {
    if (id != active_id_ && file.live_bytes == 0 && !file.has_tombstones) dead.push_back(id);
  }
  if (dead.empty()) return {};
  // What superseded these records may be unsynced in the active file (under
  // none/interval): durable first, or a crash would lose both versions.
  if (auto s = SyncActive(); !s) return s;
  for (uint32_t id : dead) {
    // The hint first: a data file without its hint is scanned, a hint
    // without its data file would be litter.
    if (fs_.Exists(PathOf(HintFileName(id)))) {
      if (auto s = fs_.Remove(PathOf(HintFileName(id))); !s) return Fault(s.error());
    }
    if (auto s = fs_.Remove(PathOf(DataFileName(id))); !s) return Fault(s.error());
    files_.erase(id);
  }
  if (auto s = fs_.SyncDir(dir_); !s) return Fault(s.error());
  Log("dropped " + std::to_string(dead.size()) + " files with no live records");
  return {};
}

Status BitcaskEngine::Merge() {
  if (auto s = StartMerge(); !s) return s;
  while (merge_) {
    if (auto s = MergeStep(UINT64_MAX); !s) return s;
  }
  return {};
}

Status BitcaskEngine::StartMerge() {
  if (auto s = CheckWritable(); !s) return s;
  if (merge_) return {};
  if (auto s = Rotate(); !s) return s;
  auto job = std::make_unique<MergeJob>();
  for (const auto& [id, file] : files_) {
    if (id == active_id_) continue;
    job->manifest.obsolete.push_back(id);
    job->obsolete.insert(id);
  }
  if (job->obsolete.empty()) return {};
  merge_ = std::move(job);
  ScheduleMergeStep();
  return {};
}

void BitcaskEngine::ScheduleMergeStep() {
  if (options_.loop == nullptr || !merge_) return;
  // A 1 ms timer, not Post or a 0 ms timer: libuv before 1.45 runs a timer
  // re-armed at 0 ms in the same pass, and the loop must poll sockets
  // between two steps.
  std::weak_ptr<BitcaskEngine*> weak = self_;
  merge_timer_ = options_.loop->AddTimer(1, [weak] {
    auto self = weak.lock();
    if (!self) return;
    BitcaskEngine* engine = *self;
    engine->merge_timer_ = 0;
    if (auto s = engine->MergeStep(engine->options_.merge_step_bytes); !s) {
      engine->Log("merge step failed: " + s.error().message);
    }
    engine->ScheduleMergeStep();
  });
}

Status BitcaskEngine::MergeStep(uint64_t byte_budget) {
  if (!merge_) return {};
  if (auto s = CheckWritable(); !s) return s;
  Status status = merge_->copied_all ? Status{} : CopyLiveRecords(*merge_, byte_budget);
  if (status && merge_->copied_all) {
    status = SealMergeOutputs(*merge_);
    if (status) {
      std::unique_ptr<MergeJob> job = std::move(merge_);
      return CommitMerge(*job);
    }
  }
  if (!status) AbandonMerge(status.error().message);
  return status;
}

void BitcaskEngine::AbandonMerge(const std::string& why) {
  if (!merge_) return;
  for (const MergeOutput& out : merge_->outputs) {
    (void)fs_.Remove(PathOf(DataFileName(out.id)) + ".merge");
    (void)fs_.Remove(PathOf(HintFileName(out.id)) + ".merge");
  }
  Log("merge abandoned: " + why);
  merge_.reset();
}

// Copies live records of the obsolete files into *.merge files, in key
// order, keeping sequence numbers and timestamps, until `byte_budget` bytes
// are copied. Nothing is visible to recovery yet.
Status BitcaskEngine::CopyLiveRecords(MergeJob& job, uint64_t byte_budget) {
  uint64_t copied = 0;
  for (auto it = keydir_.lower_bound(job.cursor); it != keydir_.end(); ++it) {
    const KeyEntry& entry = it->second;
    if (!job.obsolete.count(entry.file_id)) continue;
    if (copied >= byte_budget) {
      job.cursor = it->first;
      return {};
    }
    auto bytes = files_[entry.file_id].file->ReadAt(
        entry.offset, RecordSize(it->first.size(), entry.value_size));
    if (!bytes) return Fault(bytes.error());
    DecodedRecord record = DecodeRecord(*bytes, 0);
    if (record.status != DecodeStatus::kOk || record.key != it->first) {
      // Bit rot in a live record: its value is gone already (Get reports
      // kCorruption). Drop the key rather than block every future merge.
      Log("merge drops unreadable record in " + PathOf(DataFileName(entry.file_id)) +
          " at offset " + std::to_string(entry.offset));
      job.moves.push_back(MergeMove{it->first, entry, std::nullopt});
      continue;
    }
    if (auto s = CopyRecord(job, it->first, entry, record, *bytes); !s) return s;
    copied += record.size;
  }
  job.copied_all = true;
  return {};
}

Status BitcaskEngine::CopyRecord(MergeJob& job, const std::string& key, const KeyEntry& entry,
                                 const DecodedRecord& record, const std::string& bytes) {
  if (job.outputs.empty() || job.outputs.back().size + record.size > options_.max_file_size) {
    if (!job.outputs.empty()) {
      if (auto s = FlushMergeOutput(job.outputs.back()); !s) return s;
    }
    MergeOutput out;
    out.id = next_file_id_++;
    auto file = fs_.OpenAppend(PathOf(DataFileName(out.id)) + ".merge");
    if (!file) return Fault(file.error());
    out.file = std::move(*file);
    job.outputs.push_back(std::move(out));
  }
  MergeOutput& out = job.outputs.back();
  uint32_t offset = static_cast<uint32_t>(out.size);
  out.pending.append(bytes);
  out.size += record.size;
  out.entries.push_back(RecordEntry{record.seq, record.timestamp_ms, offset, entry.value_size,
                                    record.flags, key});
  job.moves.push_back(MergeMove{key, entry, KeyEntry{out.id, offset, entry.value_size, entry.seq}});
  if (out.pending.size() >= kOutputBufferBytes) return FlushMergeOutput(out);
  return {};
}

Status BitcaskEngine::FlushMergeOutput(MergeOutput& out) {
  if (out.pending.empty()) return {};
  if (auto s = out.file->Append(out.pending); !s) return Fault(s.error());
  out.pending.clear();
  return {};
}

// Makes the outputs and their hints durable, then writes the manifest and
// renames it into place (made durable by CommitMerge's directory sync).
Status BitcaskEngine::SealMergeOutputs(MergeJob& job) {
  for (MergeOutput& out : job.outputs) {
    job.manifest.outputs.push_back(out.id);
    if (auto s = FlushMergeOutput(out); !s) return s;
    if (auto s = out.file->Sync(); !s) return Fault(s.error());
    auto hint = fs_.OpenAppend(PathOf(HintFileName(out.id)) + ".merge");
    if (!hint) return Fault(hint.error());
    if (auto s = (*hint)->Append(EncodeHint(out.entries, out.size)); !s) return Fault(s.error());
    if (auto s = (*hint)->Sync(); !s) return Fault(s.error());
  }
  if (auto s = fs_.SyncDir(dir_); !s) return Fault(s.error());
  // Writes made during the merge may supersede records the commit deletes:
  // they must be durable first, or a crash would lose both versions.
  if (auto s = SyncActive(); !s) return s;
  std::string tmp = PathOf(kMergeManifestName) + ".tmp";
  auto file = fs_.OpenAppend(tmp);
  if (!file) return Fault(file.error());
  if (auto s = (*file)->Append(EncodeMergeManifest(job.manifest)); !s) return Fault(s.error());
  if (auto s = (*file)->Sync(); !s) return Fault(s.error());
  if (auto s = fs_.Rename(tmp, PathOf(kMergeManifestName)); !s) return Fault(s.error());
  return {};
}

Status BitcaskEngine::CommitMerge(MergeJob& job) {
  if (auto s = fs_.SyncDir(dir_); !s) {
    // The rename may or may not be durable: only recovery can tell.
    failed_ = Error{Errc::kIo, "merge commit uncertain: " + s.error().message};
    return MakeError(*failed_);
  }
  // Committed. Switch the key directory over (keys written since they were
  // copied keep their newer location), then finish on disk: the same steps
  // recovery takes if we crash from here on.
  std::map<uint32_t, uint64_t> live;
  for (const MergeMove& move : job.moves) {
    auto it = keydir_.find(move.key);
    if (it == keydir_.end() || it->second.file_id != move.from.file_id ||
        it->second.offset != move.from.offset) {
      continue;
    }
    if (move.to) {
      it->second = *move.to;
      live[move.to->file_id] += RecordSize(move.key.size(), move.to->value_size);
    } else {
      keydir_.erase(it);
    }
  }
  for (uint32_t id : job.manifest.obsolete) files_.erase(id);
  for (MergeOutput& out : job.outputs) {
    files_[out.id] = DataFile{std::move(out.file), out.size, live[out.id]};
  }
  if (auto s = FinishCommittedMerge(); !s) {
    failed_ = Error{Errc::kIo, "merge finish failed (reopen completes it): " + s.error().message};
    return MakeError(*failed_);
  }
  Log("merged " + std::to_string(job.manifest.obsolete.size()) + " files into " +
      std::to_string(job.manifest.outputs.size()));
  return {};
}

}  // namespace estuary::persistence::bitcask
