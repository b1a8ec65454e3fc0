#pragma once
// RaftHost: the shell that runs raft groups (cluster-core/raft/, a pure
// state machine) on an io::Loop over a cluster::Transport.
//
// For every group it owns: ticks from one loop timer (now = loop.NowMs()),
// handles each Ready in the contract's order (types.h: persist through a
// raft::RaftStore on the group's StorageEngine, send over the Transport in
// frames 0x40-0x4F, restore/apply to the group's StateMachine, Advance),
// compacts the log by snapshot every `snapshot_every` applied entries, and
// lets a caller on any node Propose: a follower forwards the proposal to the
// leader it knows (kRaftPropose) and the leader answers once the entry is
// applied there (kRaftProposed), so the callback hears ok with the index,
// not-leader, rejected or timeout. Timestamp mode is meant to be on: a
// retried proposal with the same WriteId is applied once.
//
// Safety rule for lost state: a group whose log is empty (index 0, no
// snapshot) drops every Vote and PreVote request (docs/cluster.md). A voter
// whose disk was lost may have voted in the current term before it
// crashed; if it voted again for another candidate after restart, two
// leaders could win the same term. Only a node that has never been part of
// a config (or lost its state) has an empty log; the leader re-adds such a
// node as a learner. A group that starts empty without a bootstrap config
// keeps refusing (and never stands) until it holds a commit of its
// leader's term, not just the first entries (raft::Storage::lost_state): a
// partial log could otherwise vote for a candidate that misses an entry
// this node had helped commit before it lost its store.
//
// Quiescence (GroupConfig::quiesce; docs/raft.md, "Quiescence"): a leader
// whose group has been idle for a heartbeat interval, with everything
// committed and acknowledged, sends each follower a Quiesce notice (0x43)
// and stops ticking the group; a follower whose state matches stops too.
// Idle groups then cost no messages and no ticks. Any Propose,
// ChangeConfig, TransferLeadership or raft message wakes the group
// (raft::Raft::Wake). Node-level liveness stands in for the heartbeats:
// the owner calls OnPeerDown/OnPeerUp as members turn suspect/down/left or
// live, and a quiescent follower whose leader's node is down wakes and
// campaigns after its election timeout.
//
// Threading: the host, its groups, the StorageEngines and the Transport
// handler calls belong to the loop's thread. The Loop, Transport, engines
// and state machines must outlive the host.
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include "base/expected.h"
#include "cluster-core/links/transport.h"
#include "cluster-core/meta/raft_codec.h"
#include "cluster-core/raft/raft.h"
#include "cluster-core/raft/raft_store.h"
#include "io/loop.h"
#include "io/scope.h"
#include "persistence/storage_engine.h"

