#include "cluster-core/raft/raft_store.h"

#include <utility>

namespace estuary::raft {

namespace {

namespace pe = persistence;
using persistence::Fail;

void PutU64(std::string& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(value >> (8 * i)));
}

void PutBytes(std::string& out, const std::vector<uint8_t>& bytes) {
  PutU64(out, bytes.size());
  out.append(bytes.begin(), bytes.end());
}

// Reads little-endian fields off the front of a byte string; any read past
// the end marks the reader bad and returns zeros.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  uint64_t U64() {
    if (bytes_.size() < 8) return Bad();
    uint64_t value = 0;
    for (int i = 0; i < 8; ++i) value |= uint64_t{static_cast<uint8_t>(bytes_[i])} << (8 * i);
    bytes_.remove_prefix(8);
    return value;
  }
  std::vector<uint8_t> Bytes() {
    const uint64_t size = U64();
    if (size > bytes_.size()) return Bad(), std::vector<uint8_t>{};
    std::vector<uint8_t> out(bytes_.begin(), bytes_.begin() + static_cast<std::ptrdiff_t>(size));
    bytes_.remove_prefix(size);
    return out;
  }
  bool ok() const { return ok_; }
  bool done() const { return ok_ && bytes_.empty(); }

 private:
  uint64_t Bad() {
    ok_ = false;
    bytes_ = {};
    return 0;
  }
  std::string_view bytes_;
  bool ok_ = true;
};

std::string EncodeHardState(const HardState& state) {
  std::string out;
  PutU64(out, state.term);
  PutU64(out, state.vote);
  PutU64(out, state.commit);
  return out;
}

std::optional<HardState> DecodeHardState(std::string_view bytes) {
  Reader reader(bytes);
  HardState state{reader.U64(), reader.U64(), reader.U64()};
  if (!reader.done()) return std::nullopt;
  return state;
}

std::optional<Config> DecodeConfigBytes(const std::vector<uint8_t>& bytes) {
  // EncodeConfig: voters then learners, each a count and ids.
  std::string_view view(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  Reader reader(view);
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
  PutU64(out, entry.term);
  PutU64(out, entry.index);
  PutU64(out, entry.timestamp);
  PutU64(out, static_cast<uint64_t>(entry.type));
  PutU64(out, entry.write_id.producer);
  PutU64(out, entry.write_id.sequence);
  PutBytes(out, entry.data);
  return out;
}

std::optional<Entry> DecodeEntry(std::string_view bytes) {
  Reader reader(bytes);
  Entry entry;
  entry.term = reader.U64();
  entry.index = reader.U64();
  entry.timestamp = reader.U64();
  const uint64_t type = reader.U64();
  entry.write_id.producer = reader.U64();
  entry.write_id.sequence = reader.U64();
  entry.data = reader.Bytes();
  if (!reader.done() || type > static_cast<uint64_t>(EntryType::kNoop)) return std::nullopt;
  entry.type = static_cast<EntryType>(type);
  if (entry.type == EntryType::kConfig && !DecodeConfigBytes(entry.data)) return std::nullopt;
  return entry;
}

std::string EncodeSnapshot(const Snapshot& snapshot) {
  std::string out;
  PutU64(out, snapshot.index);
  PutU64(out, snapshot.term);
  PutU64(out, snapshot.timestamp);
  PutBytes(out, EncodeConfig(snapshot.config));
  PutU64(out, snapshot.dedup.size());
  for (const DedupRecord& record : snapshot.dedup) {
    PutU64(out, record.id.producer);
    PutU64(out, record.id.sequence);
    PutU64(out, record.timestamp);
  }
  PutBytes(out, snapshot.data);
  return out;
}

std::optional<Snapshot> DecodeSnapshot(std::string_view bytes) {
  Reader reader(bytes);
  Snapshot snapshot;
  snapshot.index = reader.U64();
  snapshot.term = reader.U64();
  snapshot.timestamp = reader.U64();
  std::optional<Config> config = DecodeConfigBytes(reader.Bytes());
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
  snapshot.data = reader.Bytes();
  if (!reader.done()) return std::nullopt;
  return snapshot;
}

RaftStore::RaftStore(persistence::StorageEngine& engine, std::string group)
    : engine_(engine), prefix_("raft/" + std::move(group) + "/") {}

// Big-endian, so the engine's bytewise order is numeric order.
std::string RaftStore::EntryKey(Index index) const {
  std::string key = EntryPrefix();
  for (int i = 7; i >= 0; --i) key.push_back(static_cast<char>(index >> (8 * i)));
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
