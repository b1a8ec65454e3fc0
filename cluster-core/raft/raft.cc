#include "cluster-core/raft/raft.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "base/check.h"

namespace estuary::raft {

Raft::Raft(Options options, Storage storage, uint64_t now)
    : options_(std::move(options)),
      now_(now),
      dedup_(options_.dedup_window_ms),
      random_state_(options_.random_seed) {
  ESTUARY_CHECK(options_.id != kNoNode);
  ESTUARY_CHECK(options_.heartbeat_interval_ms < options_.election_timeout_ms);
  ESTUARY_CHECK(options_.max_clock_drift_ms < options_.election_timeout_ms);
  ESTUARY_CHECK(options_.max_inflight > 0 && options_.max_append_entries > 0 &&
                     options_.max_snapshot_chunk_bytes > 0);
  if (storage.snapshot.index == 0 && storage.snapshot.config.voters.empty()) {
    storage.snapshot.config = storage.bootstrap;
  }
  applied_ = storage.snapshot.index;
  dedup_.Restore(storage.snapshot.dedup);
  log_.Restore(std::move(storage.snapshot), std::move(storage.entries));
  term_ = storage.hard_state.term;
  vote_ = storage.hard_state.vote;
  commit_ = std::clamp(storage.hard_state.commit, applied_, log_.LastIndex());
  votes_barred_ = storage.lost_state;
  saved_hard_state_ = HardState{term_, vote_, commit_};
  // A restarted node may have promised a lease to a leader before it
  // crashed; it forgot when, so it assumes just now.
  last_leader_contact_ = now;
  hlc_.Update(now, log_.LastTimestamp());
  ResetElectionTimer();
  EmitCommitted();  // replays (snapshot, commit] into the first Ready
}

Ready Raft::Step(const Message& message, uint64_t now) {
  now_ = std::max(now_, now);
  if (message.to == options_.id && HandleTerm(message)) StepByType(message);
  return TakeReady();
}

Ready Raft::CampaignNow(uint64_t now) {
  now_ = std::max(now_, now);
  // A pre-candidate asks again (a PreVote round changes no term): its first
  // requests may have reached voters that had not started the group yet.
  if ((role_ == Role::kFollower || role_ == Role::kPreCandidate) && IsVoter() && !votes_barred_) {
    election_deadline_ = now_;
  }
  return Tick(now);
}

Ready Raft::Tick(uint64_t now) {
  now_ = std::max(now_, now);
  if (role_ == Role::kLeader) {
    TickLeader();
  } else {
    TickElection();
  }
  return TakeReady();
}

Ready Raft::Advance(const Ready& ready) {
  if (!ready.entries.empty()) {
    log_.MarkPersisted(ready.entries.back().index, ready.entries.back().term);
  }
  // Vote requests may leave before the candidate's own term and vote are
  // durable; it counts itself (and may win) only once they are.
  if (role_ == Role::kCandidate && ready.hard_state && ready.hard_state->term == term_ &&
      ready.hard_state->vote == options_.id && !vote_persisted_) {
    vote_persisted_ = true;
    granted_.insert(options_.id);
    MaybeWinElection();
  }
  if (role_ == Role::kLeader) MaybeCommit();
  return TakeReady();
}

Expected<Proposed, Errc> Raft::Propose(std::vector<uint8_t> data, uint64_t now, WriteId id) {
  now_ = std::max(now_, now);
  if (HoldsWrites()) {
    // Hot switching: hold the write for the new leader instead of failing it.
    if (held_.size() >= options_.max_held_writes) return MakeError(Errc::kTransferInProgress);
    held_.push_back(Write{std::move(data), id});
    // Once TimeoutNow is out the target is the next leader: send it there
    // now. A follower sends it to the leader it knows.
    if (role_ == Role::kLeader && lease_forfeited_) ReleaseHeld(transfer_target_);
    if (role_ == Role::kFollower && leader_ != kNoNode) ReleaseHeld(leader_);
    return Proposed{.held = true, .ready = TakeReady()};
  }
  if (role_ != Role::kLeader) return MakeError(Errc::kNotLeader);
  if (transfer_target_ != kNoNode) return MakeError(Errc::kTransferInProgress);
  if (options_.mode == Mode::kTimestamp && !HasLease(now_)) {
    return MakeError(Errc::kLeaseExpired);
  }
  AppendLocal(EntryType::kNormal, std::move(data), id);
  BroadcastAppends();
  return Proposed{.index = log_.LastIndex(), .term = term_, .ready = TakeReady()};
}

// The lease: the newest send time that a quorum of voters (the leader
// counting as `now`) has echoed. Each of those voters refuses votes for
// election_timeout_ms after hearing from us, so no rival can win before
// send time + election_timeout_ms; the drift bound covers clock rates.
bool Raft::HasLease(uint64_t now) const {
  if (options_.mode != Mode::kTimestamp || role_ != Role::kLeader || lease_forfeited_ ||
      transfer_target_ != kNoNode) {
    return false;
  }
  const Config& config = log_.config();
  if (config.voters.empty()) return false;
  std::vector<uint64_t> acks;
  for (NodeId voter : config.voters) {
    if (voter == options_.id) {
      acks.push_back(now);
    } else {
      auto it = progress_.find(voter);
      const bool fresh = it != progress_.end() && it->second.lease_ack >= lease_floor_;
      acks.push_back(fresh ? it->second.lease_ack : 0);
    }
  }
  std::sort(acks.begin(), acks.end(), std::greater<>());
  const uint64_t vouched = acks[config.Quorum() - 1];
  return vouched != 0 && vouched + lease_ms() > now;
}

// The host vouches for the peers through node liveness, which is good
// enough to keep CheckQuorum from deposing a leader that was quiet on
// purpose, but not for the lease: that needs answers sent after the wake.
Ready Raft::Wake(uint64_t now, bool leader_live) {
  now_ = std::max(now_, now);
  if (role_ == Role::kLeader) {
    for (auto& [peer, progress] : progress_) progress.recent_active = true;
    quorum_check_deadline_ = now_ + options_.election_timeout_ms;
    last_leader_contact_ = now_;
    lease_floor_ = now_;
    heartbeat_deadline_ = now_ + options_.heartbeat_interval_ms;
    SendHeartbeats();
  } else {
    if (leader_live && leader_ != kNoNode) last_leader_contact_ = now_;
    ResetElectionTimer();
  }
  return TakeReady();
}

bool Raft::CanQuiesce(const std::function<bool(NodeId)>& down) const {
  if (role_ != Role::kLeader || transfer_target_ != kNoNode || !held_.empty()) return false;
  const Index last = log_.LastIndex();
  if (commit_ != last || log_.persisted() != last) return false;
  for (const auto& [peer, progress] : progress_) {
    if (down && down(peer)) continue;
    if (progress.match != last || progress.state != Progress::State::kReplicate ||
        !progress.inflight.empty() || progress.lease_ack <= commit_advanced_at_) {
      return false;
    }
  }
  return true;
}

// Every input ends here, so this sees each commit advance (for CanQuiesce).
Ready Raft::TakeReady() {
  if (commit_ != commit_seen_) {
    commit_seen_ = commit_;
    commit_advanced_at_ = now_;
  }
  return std::exchange(ready_, Ready{});
}

void Raft::Send(Message message) {
  message.from = options_.id;
  if (message.term == 0) message.term = term_;
  ready_.messages.push_back(std::move(message));
}

void Raft::BecomeFollower(Term term, NodeId leader) {
  if (term > term_) {
    term_ = term;
    vote_ = kNoNode;
  }
  role_ = Role::kFollower;
  leader_ = leader;
  progress_.clear();
  granted_.clear();
  rejected_.clear();
  transfer_target_ = kNoNode;
  transfer_campaign_ = false;
  lease_forfeited_ = false;
  if (leader != kNoNode) last_leader_contact_ = now_;
  ResetElectionTimer();
  SaveHardState();
}

void Raft::SaveHardState() {
  const HardState state{term_, vote_, commit_};
  if (state != saved_hard_state_) {
    saved_hard_state_ = state;
    ready_.hard_state = state;
  }
}

void Raft::EmitCommitted() {
  for (Index i = applied_ + 1; i <= commit_; ++i) {
    const Entry& entry = log_.At(i);
    if (dedup_enabled() && dedup_.Apply(entry)) ready_.duplicates.push_back(i);
    ready_.committed.push_back(entry);
  }
  applied_ = std::max(applied_, commit_);
  MaybeLiftVoteBar();
}

// Storage::lost_state: once an entry of the current leader's term is
// committed here, everything committed before it is in our log.
void Raft::MaybeLiftVoteBar() {
  if (votes_barred_ && commit_ > 0 && log_.TermAt(commit_) == term_) votes_barred_ = false;
}

bool Raft::HeardFromLeaderRecently() const {
  if (role_ == Role::kLeader) return true;
  // In term 0 there has never been a leader to hear from (or to promise a
  // lease to): a new group's first PreVote need not wait a timeout.
  if (term_ == 0) return false;
  return now_ < last_leader_contact_ + options_.election_timeout_ms;
}

// Returns whether the message should be handled at all.
bool Raft::HandleTerm(const Message& message) {
  const MessageType type = message.type;
  const bool from_leader = type == MessageType::kAppend || type == MessageType::kHeartbeat ||
                           type == MessageType::kSnapshot || type == MessageType::kTimeoutNow;
  if (message.term > term_) {
    // A pre-vote is a question about a future term: it changes nothing.
    if (type == MessageType::kPreVote) return true;
    if (type == MessageType::kPreVoteResponse && !message.reject) return true;
    // Leader stickiness: while a leader is alive (and may hold a lease on
    // our promise) a vote request is ignored, unless the leader asked for it.
    const bool sticky = options_.check_quorum || options_.mode == Mode::kTimestamp;
    if (type == MessageType::kVote && !message.transfer && sticky && HeardFromLeaderRecently()) {
      return false;
    }
    BecomeFollower(message.term, from_leader ? message.from : kNoNode);
    return true;
  }
  if (message.term < term_) {
    // A stale leader learns the newer term from the reply and steps down.
    if (from_leader && type != MessageType::kTimeoutNow) {
      Send(Message{.type = MessageType::kAppendResponse, .to = message.from, .reject = true});
    } else if (type == MessageType::kPreVote) {
      Send(Message{.type = MessageType::kPreVoteResponse, .to = message.from, .reject = true});
    }
    return false;
  }
  return true;
}

void Raft::StepByType(const Message& message) {
  switch (message.type) {
    case MessageType::kPreVote:
    case MessageType::kVote: HandleVoteRequest(message); break;
    case MessageType::kPreVoteResponse:
    case MessageType::kVoteResponse: HandleVoteResponse(message); break;
    case MessageType::kAppend: HandleAppend(message); break;
    case MessageType::kAppendResponse: HandleAppendResponse(message); break;
    case MessageType::kHeartbeat: HandleHeartbeat(message); break;
    case MessageType::kHeartbeatResponse: HandleHeartbeatResponse(message); break;
    case MessageType::kSnapshot: HandleSnapshot(message); break;
    case MessageType::kSnapshotResponse: HandleSnapshotResponse(message); break;
    case MessageType::kTimeoutNow: HandleTimeoutNow(message); break;
  }
}

}  // namespace estuary::raft
