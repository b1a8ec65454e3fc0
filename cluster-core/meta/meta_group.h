#pragma once
// MetaGroup: the metadata raft group of a node (issue 6 point 3,
// docs/cluster.md "Metadata group"): a RaftGroup (group 0 of the node's
// RaftHost) running a MetaState, plus the two policies around it.
//
// The local node's routes: UpdateRoutes() records changes; at most one
// route proposal is in flight, and the changes made meanwhile go out as the
// next one once it commits (that is the batching). The first proposal after
// every start, and the one after a delta was refused, is a RouteReset of the
// whole local set with this process's boot id, so a rejoining node ends with
// exactly its new routes.
//
// On the leader, voter management (one config change at a time): members
// reported gone are dropped from the routes (MemberGone) and the config;
// live members outside the config join as learners; voters are kept at 3
// (5 once there are >= 5 live members, 1 below 3), filled with the
// lowest-id caught-up learners; a voter that restarted with empty state is
// removed and comes back as a learner (FreshCleared, then promotion). Live
// members are upserted (MemberUpsert); one that a MemberGone removed while
// it was still live here is upserted again only once it registered again
// (its RouteReset), so a node that left by itself (Leaving) is not
// re-admitted while it stops.
//
// Leaving (Leave, at a graceful stop): the node proposes its own
// MemberGone and waits, bounded, until its own copy has applied it, so
// what MemberGone clears (its routes, leader pins and drain) is cleared
// before the process exits, whichever node leads the group and however
// soon a new process rejoins. A crashed node proposes nothing: its drain
// stays until the others' MemberGone (down) or an undrain.
//
// Bootstrap: a node that starts with no stored meta state and no seeds
// bootstraps a one-voter config {self}; nodes with seeds wait for the leader
// to add them, unless Bootstrap() makes one of them the founder later
// (--bootstrap-expect). Membership input (OnMemberLive/OnMemberGone) comes from the
// node's Membership; every node gets it, only the leader acts on it.
//
// Threading: the host's loop. The host and engine must outlive the group.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cluster-core/meta/meta_state.h"
#include "cluster-core/meta/raft_host.h"
#include "io/scope.h"

namespace estuary::meta {

inline constexpr GroupId kMetaGroup = 0;

struct MetaGroupConfig {
  NodeId self = 1;
  std::string cluster_address{};
  uint64_t boot_id = 1;    // different on every process start
  bool has_seeds = false;  // false + no stored state = bootstrap {self}
  uint32_t partitions = ring::RingOptions{}.partitions;  // the cluster-wide P (docs/placement.md)
  uint32_t replicas = ring::RingOptions{}.replicas;
  uint64_t snapshot_every = 1024;
  uint32_t reconcile_ms = 50;  // leader policies and route retries
  uint32_t propose_timeout_ms = 3000;
  raft::Options raft{};  // timeouts; mode is set to timestamp
};

struct MetaCounters {
  uint64_t route_resets = 0;   // proposed
  uint64_t route_deltas = 0;   // proposed
  uint64_t route_retries = 0;  // proposals sent again after a failure
  uint64_t deltas_refused = 0;  // of this node, seen applied as refused
  uint64_t config_changes = 0;
};

class MetaGroup {
 public:
  MetaGroup(RaftHost& host, persistence::StorageEngine& engine, MetaGroupConfig config);
  ~MetaGroup();
  MetaGroup(const MetaGroup&) = delete;
  MetaGroup& operator=(const MetaGroup&) = delete;

  Expected<void, std::string> Start();

  // --bootstrap-expect (docs/cluster.md "Forming a cluster from one
  // configuration"): whether the group holds any state (RaftGroup::HasState),
  // and the late bootstrap of a one-voter config {self} that makes this node
  // the founder, as if it had started without seeds. Refused once HasState().
  bool HasState() const { return group_ != nullptr && group_->HasState(); }
  Expected<void, std::string> Bootstrap();

  // Membership's view (self included).
  void OnMemberLive(NodeId node, const std::string& address, uint64_t incarnation);
  void OnMemberGone(NodeId node);

