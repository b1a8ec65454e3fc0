#pragma once
// PartitionHost: the partitions of the placement ring as raft groups on one
// node (issue 7 point 1, docs/partitions.md).
//
// A partition becomes a raft group only once something is written to it:
// the first Propose for a partition that is not open yet proposes
// PartitionOpen{p, replicas from the current placement} to the metadata
// group, and every node named there starts the group with exactly that
// first config (so all replicas bootstrap the same one, whatever the
// placement did meanwhile). Idle partitions cost nothing; open ones share
// the node's RaftHost (one timer, the node-pair links).
//
// Group ids: kPartitionGroupBase + p; the groups' state lives in the
// node's partition engine under "raft/<group id>/" (RaftStore).
//
// The leader of each open partition moves its config towards the
// placement, one change at a time: a live replica missing from the config
// joins as a learner, a caught-up learner named by the placement is
// promoted, a voter no longer named (or gone) is removed once the config
// holds at least as many voters named by the placement as it should; and
// leadership goes to the preferred leader once that one is a caught-up
// voter (hot switching in timestamp mode: writes are held, not failed).
// The preferred leader is the operator's pin (PartitionLeaderPin in the
// metadata, set by RequestLeader: estuaryctl transfer-leader) while the
// pinned node is a voter, a member and not draining, else the placement's
// first replica. No leadership goes to a draining node (NodeDrain, set by
// SetDraining: POST /api/drain), and a draining leader hands each of its
// partitions to another caught-up voter (docs/partitions.md "Planned
// leadership moves").
//
// Propose from any node: on a replica through its RaftGroup (which
// forwards to the leader); elsewhere in a frame (0x50) to the replica most
// likely to lead, answered (0x51) once the entry is applied on the replica
// that was asked, with the state machine's result for that entry. Retries
// within the deadline go to the leader the answers name; the write id makes
// a retried write apply once.
//
// Threading: the RaftHost's loop. The loop and the engine must outlive the
// host; the RaftHost and MetaGroup must outlive every call into it (they may
// be destroyed first: the RaftHost's groups use the host's state machines,
// so it goes first).
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster-core/meta/meta_group.h"
#include "cluster-core/meta/raft_host.h"
#include "io/scope.h"
#include "persistence/storage_engine.h"

