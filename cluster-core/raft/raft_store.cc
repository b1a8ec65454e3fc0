#include "cluster-core/raft/raft_store.h"

#include <utility>

#include "base/bytes.h"

namespace estuary::raft {

namespace {

namespace pe = persistence;
using persistence::Fail;

// Little-endian u64 fields; byte strings are a u64 length and the bytes.
void PutBytes(std::string& out, const std::vector<uint8_t>& bytes) {
  base::AppendLittle<uint64_t>(out, bytes.size());
  out.append(bytes.begin(), bytes.end());
}

std::vector<uint8_t> ReadBytes(base::LittleEndianReader& reader) {
  const std::string_view bytes = reader.Raw(reader.U64());
  return {bytes.begin(), bytes.end()};
}

std::string EncodeHardState(const HardState& state) {
  std::string out;
  base::AppendLittle<uint64_t>(out, state.term);
  base::AppendLittle<uint64_t>(out, state.vote);
  base::AppendLittle<uint64_t>(out, state.commit);
  return out;
}

std::optional<HardState> DecodeHardState(std::string_view bytes) {
  base::LittleEndianReader reader(bytes);
  HardState state{reader.U64(), reader.U64(), reader.U64()};
  if (!reader.done()) return std::nullopt;
  return state;
}

std::optional<Config> DecodeConfigBytes(const std::vector<uint8_t>& bytes) {
  // EncodeConfig: voters then learners, each a count and ids.
  std::string_view view(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  base::LittleEndianReader reader(view);
  Config config;
  for (auto* ids : {&config.voters, &config.learners}) {
    const uint64_t count = reader.U64();
    if (count > bytes.size() / 8) return std::nullopt;
    for (uint64_t i = 0; i < count; ++i) ids->push_back(reader.U64());
  }
  if (!reader.done()) return std::nullopt;
  return config;
}

}  // namespace

std::string EncodeEntry(const Entry& entry) {
  std::string out;
  base::AppendLittle<uint64_t>(out, entry.term);
  base::AppendLittle<uint64_t>(out, entry.index);
  base::AppendLittle<uint64_t>(out, entry.timestamp);
  base::AppendLittle<uint64_t>(out, static_cast<uint64_t>(entry.type));
  base::AppendLittle<uint64_t>(out, entry.write_id.producer);
  base::AppendLittle<uint64_t>(out, entry.write_id.sequence);
  PutBytes(out, entry.data);
  return out;
}

std::optional<Entry> DecodeEntry(std::string_view bytes) {
  base::LittleEndianReader reader(bytes);
  Entry entry;
  entry.term = reader.U64();
  entry.index = reader.U64();
  entry.timestamp = reader.U64();
  const uint64_t type = reader.U64();
  entry.write_id.producer = reader.U64();
  entry.write_id.sequence = reader.U64();
  entry.data = ReadBytes(reader);
  if (!reader.done() || type > static_cast<uint64_t>(EntryType::kNoop)) return std::nullopt;
  entry.type = static_cast<EntryType>(type);
  if (entry.type == EntryType::kConfig && !DecodeConfigBytes(entry.data)) return std::nullopt;
  return entry;
}

std::string EncodeSnapshot(const Snapshot& snapshot) {
  std::string out;
  base::AppendLittle<uint64_t>(out, snapshot.index);
  base::AppendLittle<uint64_t>(out, snapshot.term);
  base::AppendLittle<uint64_t>(out, snapshot.timestamp);
  PutBytes(out, EncodeConfig(snapshot.config));
  base::AppendLittle<uint64_t>(out, snapshot.dedup.size());
  for (const DedupRecord& record : snapshot.dedup) {
    base::AppendLittle<uint64_t>(out, record.id.producer);
    base::AppendLittle<uint64_t>(out, record.id.sequence);
    base::AppendLittle<uint64_t>(out, record.timestamp);
  }
  PutBytes(out, snapshot.data);
  return out;
}

std::optional<Snapshot> DecodeSnapshot(std::string_view bytes) {
  base::LittleEndianReader reader(bytes);
  Snapshot snapshot;
  snapshot.index = reader.U64();
  snapshot.term = reader.U64();
  snapshot.timestamp = reader.U64();
  std::optional<Config> config = DecodeConfigBytes(ReadBytes(reader));
  const uint64_t records = reader.U64();
  if (!config || records > bytes.size() / 24) return std::nullopt;
  snapshot.config = std::move(*config);
  for (uint64_t i = 0; i < records; ++i) {
    DedupRecord record;
    record.id.producer = reader.U64();
    record.id.sequence = reader.U64();
    record.timestamp = reader.U64();
    snapshot.dedup.push_back(record);
  }
  snapshot.data = ReadBytes(reader);
  if (!reader.done()) return std::nullopt;
  return snapshot;
}

RaftStore::RaftStore(persistence::StorageEngine& engine, std::string group)
    : engine_(engine), prefix_("raft/" + std::move(group) + "/") {}

// Big-endian, so the engine's bytewise order is numeric order.
std::string RaftStore::EntryKey(Index index) const {
  std::string key = EntryPrefix();
  base::AppendBig<uint64_t>(key, index);
  return key;
}

persistence::Result<Storage> RaftStore::Load() {
  Storage storage;
  auto hard = engine_.Get(HardStateKey());
  if (!hard) return MakeError(hard.error());
  if (*hard) {
    auto state = DecodeHardState(**hard);
    if (!state) return Fail(pe::Errc::kCorruption, "raft hard state");
    storage.hard_state = *state;
  }
  auto snap = engine_.Get(SnapshotKey());
  if (!snap) return MakeError(snap.error());
  if (*snap) {
    auto snapshot = DecodeSnapshot(**snap);
    if (!snapshot) return Fail(pe::Errc::kCorruption, "raft snapshot");
    storage.snapshot = std::move(*snapshot);
  }
  bool bad = false;
  Index expected = storage.snapshot.index + 1;
  auto scanned = engine_.Scan(EntryPrefix(), EntryKey(expected),
                              [&](std::string_view, std::string_view value) {
                                auto entry = DecodeEntry(value);
                                if (!entry || entry->index != expected) {
                                  bad = true;
                                  return false;
                                }
                                storage.entries.push_back(std::move(*entry));
                                ++expected;
                                return true;
                              });
  if (!scanned) return MakeError(scanned.error());
  if (bad) return Fail(pe::Errc::kCorruption, "raft log entry missing or malformed");
  first_ = storage.snapshot.index + 1;
  last_ = expected - 1;
  loaded_ = true;
  return storage;
}

void RaftStore::DeleteEntries(persistence::WriteBatch& batch, Index from, Index to) const {
  for (Index index = from; index <= to; ++index) batch.Delete(EntryKey(index));
}

persistence::Status RaftStore::Save(const Ready& ready) {
  if (!loaded_) return Fail(pe::Errc::kInvalidArgument, "RaftStore::Save before Load");
  persistence::WriteBatch batch;
  if (ready.hard_state) batch.Put(HardStateKey(), EncodeHardState(*ready.hard_state));
  if (ready.snapshot) {
    batch.Put(SnapshotKey(), EncodeSnapshot(*ready.snapshot));
    const Index drop_to = ready.restore_snapshot ? last_ : std::min(last_, ready.snapshot->index);
    DeleteEntries(batch, first_, drop_to);
    first_ = ready.snapshot->index + 1;
    last_ = std::max(last_, ready.snapshot->index);
    if (ready.restore_snapshot) last_ = ready.snapshot->index;
  }
  if (!ready.entries.empty()) {
    const Index from = ready.entries.front().index;
    if (from < first_ || from > last_ + 1) {
      return Fail(pe::Errc::kInvalidArgument, "raft entries do not follow the stored log");
    }
    for (const Entry& entry : ready.entries) batch.Put(EntryKey(entry.index), EncodeEntry(entry));
    const Index new_last = ready.entries.back().index;
    DeleteEntries(batch, new_last + 1, last_);  // a truncated suffix
    last_ = new_last;
  }
  if (batch.empty()) return {};
  return engine_.Write(batch);
}

}  // namespace estuary::raft
