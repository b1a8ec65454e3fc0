// Leader election: randomized timeouts, PreVote, votes, TimeoutNow.
#include <algorithm>

#include "base/check.h"
#include "cluster-core/raft/raft.h"

namespace estuary::raft {

namespace {

// SplitMix64: small, seedable, identical on every platform.
uint64_t NextRandom(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace

// Plain mode draws from [T, 2T). Timestamp mode puts freshness first: a
// node whose last entry is at least as new as the newest committed
// timestamp a leader reported draws from [T, 1.5T), a lagging one from
// [1.5T, 2T), so the freshest backups stand first. (Against the leader's
// newest timestamp instead, every backup of a loaded leader lags by the
// entries in flight, and all of them waited [1.5T, 2T).)
void Raft::ResetElectionTimer() {
  const uint64_t timeout = options_.election_timeout_ms;
  uint64_t base = timeout;
  uint64_t span = timeout;
  if (options_.mode == Mode::kTimestamp) {
    span = timeout / 2;
    if (log_.LastTimestamp() < leader_timestamp_) base += timeout / 2;
  }
  election_deadline_ = now_ + base + NextRandom(random_state_) % std::max<uint64_t>(span, 1);
}

void Raft::TickElection() {
  if (now_ < election_deadline_) return;
  if (!IsVoter() || votes_barred_) {  // learners, removed nodes and lost stores never stand
    ResetElectionTimer();
    return;
  }
  if (options_.pre_vote) {
    StartPreVote();
  } else {
    Campaign(false);
  }
}

void Raft::StartPreVote() {
  role_ = Role::kPreCandidate;
  transfer_campaign_ = false;
  leader_ = kNoNode;
  granted_ = {options_.id};
  rejected_.clear();
  ResetElectionTimer();
  BroadcastVoteRequests(MessageType::kPreVote, term_ + 1, false);
  if (granted_.size() >= log_.config().Quorum()) Campaign(false);
}

void Raft::Campaign(bool transfer) {
  role_ = Role::kCandidate;
  transfer_campaign_ = transfer;
  vote_acks_.clear();
  ++term_;
  vote_ = options_.id;
  leader_ = kNoNode;
  // Our own vote counts once Advance reports it durable: a candidate that
  // led on a vote it then lost in a crash could campaign in the same term
  // again, collect the same grants and lead the term twice.
  granted_.clear();
  vote_persisted_ = false;
  rejected_.clear();
  SaveHardState();
  ResetElectionTimer();
  BroadcastVoteRequests(MessageType::kVote, term_, transfer);
}

void Raft::MaybeWinElection() {
  if (role_ == Role::kCandidate && vote_persisted_ &&
      granted_.size() >= log_.config().Quorum()) {
    BecomeLeader();
  }
}

void Raft::BroadcastVoteRequests(MessageType type, Term term, bool transfer) {
  for (NodeId voter : log_.config().voters) {
    if (voter == options_.id) continue;
    Send(Message{.type = type,
                 .to = voter,
                 .term = term,
                 .log_index = log_.LastIndex(),
                 .log_term = log_.LastTerm(),
                 .transfer = transfer,
                 .send_time = now_});
  }
}

void Raft::HandleVoteRequest(const Message& message) {
  const bool pre = message.type == MessageType::kPreVote;
  const bool up_to_date = log_.IsUpToDateWith(message.log_index, message.log_term);
  bool grant = false;
  if (votes_barred_) {  // Storage::lost_state: this node's vote may already be spent
    Send(Message{.type = pre ? MessageType::kPreVoteResponse : MessageType::kVoteResponse,
                 .to = message.from,
                 .term = term_,
                 .reject = true,
                 .send_time = message.send_time});
    return;
  }
  if (pre) {
    grant = message.term > term_ && up_to_date && !HeardFromLeaderRecently();
    // Timestamp mode: two backups whose timeouts fire together would both
    // pass PreVote and split the vote. Of two pre-candidates, the one with
    // the older log yields, and of two equally fresh ones the higher id
    // (PreVote has no part in safety).
    if (grant && role_ == Role::kPreCandidate && options_.mode == Mode::kTimestamp) {
      const bool newer = message.log_term > log_.LastTerm() ||
                         (message.log_term == log_.LastTerm() && message.log_index > log_.LastIndex());
      grant = newer || message.from < options_.id;
      if (grant) {
        role_ = Role::kFollower;
        granted_.clear();
        ResetElectionTimer();
      }
    }
  } else {
    grant = message.term == term_ && (vote_ == kNoNode || vote_ == message.from) && up_to_date;
  }
  // Timestamp mode: a follower that grants a PreVote gives that candidate
  // its chance before standing itself (otherwise a backup that times out
  // just after granting passes PreVote too and the real vote splits).
  if (grant && pre && role_ == Role::kFollower && options_.mode == Mode::kTimestamp) {
    ResetElectionTimer();
  }
  if (grant && !pre) {
    vote_ = message.from;
    SaveHardState();
    ResetElectionTimer();
    // Timestamp mode: a vote for a transfer target counts as hearing from
    // a leader, so this node refuses other candidates for an election
    // timeout and the target may start its term with a lease.
    if (message.transfer && options_.mode == Mode::kTimestamp) last_leader_contact_ = now_;
  }
  Send(Message{.type = pre ? MessageType::kPreVoteResponse : MessageType::kVoteResponse,
               .to = message.from,
               .term = (pre && grant) ? message.term : term_,
               .reject = !grant,
               .send_time = message.send_time});
}

void Raft::HandleVoteResponse(const Message& message) {
  const bool pre = message.type == MessageType::kPreVoteResponse;
  if (pre ? role_ != Role::kPreCandidate : role_ != Role::kCandidate) return;
  if (pre && !message.reject && message.term != term_ + 1) return;  // stale round
  if (!log_.config().IsVoter(message.from)) return;
  (message.reject ? rejected_ : granted_).insert(message.from);
  if (!pre && !message.reject) vote_acks_[message.from] = message.send_time;
  const size_t quorum = log_.config().Quorum();
  if (!pre) {
    MaybeWinElection();
    if (role_ == Role::kLeader) return;
  }
  if (pre && granted_.size() >= quorum) {
    Campaign(false);
  } else if (rejected_.size() >= quorum) {
    BecomeFollower(term_, kNoNode);
  }
}

void Raft::BecomeLeader() {
  ESTUARY_CHECK(role_ == Role::kCandidate);
  role_ = Role::kLeader;
  leader_ = options_.id;
  transfer_target_ = kNoNode;
  lease_forfeited_ = false;
  progress_.clear();
  SyncProgress();
  // Hot switching: the voters of a transfer campaign each refuse rivals
  // for an election timeout after granting, exactly as after an
  // acknowledged heartbeat, so their grants start the lease at once.
  if (transfer_campaign_ && options_.mode == Mode::kTimestamp) {
    for (auto& [peer, progress] : progress_) {
      auto ack = vote_acks_.find(peer);
      if (ack != vote_acks_.end()) progress.lease_ack = ack->second;
    }
  }
  transfer_campaign_ = false;
  heartbeat_deadline_ = now_ + options_.heartbeat_interval_ms;
  quorum_check_deadline_ = now_ + options_.election_timeout_ms;
  last_leader_contact_ = now_;
  hlc_.Update(now_, log_.LastTimestamp());
  // Committing an entry of our own term commits everything before it.
  AppendLocal(EntryType::kNoop, {});
  leader_first_index_ = log_.LastIndex();
  AcceptHeld();
  BroadcastAppends();
}

// Writes held while we campaigned on TimeoutNow: with the inherited lease
// they go straight into the log behind the no-op, in the same Ready, and
// reach the followers in the same appends (no extra disk write or hop).
// Without a lease they go back to the caller to propose when it comes.
void Raft::AcceptHeld() {
  if (held_.empty()) return;
  if (!HasLease(now_)) {
    ReleaseHeld(options_.id);
    return;
  }
  for (Write& write : held_) {
    AppendLocal(EntryType::kNormal, std::move(write.data), write.id);
    ready_.accepted.push_back(AcceptedWrite{log_.LastIndex(), term_, write.id});
  }
  held_.clear();
}

void Raft::HandleTimeoutNow(const Message& message) {
  // The leader sends only a commit we hold (as on a heartbeat).
  const Index commit = std::min(message.commit, log_.LastIndex());
  if (commit > commit_) {
    commit_ = commit;
    SaveHardState();
    EmitCommitted();
  }
  for (const Write& write : message.writes) held_.push_back(write);
  if (role_ == Role::kLeader || !IsVoter() || votes_barred_) {
    ReleaseHeld(role_ == Role::kLeader ? options_.id : message.from);
    return;
  }
  Campaign(true);  // holds the writes while it campaigns
}

}  // namespace estuary::raft
