#pragma once
// MetaState: the metadata group's replicated state machine (docs/cluster.md,
// "Metadata group"): the members, the partition placement the ring computes
// from them, and the route table (per node: the (filter, share key) pairs
// that node has subscribers for, stamped with the node's boot id and a
// sequence number).
//
// Commands (EncodeCommand; every replica applies them identically):
//  - RouteReset{node, boot, seq, fresh, routes}: replaces everything the
//    node had. A node sends one after every start (new boot id), and
//    whenever a delta was refused: this is how a rejoining node drops stale
//    entries. Ignored if it is older (same boot, seq <= the stored one).
//  - RouteDelta{node, boot, seq, adds, removes}: applied only if boot
//    matches and seq == stored seq + 1; otherwise ignored and reported to the
//    delta-refused observer (the proposer then sends a reset).
//  - MemberUpsert{node, address, incarnation}, MemberGone{node} (drops the
//    member and its routes). Each recomputes the placement; its epoch grows
//    when the assignment changes.
//  - FreshCleared{node, boot}: the leader re-added a node that restarted
//    with empty state as a learner (MetaGroup); it may become a voter again.
//  - PartitionOpen{partition, replicas}: the partition becomes a raft group
//    (cluster-core/partition/) with `replicas` as its first config. Every
//    replica starts the group from this one record, so they all bootstrap
//    the same config however the placement has moved since. The first one
//    applied wins; later ones for the same partition change nothing.
//  - PartitionLeaderPin{partition, node}: the operator's choice of leader
//    for an open partition (estuaryctl transfer-leader); node 0 clears it.
//    The partition's leader prefers it over the placement's first replica
//    while it is a caught-up voter that is not draining. Refused for a
//    partition that is not open.
//  - NodeDrain{node, draining}: the node is being drained (POST /api/drain)
//    or no longer is. No leadership is handed to a draining node, and it
//    hands away the partitions it leads. MemberGone clears the node's pins
//    and its drain.
//
// Encoding is deterministic (ordered containers), so snapshots of equal
// states are equal bytes. Observers run inside Apply/Restore, on the
// group's loop. Not thread-safe.
#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "cluster-core/meta/raft_host.h"
#include "cluster-core/ring/ring.h"

namespace estuary::meta {

using NodeId = uint16_t;

struct RouteKey {
  std::string filter;
  std::string share;  // empty for a plain subscription
  friend auto operator<=>(const RouteKey&, const RouteKey&) = default;
  friend bool operator==(const RouteKey&, const RouteKey&) = default;
};

struct NodeRoutes {
  uint64_t boot = 0;
  uint64_t seq = 0;
  bool fresh = false;  // the node's last start found no stored meta state
  uint64_t boot_index = 0;  // the metadata log index of this boot's first reset
  bool returning = false;   // an earlier boot of the node had a record when this one's came
  std::set<RouteKey> routes{};
  friend bool operator==(const NodeRoutes&, const NodeRoutes&) = default;
};

struct MemberRecord {
  NodeId node = 0;
  std::string address{};
  uint64_t incarnation = 0;
  friend bool operator==(const MemberRecord&, const MemberRecord&) = default;
};

struct Placement {
  uint32_t partitions = 0;
  uint32_t replicas = 0;
  uint64_t epoch = 0;
  std::vector<NodeId> nodes{};                   // sorted
  std::vector<std::vector<NodeId>> assignment{};  // per partition, preferred leader first
};

struct RouteReset {
  NodeId node = 0;
  uint64_t boot = 0;
  uint64_t seq = 0;
  bool fresh = false;
  std::vector<RouteKey> routes{};
};
struct RouteDelta {
  NodeId node = 0;
  uint64_t boot = 0;
  uint64_t seq = 0;
  std::vector<RouteKey> adds{};
  std::vector<RouteKey> removes{};
};
struct MemberUpsert {
  MemberRecord member{};
};
struct MemberGone {
  NodeId node = 0;
};
struct FreshCleared {
  NodeId node = 0;
  uint64_t boot = 0;
};
// Changes nothing: the leader appends one after applying other commands so
// that the append carries the new commit index to every node at once
// instead of with the next heartbeat (routes become visible sooner).
struct CommitNotice {};
struct PartitionOpen {
  uint32_t partition = 0;
  std::vector<NodeId> replicas{};
};
// An open partition: its first config and the metadata log index that
// opened it (a node that started with empty state tells by it whether the
// partition existed before its start: cluster-core/partition/).
struct OpenPartition {
  std::vector<NodeId> replicas{};
  uint64_t opened_at = 0;
  NodeId leader_pin = 0;  // PartitionLeaderPin; 0: the placement's first replica
  friend bool operator==(const OpenPartition&, const OpenPartition&) = default;
};
struct PartitionLeaderPin {
  uint32_t partition = 0;
  NodeId node = 0;  // 0 clears the pin
};
struct NodeDrain {
  NodeId node = 0;
  bool draining = false;
};
using Command = std::variant<RouteReset, RouteDelta, MemberUpsert, MemberGone, FreshCleared, CommitNotice,
                             PartitionOpen, PartitionLeaderPin, NodeDrain>;

std::vector<uint8_t> EncodeCommand(const Command& command);
std::optional<Command> DecodeCommand(const std::vector<uint8_t>& bytes);

class MetaState final : public StateMachine {
 public:
  using RouteObserver = std::function<void(NodeId node, const std::vector<RouteKey>& added,
                                           const std::vector<RouteKey>& removed)>;
  using RefusedObserver = std::function<void(NodeId node, uint64_t boot, uint64_t seq)>;
  // A member joined the committed member set (`present`) or left it
  // (MemberGone). `index` is the entry's log index (0 outside Apply): a
  // generation for the verdict, since MemberGone is the one decision about
  // a node's death that a majority made (docs/membership.md).
  using MemberObserver = std::function<void(NodeId node, bool present, uint64_t index)>;

