#include "cluster-core/partition/partition_state.h"

#include <utility>

#include "base/bytes.h"

namespace estuary::partition {

namespace {
constexpr uint8_t kSnapshotMagic = 0xE5;
constexpr uint8_t kLegacyRegistryVersion = 1;

std::string_view View(const std::vector<uint8_t>& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}
std::vector<uint8_t> Vector(std::string_view bytes) { return {bytes.begin(), bytes.end()}; }
}  // namespace

PartitionState::PartitionState(std::function<int64_t()> wall_ms, QueueLimits queue_limits)
    : retained_(wall_ms), queues_(std::move(wall_ms), queue_limits) {}

PartitionMachine* PartitionState::MachineFor(uint8_t tag) {
  if (tag >= 0x01 && tag <= 0x0F) return &registry_;
  if (tag >= 0x10 && tag <= 0x1F) return &retained_;
  if (tag >= 0x20 && tag <= 0x2F) return &index_;
  if (tag >= 0x30 && tag <= 0x3F) return &sessions_;
  if (tag >= 0x40 && tag <= 0x4F) return &queues_;
  return nullptr;
}

std::string PartitionState::Apply(const raft::Entry& entry) {
  PartitionMachine* machine = entry.data.empty() ? nullptr : MachineFor(entry.data.front());
  if (machine == nullptr) {
    ++malformed_;
    return "0";
  }
  std::string result = machine->Apply(entry);
  if (machine == &registry_) {
    // A release that took effect (the session ended on its owner) or a
    // clean start's claim ends the replicated session.
    auto command = DecodeRegistryCommand(View(entry.data));
    if (const auto* release = command ? std::get_if<ReleaseClient>(&*command) : nullptr) {
      if (result == "1") sessions_.Drop(release->client);
    } else if (const auto* claim = command ? std::get_if<ClaimClient>(&*command) : nullptr) {
      if (claim->clean) sessions_.Drop(claim->client);
    }
  }
  return result;
}

std::string PartitionState::Query(std::string_view query) const {
  PartitionMachine* machine =
      query.empty() ? nullptr : const_cast<PartitionState*>(this)->MachineFor(static_cast<uint8_t>(query.front()));
  return machine == nullptr ? std::string() : static_cast<const PartitionMachine*>(machine)->Query(query);
}

std::vector<uint8_t> PartitionState::Snapshot() const {
  base::LittleEndianWriter out;
  out.U8(kSnapshotMagic);
  out.Bytes(registry_.Snapshot());
  out.Bytes(retained_.Snapshot());
  out.Bytes(index_.Snapshot());
  out.Bytes(sessions_.Snapshot());
  // Left out while no queue command was ever applied (the same state as
  // no section): a partition that holds no queues keeps the snapshot an
  // older binary restores, so a rolling upgrade can still send it.
  if (!queues_.pristine()) out.Bytes(queues_.Snapshot());
  return Vector(out.str());
}

bool PartitionState::Restore(const std::vector<uint8_t>& data) {
  if (data.empty()) {
    registry_ = ClientRegistry();
    index_ = RetainedIndex();
    return retained_.Restore({}) && sessions_.Restore({}) && queues_.Restore({});
  }
  if (data.front() == kLegacyRegistryVersion) {
    index_ = RetainedIndex();
    return registry_.Restore(data) && retained_.Restore({}) && sessions_.Restore({}) && queues_.Restore({});
  }
  base::LittleEndianReader in(View(data));
  if (in.U8() != kSnapshotMagic) return false;
  const std::vector<uint8_t> registry = Vector(in.Bytes());
  const std::vector<uint8_t> retained = Vector(in.Bytes());
  const std::vector<uint8_t> index = Vector(in.Bytes());
  std::vector<uint8_t> sessions;
  if (in.ok() && !in.done()) sessions = Vector(in.Bytes());
  std::vector<uint8_t> queues;
  if (in.ok() && !in.done()) queues = Vector(in.Bytes());
  if (!in.done()) return false;
  return registry_.Restore(registry) && retained_.Restore(retained) && index_.Restore(index) &&
         sessions_.Restore(sessions) && queues_.Restore(queues);
}

}  // namespace estuary::partition
