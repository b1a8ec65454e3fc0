// Membership: one server at a time, learners, leadership transfer.
//
// Rule: a config entry is in force on a node as soon as it is appended to
// that node's log (persisted or not), and reverts if the entry is
// truncated. A leader accepts a new change only when the previous config
// entry is committed and it has committed an entry of its own term.
// Adding or removing one voter at a time keeps every old and new majority
// overlapping, so no joint consensus is needed.
#include <algorithm>
#include <utility>

#include "cluster-core/raft/raft.h"

namespace estuary::raft {

namespace {

void Erase(std::vector<NodeId>& ids, NodeId id) {
  ids.erase(std::remove(ids.begin(), ids.end(), id), ids.end());
}

// Returns the new config, or nothing if the change does not apply.
std::optional<Config> Apply(Config config, const ConfigChange& change) {
  const NodeId node = change.node;
  if (node == kNoNode) return std::nullopt;
  switch (change.type) {
    case ConfigChangeType::kAddVoter:
      if (config.Contains(node)) return std::nullopt;
      config.voters.push_back(node);
      break;
    case ConfigChangeType::kAddLearner:
      if (config.Contains(node)) return std::nullopt;
      config.learners.push_back(node);
      break;
    case ConfigChangeType::kPromoteLearner:
      if (!config.IsLearner(node)) return std::nullopt;
      Erase(config.learners, node);
      config.voters.push_back(node);
      break;
    case ConfigChangeType::kRemove:
      if (!config.Contains(node)) return std::nullopt;
      Erase(config.voters, node);
      Erase(config.learners, node);
      if (config.voters.empty()) return std::nullopt;
      break;
  }
  return config;
}

}  // namespace

Expected<Proposed, Errc> Raft::ChangeConfig(ConfigChange change, uint64_t now) {
  now_ = std::max(now_, now);
  if (role_ != Role::kLeader) return MakeError(Errc::kNotLeader);
  if (transfer_target_ != kNoNode) return MakeError(Errc::kTransferInProgress);
  if (commit_ < leader_first_index_) return MakeError(Errc::kLeaderNotReady);
  if (log_.config_index() > commit_) return MakeError(Errc::kConfigChangeInProgress);
  std::optional<Config> config = Apply(log_.config(), change);
  if (!config) return MakeError(Errc::kInvalidConfigChange);
  AppendLocal(EntryType::kConfig, EncodeConfig(*config));
  BroadcastAppends();
  return Proposed{.index = log_.LastIndex(), .term = term_, .ready = TakeReady()};
}

// The leader tracks every member but itself; new members start probing at
// the end of the log.
void Raft::SyncProgress() {
  if (role_ != Role::kLeader) return;
  const Config& config = log_.config();
  for (auto it = progress_.begin(); it != progress_.end();) {
    it = config.Contains(it->first) ? std::next(it) : progress_.erase(it);
  }
  auto track = [&](NodeId id) {
    if (id != options_.id && !progress_.contains(id)) {
      progress_[id] = Progress{.match = 0, .next = log_.LastIndex() + 1};
    }
  };
  for (NodeId id : config.voters) track(id);
  for (NodeId id : config.learners) track(id);
}

// A leader that committed its own removal hands over by stepping down.
void Raft::OnCommitAdvanced() {
  if (role_ == Role::kLeader && log_.config_index() <= commit_ && !IsVoter()) {
    BecomeFollower(term_, kNoNode);
  }
}

Expected<Ready, Errc> Raft::TransferLeadership(NodeId target, uint64_t now) {
  now_ = std::max(now_, now);
  if (role_ != Role::kLeader) return MakeError(Errc::kNotLeader);
  if (target == options_.id) return TakeReady();
  if (!log_.config().IsVoter(target)) return MakeError(Errc::kInvalidTransferTarget);
  if (transfer_target_ != kNoNode) return MakeError(Errc::kTransferInProgress);
  transfer_target_ = target;
  transfer_deadline_ = now_ + options_.election_timeout_ms;
  MaybeSendTimeoutNow();
  if (!lease_forfeited_) SendAppend(target);
  return TakeReady();
}

// TimeoutNow goes only to a target holding our whole log; from then on
// this leader never claims a lease again in its term.
void Raft::MaybeSendTimeoutNow() {
  if (transfer_target_ == kNoNode || lease_forfeited_) return;
  auto it = progress_.find(transfer_target_);
  if (it == progress_.end() || it->second.match < log_.LastIndex()) return;
  lease_forfeited_ = true;
  handoff_deadline_ = now_ + options_.election_timeout_ms;
  // The target holds what it is sent while it campaigns and serves it as
  // soon as it wins, without waiting for this node to learn of it. What we
  // hold so far rides in the TimeoutNow itself; a write sent separately
  // could overtake it and be bounced back as if to a follower.
  // With the commit it holds, so that a target that lost its store learns
  // it has caught up (Storage::lost_state) before it decides to stand.
  Message timeout_now{.type = MessageType::kTimeoutNow, .to = transfer_target_,
                      .commit = std::min(commit_, it->second.match)};
  if (options_.mode == Mode::kTimestamp) timeout_now.writes = std::exchange(held_, {});
  Send(std::move(timeout_now));
}

// In timestamp mode a leader that sent TimeoutNow cannot get its lease
// back safely (the target may win at any moment), so it steps down.
void Raft::AbortTransfer() {
  transfer_target_ = kNoNode;
  if (lease_forfeited_ && options_.mode == Mode::kTimestamp) {
    BecomeFollower(term_, kNoNode);  // held writes wait for the next leader
    return;
  }
  lease_forfeited_ = false;
  ReleaseHeld(options_.id);
}

// Hands held writes back to the caller, addressed to the leader now known.
void Raft::ReleaseHeld(NodeId leader) {
  if (held_.empty()) return;
  ready_.redirect_to = leader;
  for (Write& write : held_) ready_.redirected.push_back(std::move(write));
  held_.clear();
}

// Timestamp mode: a leader transferring its leadership, the target while
// it campaigns on the leader's TimeoutNow, a leader that just handed over
// (until it learns the new leader), and a follower that knows its leader
// (which hands the write straight back, addressed to the leader) hold
// client writes instead of failing them.
bool Raft::HoldsWrites() const {
  if (options_.mode != Mode::kTimestamp) return false;
  if (role_ == Role::kLeader) return transfer_target_ != kNoNode;
  if (role_ == Role::kCandidate && transfer_campaign_) return true;
  return leader_ != kNoNode || now_ < handoff_deadline_;
}

}  // namespace estuary::raft
