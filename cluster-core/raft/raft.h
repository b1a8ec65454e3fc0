#pragma once
// Raft: one node of a raft group as a pure state machine.
//
// Inputs: Step(message, now), Tick(now), Propose, TransferLeadership,
// ChangeConfig, Compact, Advance, and Wake (after the host stopped ticking
// an idle group). Each returns a Ready with what to persist, send and
// apply (see types.h for the order the caller must keep).
// Nothing here reads a clock, does IO or touches a socket; `now` is the
// caller's millisecond clock and must not go backwards. Randomness comes
// from Options::random_seed. One Raft is owned by one thread.
//
// Timestamp mode (Options::mode) adds HLC timestamps on entries, a leader
// lease and freshest-backup-first elections; see docs/raft.md.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "base/expected.h"
#include "cluster-core/raft/dedup.h"
#include "cluster-core/raft/log.h"
#include "cluster-core/raft/progress.h"
#include "cluster-core/raft/types.h"
#include "model/hlc.h"

namespace estuary::raft {

struct Options {
  NodeId id = kNoNode;
  Mode mode = Mode::kPlain;
  uint64_t heartbeat_interval_ms = 50;
  // Election timeouts are drawn from [election_timeout_ms, 2*election_timeout_ms).
  uint64_t election_timeout_ms = 500;
  // Bound on how far two nodes' clocks may drift apart over one election
  // timeout. The lease is election_timeout_ms - max_clock_drift_ms.
  uint64_t max_clock_drift_ms = 50;
  bool pre_vote = true;
  bool check_quorum = true;
  size_t max_append_entries = 64;
  size_t max_append_bytes = 1 << 20;
  size_t max_inflight = 8;  // appends in flight per follower
  size_t max_snapshot_chunk_bytes = 1 << 20;  // InstallSnapshot chunk size
  size_t max_held_writes = 1024;  // timestamp mode: writes held per transfer
  // Timestamp mode: how long (in entry timestamp milliseconds) a write id
  // is remembered for de-duplication; 0 turns de-duplication off.
  uint64_t dedup_window_ms = 60'000;
  uint64_t random_seed = 1;
};

// Durable state read back on start. A brand-new member of the initial
// cluster passes `bootstrap` (the same on every member); a node that will
// be added later passes an empty one and waits for the leader.
struct Storage {
  HardState hard_state{};
  Snapshot snapshot{};
  std::vector<Entry> entries{};  // after snapshot.index
  Config bootstrap{};
  // The node's store was lost after it may have voted in this group (it
  // restarted empty and the group is older than the restart). Raft's safety
  // rests on each voter's log and vote surviving, so such a node neither
  // votes nor stands (not even on TimeoutNow) until it holds a commit of
  // the term it follows: an entry the current leader made. Every entry
  // committed before the loss is then in its log again (leader completeness),
  // and it counts like any other voter. Until then it only follows.
  bool lost_state = false;
};

enum class Role { kFollower, kPreCandidate, kCandidate, kLeader };

struct Proposed {
  Index index = 0;
  Term term = 0;
  // Timestamp mode, during a leadership transfer (on the old leader, or on
  // the target while it campaigns): the write is held, not in the log
  // (index and term are 0); it comes back in a Ready::redirected addressed
  // to the node that should take it.
  bool held = false;
  Ready ready{};
};

enum class ConfigChangeType { kAddVoter, kAddLearner, kPromoteLearner, kRemove };
struct ConfigChange {
  ConfigChangeType type = ConfigChangeType::kAddVoter;
  NodeId node = kNoNode;
};

class Raft {
 public:
  Raft(Options options, Storage storage, uint64_t now);

  Ready Step(const Message& message, uint64_t now);
  Ready Tick(uint64_t now);
  // The caller finished handling `ready` (persisted, sent, applied).
  Ready Advance(const Ready& ready);
  // `id` identifies the write for de-duplication (timestamp mode): a retry
  // with the same id that commits within the window is reported in
  // Ready::duplicates instead of being applied twice.
  Expected<Proposed, Errc> Propose(std::vector<uint8_t> data, uint64_t now, WriteId id = {});
  Expected<Proposed, Errc> ChangeConfig(ConfigChange change, uint64_t now);
  Expected<Ready, Errc> TransferLeadership(NodeId target, uint64_t now);
  // Stands for election now (PreVote first, as configured), as if the
  // election timer had run out: a new group's preferred leader uses it so
  // that the group does not wait an election timeout for its first
  // leader. A pre-candidate starts a new PreVote round (its first requests
  // may have been dropped by voters that had not started the group yet).
  // A no-op on a leader, a candidate or a non-voter.
  Ready CampaignNow(uint64_t now);
  // The application applied everything up to `index` (<= applied) and its
  // state is `data`: take a snapshot there and compact the log.
  Ready Compact(Index index, std::vector<uint8_t> data);

  // Timestamp mode: does a quorum vouch that no other leader can exist?
  bool HasLease(uint64_t now) const;