namespace estuary::meta {

// The replicated application. Apply sees every committed kNormal entry
// once, in log order (retries de-duplicated by raft are skipped).
class StateMachine {
 public:
  virtual ~StateMachine() = default;
  virtual void Apply(const raft::Entry& entry) = 0;
  virtual std::vector<uint8_t> Snapshot() const = 0;
  // Replaces the whole state; false if the bytes are malformed.
  virtual bool Restore(const std::vector<uint8_t>& data) = 0;
};

struct ProposeResult {
  ProposeStatus status = ProposeStatus::kOk;
  raft::Index index = 0;
};
using ProposeCallback = std::function<void(ProposeResult)>;

struct GroupConfig {
  GroupId group = 0;
  raft::Options raft{};  // id is set to the transport's self
  // Used only when the store holds nothing for this group: the initial
  // config (e.g. {self} to bootstrap), saved so a restart uses it again.
  // Empty: wait to be added by a leader.
  raft::Config bootstrap{};
  uint64_t snapshot_every = 1024;   // applied entries between snapshots
  uint32_t propose_timeout_ms = 3000;
  bool refuse_votes_when_empty = true;  // the lost-state rule above
  // Stop ticking and heartbeating the group while it is idle. Needs the
  // owner to call RaftHost::OnPeerDown/OnPeerUp; set on every replica.
  bool quiesce = false;
};

struct GroupCounters {
  uint64_t proposals = 0;
  uint64_t proposals_forwarded = 0;
  uint64_t proposals_failed = 0;  // not-leader, rejected or timeout answers
  uint64_t applied_entries = 0;
  uint64_t snapshots_taken = 0;
  uint64_t snapshots_installed = 0;
  uint64_t votes_refused = 0;  // the empty-log rule
  uint64_t messages_out = 0;
  uint64_t messages_in = 0;
  uint64_t bad_frames = 0;
  uint64_t quiesce_notices_sent = 0;      // leader: one per follower per quiescence
  uint64_t quiesce_notices_accepted = 0;  // follower
  uint64_t quiesce_notices_ignored = 0;   // follower: state did not match
  uint64_t wakes = 0;
  uint64_t wake_requests_sent = 0;  // follower: asked the leader to resume (0x44)
  uint64_t proposals_parked = 0;  // held after a wake until the lease is back
  uint64_t reads = 0;         // read barriers asked of this replica
  uint64_t reads_failed = 0;  // answered not-leader or timeout
};

// Host-wide sums of the quiescence counters, and groups quiescent now.
struct QuiesceCounters {
  uint64_t quiescent_now = 0;
  uint64_t notices_sent = 0;
  uint64_t notices_accepted = 0;
  uint64_t notices_ignored = 0;
  uint64_t wakes = 0;
};

class RaftHost;

class RaftGroup {
 public:
  // `done` runs on the loop, never inside this call.
  void Propose(std::vector<uint8_t> data, raft::WriteId id, ProposeCallback done);
  Expected<void, raft::Errc> ChangeConfig(raft::ConfigChange change);
  Expected<void, raft::Errc> TransferLeadership(raft::NodeId target);
  // Stands for election at once (raft::Raft::CampaignNow).
  void CampaignNow();
  // Leader-lease read barrier (timestamp mode; docs/raft.md "Reads"):
  // `done` runs on the loop with kOk once this node leads with a lease, has
  // committed an entry of its own term and has applied every committed
  // entry, so the state machine as it is then reflects every write
  // acknowledged anywhere before the call. kNotLeader at once on a
  // non-leader (or if leadership is lost while waiting); kTimeout after
  // propose_timeout_ms. Wakes a quiescent group (the lease needs a round).
  void ReadBarrier(ProposeCallback done);
  const raft::Raft& raft() const { return *raft_; }
  // Not ticked (GroupConfig::quiesce).
  bool quiescent() const { return quiescent_; }
  GroupId id() const { return config_.group; }
  raft::Index applied() const { return applied_; }
  // The store held nothing for this group when it started.
  bool started_empty() const { return started_empty_; }
  // The group holds something: a stored or bootstrap config, a term (a
  // leader or candidate reached it) or a log entry. What a node's
  // --bootstrap-expect peers ask (docs/cluster.md).
  bool HasState() const;
  // A bootstrap decided after the start (--bootstrap-expect): the group,
  // which started empty with no bootstrap config and has heard from no
  // leader or candidate since, starts over from `config`, saved as a
  // configured bootstrap is. Refused (nothing changes) once HasState().
  Expected<void, std::string> Bootstrap(raft::Config config);
  const GroupCounters& counters() const { return counters_; }

 private:
  friend class RaftHost;
  struct Waiting {  // a proposal in this leader's log, answered when applied
    raft::Term term = 0;
    ProposeCallback local{};
    cluster::NodeId remote = 0;
    uint64_t request = 0;
    int64_t deadline_ms = 0;
  };
  struct Forwarded {  // a proposal sent to the leader
    ProposeCallback done{};
    int64_t deadline_ms = 0;
  };
  struct Read {  // a read barrier waiting for the lease and the apply
    ProposeCallback done{};
    int64_t deadline_ms = 0;
  };
  struct Parked {  // a proposal waiting for a woken leader's lease
    std::vector<uint8_t> data{};
    raft::WriteId id{};
    ProposeCallback local{};
    cluster::NodeId remote = 0;
    uint64_t request = 0;
  };

