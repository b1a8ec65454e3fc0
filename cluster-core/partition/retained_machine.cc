#include "cluster-core/partition/retained_machine.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "base/bytes.h"
#include "cluster-core/store/record_codec.h"
#include "model/hlc.h"

namespace estuary::partition {

namespace {

constexpr uint8_t kPut = 0x10;
constexpr uint8_t kMatch = 0x10;
constexpr uint8_t kIndexAdd = 0x20;
constexpr uint8_t kIndexList = 0x20;
constexpr uint8_t kIndexTouch = 0x21;
constexpr uint8_t kSnapshotVersion = 1;

}  // namespace

std::string EncodeRetainedPut(const Message& message) {
  std::string out(1, static_cast<char>(kPut));
  out += core::store::EncodeMessage(message);
  return out;
}

std::string EncodeRetainedMatch(std::string_view filter) {
  std::string out(1, static_cast<char>(kMatch));
  out += filter;
  return out;
}

std::optional<std::vector<MessagePtr>> DecodeRetainedMatchResult(std::string_view bytes) {
  base::LittleEndianReader in(bytes);
  const uint32_t count = in.U32();
  std::vector<MessagePtr> messages;
  for (uint32_t i = 0; i < count && in.ok(); ++i) {
    auto message = core::store::DecodeMessage(in.Bytes());
    if (!message) return std::nullopt;
    messages.push_back(std::move(*message));
  }
  if (!in.done()) return std::nullopt;
  return messages;
}

RetainedMachine::RetainedMachine(std::function<int64_t()> wall_ms, int64_t tombstone_ttl_ms)
    : wall_ms_(std::move(wall_ms)), tombstone_ttl_ms_(tombstone_ttl_ms) {
  store_.set_tombstone_ttl_ms(tombstone_ttl_ms_);
}

std::string RetainedMachine::Apply(const raft::Entry& entry) {
  // Sweeps follow entry time, so every replica sweeps at the same entries.
  const uint64_t entry_ms = HybridLogicalClock::PhysicalMs(entry.timestamp);
  if (entry_ms >= last_sweep_ms_ + kSweepEveryMs) {
    store_.ExpireBefore(static_cast<int64_t>(entry_ms));
    last_sweep_ms_ = entry_ms;
  }
  std::string_view bytes(reinterpret_cast<const char*>(entry.data.data()), entry.data.size());
  if (bytes.empty() || static_cast<uint8_t>(bytes.front()) != kPut) {
    ++malformed_;
    return "0";
  }
  auto message = core::store::DecodeMessage(bytes.substr(1));
  if (!message || (*message)->topic.empty()) {
    ++malformed_;
    return "0";
  }
  return store_.Apply(*message) ? "1" : "0";
}

std::vector<uint8_t> RetainedMachine::Snapshot() const {
  base::LittleEndianWriter out;
  out.U8(kSnapshotVersion);
  out.U64(last_sweep_ms_);
  uint32_t count = 0;
  store_.ForEach([&count](const MessagePtr&) { ++count; });
  out.U32(count);
  store_.ForEach([&out](const MessagePtr& message) { out.Bytes(core::store::EncodeMessage(*message)); });
  const std::string& bytes = out.str();
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

bool RetainedMachine::Restore(const std::vector<uint8_t>& data) {
  base::LittleEndianReader in(std::string_view(reinterpret_cast<const char*>(data.data()), data.size()));
  core::RetainedStore restored;
  restored.set_tombstone_ttl_ms(tombstone_ttl_ms_);
  uint64_t last_sweep_ms = 0;
  if (!data.empty()) {
    if (in.U8() != kSnapshotVersion) return false;
    last_sweep_ms = in.U64();
    const uint32_t count = in.U32();
    for (uint32_t i = 0; i < count && in.ok(); ++i) {
      auto message = core::store::DecodeMessage(in.Bytes());
      if (!message) return false;
      restored.Apply(*message);
    }
    if (!in.done()) return false;
  }
  store_ = std::move(restored);
  last_sweep_ms_ = last_sweep_ms;
  return true;
}

std::string RetainedMachine::Query(std::string_view query) const {
  base::LittleEndianWriter out;
  if (query.empty() || static_cast<uint8_t>(query.front()) != kMatch) {
    out.U32(0);
    return out.Take();
  }
  const int64_t now = wall_ms_ ? wall_ms_() : 0;
  std::vector<const Message*> matched;
  store_.Match(query.substr(1), [&matched, now](const MessagePtr& message) {
    if (message->properties.expiry_at_ms && *message->properties.expiry_at_ms <= now) return;
    matched.push_back(message.get());
  });
  out.U32(static_cast<uint32_t>(matched.size()));
  for (const Message* message : matched) out.Bytes(core::store::EncodeMessage(*message));
  return out.Take();
}

std::string EncodeRetainedIndexAdd(PartitionId partition) {
  base::LittleEndianWriter out;
  out.U8(kIndexAdd);
  out.U32(partition);
  return out.Take();
}

std::string EncodeRetainedIndexTouch() { return std::string(1, static_cast<char>(kIndexTouch)); }

std::string EncodeRetainedIndexList() { return std::string(1, static_cast<char>(kIndexList)); }

std::optional<std::vector<PartitionId>> DecodeRetainedIndexList(std::string_view bytes) {
  base::LittleEndianReader in(bytes);
  const uint32_t count = in.U32();
  std::vector<PartitionId> partitions;
  for (uint32_t i = 0; i < count && in.ok(); ++i) partitions.push_back(in.U32());
  if (!in.done()) return std::nullopt;
  return partitions;
}

std::string RetainedIndex::Apply(const raft::Entry& entry) {
  if (entry.data.size() == 1 && entry.data.front() == kIndexTouch) return "1";
  base::LittleEndianReader in(std::string_view(reinterpret_cast<const char*>(entry.data.data()), entry.data.size()));
  const uint8_t tag = in.U8();
  const PartitionId partition = in.U32();
  if (tag != kIndexAdd || !in.done()) {
    ++malformed_;
    return "0";
  }
  return partitions_.insert(partition).second ? "1" : "0";
}

std::vector<uint8_t> RetainedIndex::Snapshot() const {
  base::LittleEndianWriter out;
  out.U8(kSnapshotVersion);
  out.U32(static_cast<uint32_t>(partitions_.size()));
  for (PartitionId partition : partitions_) out.U32(partition);
  const std::string& bytes = out.str();
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

bool RetainedIndex::Restore(const std::vector<uint8_t>& data) {
  std::set<PartitionId> restored;
  if (!data.empty()) {
    base::LittleEndianReader in(std::string_view(reinterpret_cast<const char*>(data.data()), data.size()));
    if (in.U8() != kSnapshotVersion) return false;
    const uint32_t count = in.U32();
    for (uint32_t i = 0; i < count && in.ok(); ++i) restored.insert(in.U32());
    if (!in.done()) return false;
  }
  partitions_ = std::move(restored);
  return true;
}

std::string RetainedIndex::Query(std::string_view query) const {
  base::LittleEndianWriter out;
  if (query.size() != 1 || static_cast<uint8_t>(query.front()) != kIndexList) {
    out.U32(0);
    return out.Take();
  }
  out.U32(static_cast<uint32_t>(partitions_.size()));
  for (PartitionId partition : partitions_) out.U32(partition);
  return out.Take();
}

}  // namespace estuary::partition