  explicit MetaState(uint32_t partitions = ring::RingOptions{}.partitions,
                     uint32_t replicas = ring::RingOptions{}.replicas);

  // StateMachine
  void Apply(const raft::Entry& entry) override;
  std::vector<uint8_t> Snapshot() const override;
  bool Restore(const std::vector<uint8_t>& data) override;

  // Applies one command; false if it was refused (or malformed).
  bool ApplyCommand(const Command& command);

  void set_route_observer(RouteObserver fn) { route_observer_ = std::move(fn); }
  void set_refused_observer(RefusedObserver fn) { refused_observer_ = std::move(fn); }
  void set_member_observer(MemberObserver fn) { member_observer_ = std::move(fn); }
  // After every applied command other than CommitNotice.
  void set_applied_observer(std::function<void()> fn) { applied_observer_ = std::move(fn); }
  // After a command that opened partitions, changed the placement, a
  // leader pin or a drain, and after Restore (the partition layer's cue to reconcile its groups).
  void set_partitions_observer(std::function<void()> fn) { partitions_observer_ = std::move(fn); }

  const std::map<NodeId, MemberRecord>& members() const { return members_; }
  const std::map<NodeId, NodeRoutes>& routes() const { return routes_; }
  const NodeRoutes* RoutesOf(NodeId node) const;
  const Placement& placement() const { return placement_; }
  // Open partitions and the config each was opened with.
  const std::map<uint32_t, OpenPartition>& open_partitions() const { return open_partitions_; }
  // The partition's pinned leader (0: none, or the partition is not open).
  NodeId LeaderPinOf(uint32_t partition) const;
  // Nodes being drained (NodeDrain).
  const std::set<NodeId>& draining() const { return draining_; }
  bool IsDraining(NodeId node) const { return draining_.count(node) != 0; }
  size_t route_count() const;
  uint64_t refused_commands() const { return refused_; }

 private:
  bool Apply(const RouteReset& command);
  bool Apply(const RouteDelta& command);
  bool Apply(const MemberUpsert& command);
  bool Apply(const MemberGone& command);
  bool Apply(const FreshCleared& command);
  bool Apply(const CommitNotice&) { return true; }
  bool Apply(const PartitionOpen& command);
  bool Apply(const PartitionLeaderPin& command);
  bool Apply(const NodeDrain& command);
  void Replace(NodeId node, std::set<RouteKey> routes);
  void RecomputePlacement();
  void Notify(NodeId node, const std::vector<RouteKey>& added, const std::vector<RouteKey>& removed);

  std::map<NodeId, MemberRecord> members_;
  std::map<NodeId, NodeRoutes> routes_;
  Placement placement_;
  std::map<uint32_t, OpenPartition> open_partitions_;
  std::set<NodeId> draining_;
  uint64_t applying_index_ = 0;  // the entry being applied (0: outside Apply)
  uint64_t refused_ = 0;
  RouteObserver route_observer_;
  RefusedObserver refused_observer_;
  MemberObserver member_observer_;
  std::function<void()> applied_observer_;
  std::function<void()> partitions_observer_;
};

}  // namespace estuary::meta