namespace estuary::partition {

using meta::NodeId;
using PartitionId = uint32_t;

inline constexpr meta::GroupId kPartitionGroupBase = 0x10000;
inline constexpr meta::GroupId GroupOf(PartitionId partition) { return kPartitionGroupBase + partition; }

// Frames 0x50-0x5F (docs/internode.md).
enum PartitionFrame : uint8_t {
  kPartitionPropose = 0x50,   // u64 request, u32 partition, u64 producer, u64
                              // sequence, bytes data
  kPartitionProposed = 0x51,  // u64 request, u8 status, u64 index, u32 leader
                              // hint, u8 has result, bytes result
  kPartitionRead = 0x52,      // as 0x50 with write id 0: the query in data
  kPartitionReadAnswer = 0x53,  // as 0x51: the query's result
};

// One partition's replicated application. Apply sees every committed
// normal entry once, in order, and returns that entry's result (given to
// whoever proposed it; keep it small).
class PartitionMachine {
 public:
  virtual ~PartitionMachine() = default;
  virtual std::string Apply(const raft::Entry& entry) = 0;
  virtual std::vector<uint8_t> Snapshot() const = 0;
  virtual bool Restore(const std::vector<uint8_t>& data) = 0;
  // A read-only query of the state (PartitionHost::Read), answered on the
  // leader; machines without queries answer nothing.
  virtual std::string Query(std::string_view /*query*/) const { return {}; }
};
using MachineFactory = std::function<std::unique_ptr<PartitionMachine>(PartitionId)>;

struct PartitionResult {
  meta::ProposeStatus status = meta::ProposeStatus::kOk;
  raft::Index index = 0;
  // The machine's result for the entry; absent if the status is not ok or
  // the replica that answered no longer had it (see kResultsKept).
  std::optional<std::string> result{};
};
using PartitionCallback = std::function<void(PartitionResult)>;

// Why RequestLeader refused (the admin API maps each to an HTTP status).
enum class TransferError : uint8_t {
  kUnknownPartition,  // beyond the cluster's partition count
  kNotOpen,           // never written: no group, no leader
  kNoReplica,         // this node holds no replica: ask one of `replicas`
  kNotLeader,         // ask `leader` (0: none known now, an election is under way)
  kNotVoter,          // the target is not a voter of the group, or not a member
  kNotCaughtUp,       // the target is far behind (probing, or receiving a snapshot)
  kDraining,          // the target is being drained
  kNoTarget,          // no other caught-up voter to hand over to
};
struct TransferRefusal {
  TransferError error = TransferError::kNotLeader;
  std::string message{};
  NodeId leader = 0;               // kNotLeader: the leader this node knows
  std::vector<NodeId> replicas{};  // kNoReplica: where to ask instead
};
struct TransferAccepted {
  NodeId from = 0;  // the leader now (this node)
  NodeId to = 0;    // the pinned leader-to-be
};

struct PartitionHostConfig {
  NodeId self = 1;
  uint64_t boot_id = 1;  // with self: the producer of this process's write ids
  uint32_t reconcile_ms = 100;
  uint32_t propose_timeout_ms = 3000;  // a proposal's whole deadline
  uint32_t attempt_timeout_ms = 1000;  // one attempt's (then another replica or leader is tried)
  uint32_t retry_ms = 20;              // between attempts of one proposal
  uint64_t snapshot_every = 1024;
  // A new leader keeps its leadership this long before handing it to the
  // preferred replica (not when it drains): time for a pin that moved
  // leadership here to reach this node's metadata copy, so that it does not
  // hand leadership straight back to the placement's choice.
  uint32_t leader_settle_ms = 250;
  bool quiesce = true;   // idle groups stop ticking (needs RaftHost::OnPeerDown/OnPeerUp from the owner)
  raft::Options raft{};  // timeouts; mode is timestamp
};

struct PartitionCounters {
  uint64_t opens_proposed = 0;
  uint64_t groups_started = 0;
  uint64_t proposals = 0;
  uint64_t proposals_remote = 0;  // sent to another node in a 0x50 frame
  uint64_t proposals_served = 0;  // 0x50 frames answered for others
  uint64_t proposals_failed = 0;  // answered with a status other than ok
  uint64_t retries = 0;
  uint64_t config_changes = 0;
  uint64_t leader_transfers = 0;  // handed to the preferred replica (pin or placement)
  uint64_t drain_transfers = 0;   // handed away by a draining leader
  uint64_t transfer_requests = 0;  // RequestLeader calls accepted
  uint64_t bad_frames = 0;
  uint64_t reads = 0;
  uint64_t reads_remote = 0;  // read attempts sent to another node
  uint64_t reads_served = 0;  // 0x52 frames answered for others
  uint64_t reads_failed = 0;
};

class PartitionHost {
 public:
  // Results of this many recent entries per partition are kept for
  // answers that arrive after the local apply.
  static constexpr size_t kResultsKept = 4096;

  PartitionHost(meta::RaftHost& host, cluster::Transport& transport, meta::MetaGroup& meta,
                persistence::StorageEngine& engine, PartitionHostConfig config, MachineFactory factory);
  ~PartitionHost();
  PartitionHost(const PartitionHost&) = delete;
  PartitionHost& operator=(const PartitionHost&) = delete;

  // Starts the groups of partitions already open (from the meta state) and
  // follows the meta state from now on.
  void Start();

  // The partition a key (a client id, a topic) lives in.
  PartitionId PartitionOf(std::string_view key) const;
  uint32_t partitions() const { return meta_.state().placement().partitions; }

  // Proposes `data` to the partition; `done` runs on the loop, never inside
  // this call, once with ok (the entry applied, with its result) or the
  // last failure at the deadline.
  void Propose(PartitionId partition, std::string data, PartitionCallback done);

  // Linearizable read (docs/partitions.md "Reads"): runs `query` through
  // the machine's Query on the partition's leader once it holds a lease and
  // has applied everything committed (meta::RaftGroup::ReadBarrier), so the
  // answer reflects every write acknowledged before the call. From any node
  // (a non-leader sends it in frame 0x52, answered in 0x53), retried like a
  // proposal within propose_timeout_ms. A partition this node's metadata
  // copy does not show open answers ok without a result (nothing written),
  // unless `open_elsewhere` says the caller knows it is open (that copy may
  // lag): then the read goes to the placement's replicas until one leads.
  void Read(PartitionId partition, std::string query, PartitionCallback done, bool open_elsewhere = false);

  // Planned leadership moves (docs/partitions.md "Planned leadership
  // moves"). On the partition's leader: checks `to` (0: picks another
  // caught-up voter, placement order first) and proposes
  // PartitionLeaderPin{partition, to} to the metadata group; once applied,
  // the leader hands over (a hot switch) and every later leader prefers
  // `to` while it is a caught-up voter that is not draining. Elsewhere it
  // refuses, naming the leader (kNotLeader) or the replicas (kNoReplica).
  // The answer comes before the pin commits: watch the leader change.
  Expected<TransferAccepted, TransferRefusal> RequestLeader(PartitionId partition, NodeId to);
  // Drops the partition's pin (from any node): the placement decides again.
  Expected<void, TransferRefusal> ClearLeaderPin(PartitionId partition);
  // Proposes NodeDrain{self, draining} to the metadata group (POST and
  // DELETE /api/drain). Kept there, so a drain outlives a restart.
  void SetDraining(bool draining);
  // This node is being drained, as this node's metadata copy says.
  bool draining() const;
  // Partition groups this node leads now.
  size_t leading() const;

