// PartitionHost's planned leadership moves (issue 7 point 6,
// docs/partitions.md "Planned leadership moves"): which node should lead
// a partition (the pin, the placement, drains), the handover, the
// operator's requests, and the release of writes a handover held.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "cluster-core/partition/partition_host.h"
#include "cluster-core/partition/partition_replica.h"

namespace estuary::partition {

namespace {

bool Contains(const std::vector<NodeId>& nodes, raft::NodeId node) {
  return std::find(nodes.begin(), nodes.end(), node) != nodes.end();
}

}  // namespace

// Caught up: holds the commit index, or is streaming (replicate state)
// within kCatchUpSlack entries of it. Under steady writes a follower
// outside the commit quorum trails by the appends in flight; a handover to
// it holds writes only while those few entries reach it.
bool PartitionHost::CaughtUp(const raft::Raft& raft, NodeId node) const {
  constexpr raft::Index kCatchUpSlack = 256;
  if (node == config_.self) return true;
  auto it = raft.progress().find(node);
  if (it == raft.progress().end()) return false;
  const raft::Progress& progress = it->second;
  return progress.match >= raft.commit() ||
         (progress.state == raft::Progress::State::kReplicate && progress.match + kCatchUpSlack >= raft.commit());
}

// A voter that is a member and not draining (this node: not draining).
bool PartitionHost::MayLead(const raft::Raft& raft, NodeId node) const {
  const meta::MetaState& state = meta_.state();
  return node != 0 && raft.config().IsVoter(node) && state.members().count(node) != 0 && !state.IsDraining(node);
}

// Where this leader wants leadership to be: the pin if it may lead, else
// the placement's first replica if it may; 0 or self to stay. A wanted
// node that has not caught up yet is waited for (the handover would hold
// writes for the whole catch-up), unless this node drains: then any
// caught-up voter that may lead will do, placement order first.
NodeId PartitionHost::WantedLeader(PartitionId partition, const raft::Raft& raft,
                                   const std::vector<NodeId>& placed) const {
  const NodeId pin = meta_.state().LeaderPinOf(partition);
  NodeId wanted = 0;
  if (MayLead(raft, pin)) {
    wanted = pin;
  } else if (MayLead(raft, placed.front())) {
    wanted = placed.front();
  }
  if (wanted == config_.self) return 0;
  if (wanted != 0 && CaughtUp(raft, wanted)) return wanted;
  if (!meta_.state().IsDraining(config_.self)) return 0;
  return AnotherLeader(raft, &placed);
}

// Another caught-up voter that may lead: the placement's order first, then
// the config's; 0 if none.
NodeId PartitionHost::AnotherLeader(const raft::Raft& raft, const std::vector<NodeId>* placed) const {
  std::vector<NodeId> candidates;
  if (placed != nullptr) candidates = *placed;
  for (raft::NodeId voter : raft.config().voters) {
    if (!Contains(candidates, static_cast<NodeId>(voter))) candidates.push_back(static_cast<NodeId>(voter));
  }
  for (NodeId node : candidates) {
    if (node != config_.self && MayLead(raft, node) && CaughtUp(raft, node)) return node;
  }
  return 0;
}

// The preferred leader takes over once it can without a gap (a leader the
// placement no longer names hands over the same way before it goes). A
// leader settles first (leader_settle_ms) unless it drains: the pin that
// brought leadership here may not have reached this node's metadata copy.
void PartitionHost::ManageLeadership(PartitionId partition, Replica& replica, const std::vector<NodeId>& placed) {
  const raft::Raft& raft = replica.group->raft();
  const NodeId target = WantedLeader(partition, raft, placed);
  if (target == 0) return;
  const bool draining = meta_.state().IsDraining(config_.self);
  if (!draining && host_.loop().NowMs() - replica.led_since_ms < config_.leader_settle_ms) return;
  if (!replica.group->TransferLeadership(target)) return;  // one already under way
  WatchStranded();
  ++(draining ? counters_.drain_transfers : counters_.leader_transfers);
  spdlog::info("partition {}: handing leadership to node {}{}", partition, target, draining ? " (draining)" : "");
}

void PartitionHost::ProposeMeta(meta::Command command, std::string what) {
  meta_.group().Propose(meta::EncodeCommand(command), {},
                        scope_.Guard([what = std::move(what)](meta::ProposeResult result) {
                          if (result.status == meta::ProposeStatus::kOk) return;
                          spdlog::warn("partition: {} not committed (status {})", what,
                                       static_cast<int>(result.status));
                        }));
}

Expected<TransferAccepted, TransferRefusal> PartitionHost::RequestLeader(PartitionId partition, NodeId to) {
  auto refuse = [](TransferError error, std::string message) {
    return MakeError(TransferRefusal{error, std::move(message), 0, {}});
  };
  if (partition >= partitions()) {
    return refuse(TransferError::kUnknownPartition,
                  fmt::format("unknown partition {} (the cluster has {})", partition, partitions()));
  }
  const auto& open = meta_.state().open_partitions();
  auto record = open.find(partition);
  if (record == open.end()) {
    return refuse(TransferError::kNotOpen, fmt::format("partition {} is not open (nothing was written to it)", partition));
  }
  auto local = replicas_.find(partition);
  if (local == replicas_.end()) {
    TransferRefusal refusal{TransferError::kNoReplica,
                            fmt::format("node {} holds no replica of partition {}", config_.self, partition), 0, {}};
    if (const std::vector<NodeId>* placed = PlacedReplicas(partition)) refusal.replicas = *placed;
    for (NodeId node : record->second.replicas) {
      if (!Contains(refusal.replicas, node)) refusal.replicas.push_back(node);
    }
    return MakeError(std::move(refusal));
  }
  const raft::Raft& raft = local->second->group->raft();
  if (raft.role() != raft::Role::kLeader) {
    const auto leader = static_cast<NodeId>(raft.leader());
    return MakeError(TransferRefusal{
        TransferError::kNotLeader,
        leader == 0 ? fmt::format("partition {} has no leader now (an election is under way)", partition)
                    : fmt::format("node {} leads partition {}, not node {}", leader, partition, config_.self),
        leader,
        {}});
  }
  if (to == 0) to = AnotherLeader(raft, PlacedReplicas(partition));
  if (to == 0) {
    return refuse(TransferError::kNoTarget,
                  fmt::format("partition {} has no other caught-up voter that is not draining", partition));
  }
  if (!raft.config().IsVoter(to) || meta_.state().members().count(to) == 0) {
    return refuse(TransferError::kNotVoter, fmt::format("node {} is not a voter of partition {} (voters {})", to,
                                                        partition, fmt::join(raft.config().voters, ",")));
  }
  if (meta_.state().IsDraining(to)) {
    return refuse(TransferError::kDraining, fmt::format("node {} is being drained", to));
  }
  if (!CaughtUp(raft, to)) {
    auto progress = raft.progress().find(to);
    return refuse(TransferError::kNotCaughtUp,
                  fmt::format("node {} has not caught up on partition {} (match {}, commit {})", to, partition,
                              progress == raft.progress().end() ? 0 : progress->second.match, raft.commit()));
  }
  ++counters_.transfer_requests;
  ProposeMeta(meta::PartitionLeaderPin{partition, to}, fmt::format("leader pin {} -> node {}", partition, to));
  spdlog::info("partition {}: leadership requested for node {}", partition, to);
  return TransferAccepted{config_.self, to};
}

Expected<void, TransferRefusal> PartitionHost::ClearLeaderPin(PartitionId partition) {
  if (partition >= partitions() || meta_.state().open_partitions().count(partition) == 0) {
    return MakeError(TransferRefusal{partition >= partitions() ? TransferError::kUnknownPartition
                                                               : TransferError::kNotOpen,
                                     fmt::format("partition {} is not open", partition), 0, {}});
  }
  ProposeMeta(meta::PartitionLeaderPin{partition, 0}, fmt::format("leader pin {} cleared", partition));
  return {};
}

void PartitionHost::SetDraining(bool draining) {
  ProposeMeta(meta::NodeDrain{config_.self, draining},
              fmt::format("drain {} of node {}", draining ? "start" : "end", config_.self));
}

bool PartitionHost::draining() const { return meta_.state().IsDraining(config_.self); }

size_t PartitionHost::leading() const {
  size_t count = 0;
  for (const auto& [partition, replica] : replicas_) {
    count += replica->group->raft().role() == raft::Role::kLeader ? 1 : 0;
  }
  return count;
}

// --- writes held by a handover ------------------------------------------

void PartitionHost::ReleaseStranded(Replica& replica) {
  if (replica.stranded.empty()) return;
  const raft::Raft& raft = replica.group->raft();
  std::vector<PartitionCallback> released;
  std::erase_if(replica.stranded, [&](const Replica::Stranded& entry) {
    auto once = entry.once.lock();
    if (!once || !*once) return true;
    if (entry.term == raft.term() && entry.role == raft.role() && entry.leader == raft.leader()) return false;
    released.push_back(std::move(*once));
    *once = nullptr;
    return true;
  });
  replica.stranded_pruned_at = replica.stranded.size();
  for (PartitionCallback& call : released) {
    host_.loop().Post([call = std::move(call)] { call({meta::ProposeStatus::kNotLeader, 0, std::nullopt}); });
  }
}

// While a handover is under way here or writes wait on a non-leader:
// every raft tick, release the writes whose term, role or leader changed.
// For at most two election timeouts after the last cause (a transfer
// aborts after one; an election is over by then or starts again).
void PartitionHost::WatchStranded() {
  watch_until_ms_ = host_.loop().NowMs() + 2 * static_cast<int64_t>(config_.raft.election_timeout_ms);
  if (watching_) return;
  watching_ = true;
  host_.loop().AddTimer(10, scope_.Guard([this] {
    watching_ = false;
    for (auto& [partition, replica] : replicas_) ReleaseStranded(*replica);
    if (host_.loop().NowMs() < watch_until_ms_) {
      const int64_t until = watch_until_ms_;
      WatchStranded();
      watch_until_ms_ = until;
    }
  }));
}

}  // namespace estuary::partition