  // Quiescence (docs/raft.md, "Quiescence"): the host stops ticking an idle
  // group and calls Wake when anything happens to it again, before handing
  // it that input. Leader: every peer counts as heard from at `now` for
  // CheckQuorum (the host vouches for them through node-level liveness),
  // heartbeats go out at once, and HasLease stays false until a quorum has
  // answered something sent at or after `now`. Follower: the election timer
  // restarts from `now`; with `leader_live` (the host still sees the
  // leader's node live) that counts as hearing from the leader, so the node
  // refuses PreVotes and votes as it would after a heartbeat.
  Ready Wake(uint64_t now, bool leader_live = true);
  // Leader only: nothing left to do. No transfer or held writes; every
  // entry committed and persisted here; every peer matched up to the last
  // index and has acknowledged a message sent after the last commit advance
  // (so it was told the commit), except peers `down` names (the host knows
  // their node is down: they catch up when back, when their PreVote or the
  // next write wakes the group). The host adds its own conditions.
  bool CanQuiesce(const std::function<bool(NodeId)>& down = nullptr) const;

  NodeId id() const { return options_.id; }
  Role role() const { return role_; }
  Term term() const { return term_; }
  NodeId leader() const { return leader_; }
  Index commit() const { return commit_; }
  // Storage::lost_state and not yet caught up: refuses votes, never stands.
  bool votes_barred() const { return votes_barred_; }
  Index applied() const { return applied_; }
  const RaftLog& log() const { return log_; }
  const Config& config() const { return log_.config(); }
  const std::map<NodeId, Progress>& progress() const { return progress_; }
  bool dedup_enabled() const {
    return options_.mode == Mode::kTimestamp && options_.dedup_window_ms > 0;
  }
  const DedupWindow& dedup() const { return dedup_; }
  uint64_t lease_ms() const { return options_.election_timeout_ms - options_.max_clock_drift_ms; }

 private:
  // raft.cc: common transitions and bookkeeping
  Ready TakeReady();
  void Send(Message message);
  void BecomeFollower(Term term, NodeId leader);
  void SaveHardState();
  void EmitCommitted();
  void MaybeLiftVoteBar();
  bool IsVoter() const { return log_.config().IsVoter(options_.id); }
  bool HandleTerm(const Message& message);
  void StepByType(const Message& message);
  bool HeardFromLeaderRecently() const;

  // election.cc
  void ResetElectionTimer();
  void StartPreVote();
  void Campaign(bool transfer);
  void BroadcastVoteRequests(MessageType type, Term term, bool transfer);
  void HandleVoteRequest(const Message& message);
  void HandleVoteResponse(const Message& message);
  void MaybeWinElection();
  void BecomeLeader();
  void AcceptHeld();
  void TickElection();
  void HandleTimeoutNow(const Message& message);

  // replication.cc
  void AppendLocal(EntryType type, std::vector<uint8_t> data, WriteId id = {});
  void SendAppend(NodeId peer);
  void SendHeartbeats();
  void BroadcastAppends();
  void HandleAppend(const Message& message);
  void HandleAppendResponse(const Message& message);
  void HandleHeartbeat(const Message& message);
  void HandleHeartbeatResponse(const Message& message);
  void MaybeCommit();
  void TickLeader();
  void NoteAck(NodeId peer, const Message& message);
  void NoteLeaderContact(const Message& message);

  // snapshot.cc
  void SendSnapshot(NodeId peer, Progress& progress);
  void SendSnapshotChunk(NodeId peer, const Progress& progress);
  void InstallSnapshot(const Snapshot& snapshot);
  void HandleSnapshot(const Message& message);
  void HandleSnapshotResponse(const Message& message);

  // membership.cc
  void SyncProgress();
  void OnCommitAdvanced();
  void MaybeSendTimeoutNow();
  void AbortTransfer();
  void ReleaseHeld(NodeId leader);
  bool HoldsWrites() const;

  Options options_;
  Role role_ = Role::kFollower;
  Term term_ = 0;
  NodeId vote_ = kNoNode;
  NodeId leader_ = kNoNode;
  Index commit_ = 0;
  Index applied_ = 0;  // handed out to the caller in Ready::committed
  RaftLog log_;
  std::map<NodeId, Progress> progress_;  // leader: every other member
  std::set<NodeId> granted_;  // candidate: itself only once its vote is durable
  std::set<NodeId> rejected_;
  uint64_t now_ = 0;
  uint64_t election_deadline_ = 0;
  uint64_t heartbeat_deadline_ = 0;
  uint64_t quorum_check_deadline_ = 0;
  uint64_t last_leader_contact_ = 0;
  Index leader_first_index_ = 0;  // first entry of this leader's term
  NodeId transfer_target_ = kNoNode;
  uint64_t transfer_deadline_ = 0;
  uint64_t handoff_deadline_ = 0;  // timestamp mode: handed leadership over until then
  bool lease_forfeited_ = false;
  Index commit_seen_ = 0;            // commit_ at the end of the last input
  uint64_t commit_advanced_at_ = 0;  // when commit_ last moved
  uint64_t lease_floor_ = 0;  // leader: lease acks older than the last Wake do not count
  uint64_t leader_timestamp_ = 0;  // newest commit timestamp a leader reported
  std::vector<Write> held_;  // writes held during a transfer
  bool transfer_campaign_ = false;  // this campaign was started by TimeoutNow
  bool votes_barred_ = false;        // Storage::lost_state, until caught up
  bool vote_persisted_ = false;     // candidate: Advance reported its own vote durable
  std::map<NodeId, uint64_t> vote_acks_;  // transfer campaign: granted votes' send times
  DedupWindow dedup_;
  std::optional<Snapshot> incoming_snapshot_;  // follower: chunks received so far
  HybridLogicalClock hlc_;
  uint64_t random_state_;
  HardState saved_hard_state_;
  Ready ready_;
};

}  // namespace estuary::raft