  // A graceful leave: proposes MemberGone{self} (again while it has not
  // been applied here) and runs `done(true)` once this node's copy shows it
  // gone (no member record, no routes, not draining), or `done(false)`
  // after timeout_ms, or at once when membership reports no majority of
  // the voters live (nothing could commit it); `done` is posted. From the
  // call on, the group proposes nothing else for this node: no route
  // changes, no new registration, no MemberUpsert of itself as leader (a
  // new process registers). A second call only adds `done` to the first's.
  void Leave(uint32_t timeout_ms, std::function<void(bool left)> done);
  bool leaving() const { return leaving_; }

  // The local node's route changes, in order.
  void UpdateRoutes(const std::vector<RouteKey>& adds, const std::vector<RouteKey>& removes);
  // The same, as one ordered list of (route, add) changes.
  void UpdateRoutes(const std::vector<std::pair<RouteKey, bool>>& changes);
  const std::set<RouteKey>& local_routes() const { return desired_; }
  // Everything UpdateRoutes was given has been committed.
  bool routes_committed() const { return !in_flight_ && !need_reset_ && pending_.empty(); }

  // Route changes of any node (this one included) as they are applied here.
  void set_route_observer(MetaState::RouteObserver fn) { route_observer_ = std::move(fn); }

  MetaState& state() { return state_; }
  const MetaState& state() const { return state_; }
  RaftGroup& group() { return *group_; }
  const RaftGroup& group() const { return *group_; }
  const MetaCounters& counters() const { return counters_; }
  const MetaGroupConfig& config() const { return config_; }
  // GET /api/cluster/meta.
  std::string StatusJson() const;
  // The estuary_meta_* part of /metrics.
  std::string MetricsText() const;

 private:
  struct InFlight {
    Command command;
    raft::WriteId id;
    bool failed = false;  // waiting for the next reconcile to be sent again
  };
  void Change(const RouteKey& route, bool add);
  void ScheduleReconcile();
  void Reconcile();
  void FlushRoutes();
  void SendInFlight();
  void OnRouteAnswer(uint64_t seq, ProposeResult result);
  void ManageMembers();
  bool ManageConfig();
  void ProposeMember(Command command);
  size_t TargetVoters() const;
  void ScheduleCommitNotice();
  void NoteMembers();
  bool Left() const;
  bool LeftHere() const;
  void CheckLeft();
  bool VotersLive() const;
  void ProposeLeave();
  void FinishLeave(bool left);

  RaftHost& host_;
  persistence::StorageEngine& engine_;
  MetaGroupConfig config_;
  MetaState state_;
  RaftGroup* group_ = nullptr;
  MetaState::RouteObserver route_observer_;
  MetaCounters counters_;
  // Local routes: the truth, and the changes not yet proposed (route ->
  // true add / false remove).
  std::set<RouteKey> desired_;
  std::map<RouteKey, bool> pending_;
  bool need_reset_ = true;
  uint64_t seq_ = 0;
  std::optional<InFlight> in_flight_;
  raft::Index acked_index_ = 0;  // the last route proposal answered ok
  // Membership's view.
  std::map<NodeId, MemberRecord> live_;
  std::set<NodeId> gone_;
  // Live nodes seen as members of the state, and those a MemberGone then
  // removed while still live here: not upserted until they register again.
  std::set<NodeId> admitted_;
  std::set<NodeId> unregistered_;
  bool member_in_flight_ = false;
  bool notice_scheduled_ = false;
  io::TimerId reconcile_timer_ = 0;
  // Leave: under way, its MemberGone proposal unanswered, its callbacks.
  bool leaving_ = false;
  bool leave_in_flight_ = false;
  raft::Index leave_acked_index_ = 0;  // where the leader applied our MemberGone
  io::TimerId leave_timer_ = 0;
  std::vector<std::function<void(bool)>> leave_done_;
  io::Scope scope_;  // guards callbacks that capture this (io/scope.h)
};

}  // namespace estuary::meta
