// Log replication: appends with batching and a per-follower pipeline,
// heartbeats, commit by a quorum of persisted matches, CheckQuorum.
#include <algorithm>
#include <functional>

#include "base/check.h"
#include "cluster-core/raft/raft.h"

namespace estuary::raft {

void Raft::AppendLocal(EntryType type, std::vector<uint8_t> data, WriteId id) {
  Entry entry{.term = term_,
              .index = log_.LastIndex() + 1,
              .timestamp = options_.mode == Mode::kTimestamp ? hlc_.Now(now_) : 0,
              .type = type,
              .write_id = id,
              .data = std::move(data)};
  ready_.entries.push_back(entry);
  log_.Append(std::move(entry));
  if (type == EntryType::kConfig) SyncProgress();  // in force once appended
}

void Raft::BroadcastAppends() {
  for (const auto& entry : progress_) SendAppend(entry.first);
}

// Sends as many appends as the follower's state allows: one probe, or
// batches until the in-flight window is full.
void Raft::SendAppend(NodeId peer) {
  Progress& progress = progress_.at(peer);
  while (true) {
    if (progress.state == Progress::State::kSnapshot) return;
    if (progress.state == Progress::State::kProbe && progress.probe_sent) return;
    if (progress.state == Progress::State::kReplicate &&
        (progress.inflight.size() >= options_.max_inflight || progress.next > log_.LastIndex())) {
      return;
    }
    const Index prev = progress.next - 1;
    const std::optional<Term> prev_term = log_.TermAt(prev);
    if (!prev_term) {
      SendSnapshot(peer, progress);
      return;
    }
    std::vector<Entry> entries;
    if (progress.next <= log_.LastIndex()) {
      entries = log_.Slice(progress.next, log_.LastIndex(), options_.max_append_entries,
                           options_.max_append_bytes);
    }
    if (progress.state == Progress::State::kProbe) {
      progress.probe_sent = true;
    } else {
      progress.next = entries.back().index + 1;
      progress.inflight.push_back(entries.back().index);
    }
    Send(Message{.type = MessageType::kAppend,
                 .to = peer,
                 .log_index = prev,
                 .log_term = *prev_term,
                 .entries = std::move(entries),
                 .commit = commit_,
                 .send_time = now_,
                 .timestamp = log_.TimestampAt(commit_)});
  }
}

void Raft::SendHeartbeats() {
  for (auto& [peer, progress] : progress_) {
    progress.acked_since_heartbeat = false;
    Send(Message{.type = MessageType::kHeartbeat,
                 .to = peer,
                 .commit = std::min(commit_, progress.match),
                 .send_time = now_,
                 .timestamp = log_.TimestampAt(commit_)});
  }
}

void Raft::NoteAck(NodeId peer, const Message& message) {
  Progress& progress = progress_.at(peer);
  progress.recent_active = true;
  progress.lease_ack = std::max(progress.lease_ack, message.send_time);
}

// Common to every message from the current leader.
void Raft::NoteLeaderContact(const Message& message) {
  ESTUARY_CHECK(role_ != Role::kLeader);  // one leader per term
  if (role_ != Role::kFollower) BecomeFollower(term_, message.from);
  leader_ = message.from;
  last_leader_contact_ = now_;
  leader_timestamp_ = std::max(leader_timestamp_, message.timestamp);
  if (options_.mode == Mode::kTimestamp) hlc_.Update(now_, message.timestamp);
  ResetElectionTimer();
  ReleaseHeld(message.from);
}

void Raft::HandleAppend(const Message& message) {
  NoteLeaderContact(message);
  Message reply{.type = MessageType::kAppendResponse, .to = message.from,
                .send_time = message.send_time};
  // Entries up to our commit are the leader's too (leader completeness),
  // so a prev at or below it matches even if compacted away here.
  if (message.log_index <= commit_ || log_.Matches(message.log_index, message.log_term)) {
    std::vector<Entry> written = log_.Merge(message.entries);
    ESTUARY_CHECK(written.empty() || written.front().index > commit_);
    for (Entry& entry : written) ready_.entries.push_back(std::move(entry));
    const Index last_new = message.log_index + message.entries.size();
    const Index new_commit = std::min(message.commit, last_new);
    if (new_commit > commit_) {
      commit_ = new_commit;
      SaveHardState();
      EmitCommitted();
    }
    reply.index = last_new;
  } else {
    reply.reject = true;
    reply.index = log_.FindHint(message.log_index, message.log_term);
    reply.hint_term = log_.TermAt(reply.index).value_or(0);
  }
  Send(std::move(reply));
}

void Raft::HandleAppendResponse(const Message& message) {
  if (role_ != Role::kLeader || !progress_.contains(message.from)) return;
  NoteAck(message.from, message);
  Progress& progress = progress_.at(message.from);
  if (message.reject) {
    if (message.index < progress.match) {
      // Stale (it answers an append older than the one that raised match),
      // unless the append was sent after that: then the follower no longer
      // holds entries it acknowledged (it lost its storage, e.g. a node
      // restarted without its data folder) and must be caught up from what
      // it has, or it would be probed at `match` forever.
      if (message.send_time <= progress.match_at) return;
      progress.match = message.index;
    }
    // Probe at the last index where our term is <= the follower's term at
    // its hint; below our snapshot that means sending the snapshot.
    Index probe = message.index;
    if (probe >= log_.snapshot()->index) probe = log_.FindHint(probe, message.hint_term);
    progress.state = Progress::State::kProbe;
    progress.inflight.clear();
    progress.probe_sent = false;
    progress.next = std::max(progress.match, probe) + 1;
    SendAppend(message.from);
    return;
  }
  if (message.index > progress.match) {
    progress.match = message.index;
    progress.match_at = std::max(progress.match_at, message.send_time);
    progress.acked_since_heartbeat = true;
  }
  if (progress.state == Progress::State::kProbe) {
    progress.state = Progress::State::kReplicate;
    progress.probe_sent = false;
    progress.next = progress.match + 1;
  } else if (progress.state == Progress::State::kReplicate) {
    while (!progress.inflight.empty() && progress.inflight.front() <= message.index) {
      progress.inflight.pop_front();
    }
  }
  MaybeCommit();
  if (role_ != Role::kLeader) return;  // a committed removal stepped us down
  MaybeSendTimeoutNow();
  SendAppend(message.from);
}

void Raft::HandleHeartbeat(const Message& message) {
  NoteLeaderContact(message);
  // The leader only sends a commit we are known to hold.
  const Index commit = std::min(message.commit, log_.LastIndex());
  if (commit > commit_) {
    commit_ = commit;
    SaveHardState();
    EmitCommitted();
  }
  Send(Message{.type = MessageType::kHeartbeatResponse, .to = message.from,
               .send_time = message.send_time});
}

// A heartbeat round trip with no append acknowledged in between, while the
// follower lags, means appends or a snapshot were lost: probe again.
void Raft::HandleHeartbeatResponse(const Message& message) {
  if (role_ != Role::kLeader || !progress_.contains(message.from)) return;
  NoteAck(message.from, message);
  Progress& progress = progress_.at(message.from);
  if (progress.match >= log_.LastIndex()) return;
  if (!progress.acked_since_heartbeat) {
    progress.state = Progress::State::kProbe;
    progress.inflight.clear();
    progress.next = progress.match + 1;
  }
  if (progress.state == Progress::State::kProbe) progress.probe_sent = false;
  SendAppend(message.from);
}

void Raft::MaybeCommit() {
  const Config& config = log_.config();
  if (config.voters.empty()) return;
  std::vector<Index> matches;
  for (NodeId voter : config.voters) {
    if (voter == options_.id) {
      matches.push_back(log_.persisted());
    } else {
      auto it = progress_.find(voter);
      matches.push_back(it == progress_.end() ? 0 : it->second.match);
    }
  }
  std::sort(matches.begin(), matches.end(), std::greater<>());
  const Index quorum_match = matches[config.Quorum() - 1];
  // Only an entry of the current term is committed by counting (Raft 5.4.2).
  if (quorum_match <= commit_ || log_.TermAt(quorum_match) != term_) return;
  commit_ = quorum_match;
  SaveHardState();
  EmitCommitted();
  OnCommitAdvanced();
}

void Raft::TickLeader() {
  last_leader_contact_ = now_;
  if (now_ >= heartbeat_deadline_) {
    heartbeat_deadline_ = now_ + options_.heartbeat_interval_ms;
    SendHeartbeats();
  }
  if (transfer_target_ != kNoNode && now_ >= transfer_deadline_) {
    AbortTransfer();
    if (role_ != Role::kLeader) return;
  }
  const bool check = options_.check_quorum || options_.mode == Mode::kTimestamp;
  if (!check || now_ < quorum_check_deadline_) return;
  quorum_check_deadline_ = now_ + options_.election_timeout_ms;
  const Config& config = log_.config();
  size_t active = config.IsVoter(options_.id) ? 1 : 0;
  for (auto& [peer, progress] : progress_) {
    if (config.IsVoter(peer) && progress.recent_active) ++active;
    progress.recent_active = false;
  }
  if (active < config.Quorum()) BecomeFollower(term_, kNoNode);
}

}  // namespace estuary::raft