  // Frames 0x50-0x5F from the Transport's handler.
  void OnFrame(NodeId from, uint8_t type, std::string_view body);

  // The partition's leader as far as this node knows, itself included: its
  // own replica's view, else the last answer that named one, else the first
  // replica placed (a guess; 0 if there is none).
  NodeId KnownLeader(PartitionId partition) const;
  // This node's replica of the partition leads now.
  bool Leads(PartitionId partition) const;

  // This node's group and machine for the partition (null if it has none).
  meta::RaftGroup* group(PartitionId partition);
  PartitionMachine* machine(PartitionId partition);
  size_t group_count() const { return replicas_.size(); }
  const PartitionCounters& counters() const { return counters_; }

  // GET /api/cluster/partitions: every open partition with its replicas;
  // for those this node holds: role, leader, term, commit, applied, and
  // (on the leader) each follower's match index (lag).
  std::string StatusJson() const;
  // The estuary_partition_* part of /metrics.
  std::string MetricsText() const;

 private:
  class Replica;
  struct Pending {
    PartitionId partition = 0;
    std::string data;
    raft::WriteId id;
    PartitionCallback done;
    int64_t deadline_ms = 0;
    NodeId target = 0;         // remote attempts: the node asked last
    NodeId failed_target = 0;  // the last one that did not answer ok
    uint32_t attempts = 0;
    uint32_t redirects = 0;  // attempts made at once after an answer named the leader
    bool open_proposed = false;
    bool read = false;  // a Read: data is the query
    bool open_elsewhere = false;  // a Read of a partition known to be open
    PartitionResult last{meta::ProposeStatus::kTimeout, 0, std::nullopt};
  };

  void Attempt(uint64_t key);
  void Retry(uint64_t key, PartitionResult result);
  void Finish(uint64_t key, PartitionResult result);
  void ProposeLocal(PartitionId partition, std::string data, raft::WriteId id, PartitionCallback done);
  void OnProposeFrame(NodeId from, std::string_view body);
  void OnProposedFrame(std::string_view body);
  void ReadLocal(PartitionId partition, std::string query, PartitionCallback done);
  void OnReadFrame(NodeId from, std::string_view body);
  NodeId LikelyLeader(PartitionId partition, NodeId failed) const;
  std::optional<bool> MayHaveVoted(uint64_t opened_at) const;
  bool MayPredateThisProcess(uint64_t opened_at) const;
  void ScheduleReconcile();
  void Reconcile();
  void StartGroups();
  void ManageConfig(PartitionId partition, Replica& replica);
  void ManageLeadership(PartitionId partition, Replica& replica, const std::vector<NodeId>& placed);
  NodeId WantedLeader(PartitionId partition, const raft::Raft& raft, const std::vector<NodeId>& placed) const;
  bool CaughtUp(const raft::Raft& raft, NodeId node) const;
  bool MayLead(const raft::Raft& raft, NodeId node) const;
  NodeId AnotherLeader(const raft::Raft& raft, const std::vector<NodeId>* placed) const;
  void ProposeMeta(meta::Command command, std::string what);
  void ReleaseStranded(Replica& replica);
  void WatchStranded();
  const std::vector<NodeId>* PlacedReplicas(PartitionId partition) const;

  meta::RaftHost& host_;
  io::Loop& loop_;  // the host's; used in the destructor, which may run after the host's
  cluster::Transport& transport_;
  meta::MetaGroup& meta_;
  persistence::StorageEngine& engine_;
  PartitionHostConfig config_;
  MachineFactory factory_;
  std::map<PartitionId, std::unique_ptr<Replica>> replicas_;
  std::map<PartitionId, NodeId> leader_hints_;
  std::map<uint64_t, Pending> pending_;
  uint64_t next_key_ = 1;
  uint64_t next_sequence_ = 1;
  PartitionCounters counters_;
  io::TimerId reconcile_timer_ = 0;
  bool watching_ = false;  // WatchStranded's timer is armed
  int64_t watch_until_ms_ = 0;
  bool started_ = false;
  io::Scope scope_;  // guards callbacks that capture this (io/scope.h)
};

}  // namespace estuary::partition