  RaftGroup(RaftHost& host, GroupConfig config, persistence::StorageEngine& engine,
            StateMachine& machine);
  persistence::Status Start();
  void Enqueue(raft::Ready ready);
  void Drain();
  void Handle(const raft::Ready& ready);
  void Send(const raft::Message& message);
  void ApplyCommitted(const raft::Ready& ready);
  void Answer(Waiting& waiting, ProposeResult result);
  void MaybeCompact();
  void Tick(int64_t now);
  void OnMessage(cluster::NodeId from, raft::Message message);
  void OnProposeRequest(cluster::NodeId from, ProposeRequest request);
  void OnProposeReply(const ProposeReply& reply);
  void Fail(ProposeCallback done, ProposeStatus status);
  void ProposeHere(std::vector<uint8_t> data, raft::WriteId id, ProposeCallback done, int64_t now);
  // Quiescence
  bool LeaderLive() const;
  void MarkBusy(raft::MessageType type);
  void Wake(bool leader_live);
  bool Idle() const;
  void MaybeQuiesce(int64_t now);
  void EnterQuiescence();
  void OnQuiesce(cluster::NodeId from, const QuiesceNotice& notice);
  void WakeLeader(cluster::NodeId woken_by);
  void OnWakeRequest(const WakeRequest& request);
  bool AwaitingLease(int64_t now) const;
  void RetryParked(int64_t now);
  bool ReadsServable(int64_t now) const;
  void ServeReads(int64_t now);

  RaftHost& host_;
  GroupConfig config_;
  persistence::StorageEngine& engine_;
  StateMachine& machine_;
  raft::RaftStore store_;
  std::unique_ptr<raft::Raft> raft_;
  raft::Index applied_ = 0;
  bool started_empty_ = false;
  bool bootstrapped_ = false;  // the store holds a bootstrap config (its own first start)
  std::deque<raft::Ready> queue_;
  bool draining_ = false;
  std::map<raft::Index, Waiting> waiting_;
  std::map<uint64_t, Forwarded> forwarded_;
  uint64_t next_request_ = 1;
  std::deque<Parked> parked_;
  std::deque<Read> reads_;
  bool quiescent_ = false;
  int64_t last_busy_ms_ = 0;  // last activity other than heartbeats
  int64_t woke_at_ms_ = INT64_MIN / 2;  // long before any loop time
  GroupCounters counters_;
};

class RaftHost {
 public:
  RaftHost(io::Loop& loop, cluster::Transport& transport, uint32_t tick_ms = 10);
  ~RaftHost();
  RaftHost(const RaftHost&) = delete;
  RaftHost& operator=(const RaftHost&) = delete;

  // Loads the group's state from `engine` and starts it. Fails if the
  // stored state cannot be read.
  Expected<RaftGroup*, std::string> AddGroup(GroupConfig config, persistence::StorageEngine& engine,
                                             StateMachine& machine);
  RaftGroup* group(GroupId id);
  // Frames 0x40-0x4F from the Transport's handler.
  void OnFrame(cluster::NodeId from, uint8_t type, std::string_view body);
  cluster::NodeId self() const { return transport_.self(); }
  io::Loop& loop() { return loop_; }
  uint64_t bad_frames() const { return bad_frames_; }
  // Node-level liveness from the owner's membership: `node` turned
  // suspect, down or left (quiescent followers it leads wake), or live.
  void OnPeerDown(cluster::NodeId node);
  void OnPeerUp(cluster::NodeId node);
  size_t quiescent_groups() const { return quiesce_.quiescent_now; }
  const QuiesceCounters& quiesce_counters() const { return quiesce_; }

 private:
  friend class RaftGroup;
  void ScheduleTick();

  io::Loop& loop_;
  cluster::Transport& transport_;
  uint32_t tick_ms_;
  std::map<GroupId, std::unique_ptr<RaftGroup>> groups_;
  std::set<GroupId> active_;  // ticked: every group not quiescent
  std::set<cluster::NodeId> down_;
  QuiesceCounters quiesce_;
  io::TimerId tick_timer_ = 0;
  uint64_t bad_frames_ = 0;
  io::Scope scope_;  // guards callbacks that capture this (io/scope.h)
};

}  // namespace estuary::meta
