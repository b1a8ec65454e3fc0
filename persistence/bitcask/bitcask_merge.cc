// BitcaskEngine::Merge and the merge manifest (docs/bitcask_format.md,
// "Merge").
#include <algorithm>
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
  std::vector<uint32_t> ids;
  for (const auto& [id, file] : files_) {
    if (id != active_id_) ids.push_back(id);
  }
  return StartMergeOf(std::move(ids));
}

Status BitcaskEngine::StartMergeOf(std::vector<uint32_t> ids) {
  if (auto s = CheckWritable(); !s) return s;
  if (merge_ || ids.empty()) return {};
  auto job = std::make_unique<MergeJob>();
  for (uint32_t id : ids) {
    job->manifest.obsolete.push_back(id);
    job->obsolete.insert(id);
  }
  // Files outside the merge only get newer records from now on (and fewer
  // files), so this bound stays safe until the commit.
  job->keep_tombstones_from = OldestSeqOutside(job->obsolete);
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
  if (status && merge_->copied_all) status = CopyTombstones(*merge_);
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
      job.cursor = std::string(it->first.view());
      return {};
    }
    auto bytes = files_[entry.file_id].file->ReadAt(
        entry.offset, RecordSize(it->first.size(), entry.value_size));
    if (!bytes) return Fault(bytes.error());
    DecodedRecord record = DecodeRecord(*bytes, 0);
    if (record.status != DecodeStatus::kOk || record.key != it->first.view()) {
      // Bit rot in a live record: its value is gone already (Get reports
      // kCorruption). Drop the key rather than block every future merge.
      Log("merge drops unreadable record in " + PathOf(DataFileName(entry.file_id)) +
          " at offset " + std::to_string(entry.offset));
      job.moves.push_back(MergeMove{std::string(it->first.view()), entry, std::nullopt});
      continue;
    }
    if (auto s = CopyRecord(job, it->first, entry, record, *bytes); !s) return s;
    copied += record.size;
  }
  job.copied_all = true;
  return {};
}

Status BitcaskEngine::CopyRecord(MergeJob& job, std::string_view key, const KeyEntry& entry,
                                 const DecodedRecord& record, const std::string& bytes) {
  auto output = OutputFor(job, record.size);
  if (!output) return MakeError(output.error());
  MergeOutput& out = **output;
  uint32_t offset = static_cast<uint32_t>(out.size);
  out.pending.append(bytes);
  out.size += record.size;
  out.min_seq = std::min(out.min_seq, record.seq);
  out.entries.push_back(RecordEntry{record.seq, record.timestamp_ms, offset, entry.value_size,
                                    record.flags, std::string(key)});
  job.moves.push_back(MergeMove{std::string(key), entry, KeyEntry{out.id, offset, entry.value_size, entry.seq}});
  if (out.pending.size() >= kOutputBufferBytes) return FlushMergeOutput(out);
  return {};
}

Result<BitcaskEngine::MergeOutput*> BitcaskEngine::OutputFor(MergeJob& job,
                                                             uint64_t record_size) {
  if (job.outputs.empty() || job.outputs.back().size + record_size > options_.max_file_size) {
    if (!job.outputs.empty()) {
      if (auto s = FlushMergeOutput(job.outputs.back()); !s) return MakeError(s.error());
    }
    MergeOutput out;
    out.id = next_file_id_++;
    auto file = fs_.OpenAppend(PathOf(DataFileName(out.id)) + ".merge");
    if (!file) return MakeError(Fault(file.error()).error());
    out.file = std::move(*file);
    job.outputs.push_back(std::move(out));
  }
  return &job.outputs.back();
}

// A merge of some files only (not all immutable ones) keeps their tombstones
// that may still delete a put in a file left out: those not older than every
// record outside the merge, unless a newer put of the key supersedes them.
Status BitcaskEngine::CopyTombstones(MergeJob& job) {
  if (job.copied_tombstones) return {};
  job.copied_tombstones = true;
  for (uint32_t id : job.manifest.obsolete) {
    auto file = files_.find(id);
    if (file == files_.end() || file->second.max_tombstone_seq < job.keep_tombstones_from) {
      continue;
    }
    auto entries = ReadEntries(id);
    if (!entries) return MakeError(entries.error());
    for (RecordEntry& entry : *entries) {
      if (!(entry.flags & kTombstone) || entry.seq < job.keep_tombstones_from) continue;
      auto live = keydir_.find(entry.key);
      if (live != keydir_.end() && live->second.seq > entry.seq) continue;
      uint64_t size = RecordSize(entry.key.size(), 0);
      auto output = OutputFor(job, size);
      if (!output) return MakeError(output.error());
      MergeOutput& out = **output;
      uint32_t offset = static_cast<uint32_t>(out.size);
      AppendRecord(&out.pending, entry.seq, entry.timestamp_ms, kTombstone, entry.key, {});
      out.size += size;
      out.min_seq = std::min(out.min_seq, entry.seq);
      out.max_tombstone_seq = std::max(out.max_tombstone_seq, entry.seq);
      out.tombstone_bytes += size;
      entry.offset = offset;
      entry.value_size = 0;
      out.entries.push_back(std::move(entry));
      if (out.pending.size() >= kOutputBufferBytes) {
        if (auto s = FlushMergeOutput(out); !s) return s;
      }
    }
  }
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
  // Files dropped before must be gone for good first: a tombstone this merge
  // leaves out may delete a put in one of them.
  if (auto failure = janitor_->Drain()) return Fail(Errc::kIo, *failure);
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
    DataFile& file = files_[out.id];
    file = DataFile{std::move(out.file), out.size, live[out.id]};
    file.min_seq = out.min_seq;
    file.max_tombstone_seq = out.max_tombstone_seq;
    file.tombstone_bytes = out.tombstone_bytes;
    file.live_at_last_pass = file.live_bytes;
  }
  // The outputs' renames and the inputs' removals: the janitor's (recovery
  // finishes them after a crash).
  io::FileSystem* fs = &fs_;
  janitor_->Submit([fs, dir = dir_]() -> std::optional<std::string> {
    if (auto s = FinishMergeOnDisk(*fs, dir); !s) return "merge finish: " + s.error().message;
    return std::nullopt;
  });
  if (auto s = CheckJanitor(); !s) return s;
  Log("merged " + std::to_string(job.manifest.obsolete.size()) + " files into " +
      std::to_string(job.manifest.outputs.size()));
  return {};
}

}  // namespace estuary::persistence::bitcask
