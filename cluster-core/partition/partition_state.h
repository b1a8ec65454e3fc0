#pragma once
// PartitionState: everything one partition holds (docs/partitions.md
// "What runs on them"), one machine per kind of state, an entry or query
// going to the machine its first byte names:
//   0x01-0x0F  the client-id registry (ClientRegistry)
//   0x10-0x1F  retained messages (RetainedMachine)
//   0x20-0x2F  the retained index (RetainedIndex; used in one partition)
//   0x30-0x3F  persistent sessions (SessionMachine)
//   0x40-0x4F  replicated message queues (QueueMachine)
// A registry release that takes effect also drops the client's session
// keys (the session ended on its owner).
// Snapshot: 0xE5, then each machine's snapshot as bytes in that order (a
// snapshot without the sessions' section, from before they were kept here,
// restores no sessions; one without the queues' section, no queues, and
// that section is written only once a queue command was applied, so a
// partition without queues keeps the older format). A snapshot from before
// there was more than the registry (its first byte is the registry's
// version, 1) restores the registry alone.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster-core/partition/client_registry.h"
#include "cluster-core/partition/queue_machine.h"
#include "cluster-core/partition/retained_machine.h"
#include "cluster-core/partition/session_machine.h"

namespace estuary::partition {

class PartitionState final : public PartitionMachine {
 public:
  explicit PartitionState(std::function<int64_t()> wall_ms, QueueLimits queue_limits = {});

  std::string Apply(const raft::Entry& entry) override;
  std::vector<uint8_t> Snapshot() const override;
  bool Restore(const std::vector<uint8_t>& data) override;
  std::string Query(std::string_view query) const override;

  const ClientRegistry& registry() const { return registry_; }
  const RetainedMachine& retained() const { return retained_; }
  const RetainedIndex& retained_index() const { return index_; }
  const SessionMachine& sessions() const { return sessions_; }
  const QueueMachine& queues() const { return queues_; }
  void set_queue_hooks(QueueApplyHooks hooks) { queues_.set_hooks(std::move(hooks)); }
  uint64_t malformed() const { return malformed_; }

 private:
  PartitionMachine* MachineFor(uint8_t tag);
  ClientRegistry registry_;
  RetainedMachine retained_;
  RetainedIndex index_;
  SessionMachine sessions_{registry_};
  QueueMachine queues_;
  uint64_t malformed_ = 0;
};

}  // namespace estuary::partition
