#include "cluster-core/meta/meta_state.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "cluster-core/ring/ring.h"

namespace estuary::meta {

namespace {

enum CommandTag : uint8_t {
  kReset = 1,
  kDelta = 2,
  kUpsert = 3,
  kGone = 4,
  kFreshCleared = 5,
  kNotice = 6,
  kPartitionOpen = 7,
  kLeaderPin = 8,
  kDrain = 9,
};
// Version 2 appends the open partitions; version 3 each open partition's
// leader pin and the draining nodes. Versions 1 (no partitions) and 2 are
// still read.
constexpr uint8_t kSnapshotVersion = 3;

void PutNodes(ByteWriter& out, const std::vector<NodeId>& nodes) {
  out.U32(static_cast<uint32_t>(nodes.size()));
  for (NodeId node : nodes) out.U32(node);
}

void PutRoutes(ByteWriter& out, const auto& routes) {
  out.U32(static_cast<uint32_t>(routes.size()));
  for (const RouteKey& route : routes) {
    out.Bytes(route.filter);
    out.Bytes(route.share);
  }
}

std::vector<RouteKey> GetRoutes(ByteReader& in) {
  const uint32_t count = in.Count(8);
  std::vector<RouteKey> routes;
  routes.reserve(count);
  for (uint32_t i = 0; i < count && in.ok(); ++i) {
    RouteKey route;
    route.filter = std::string(in.Bytes());
    route.share = std::string(in.Bytes());
    routes.push_back(std::move(route));
  }
  return routes;
}

void PutMember(ByteWriter& out, const MemberRecord& member) {
  out.U32(member.node);
  out.Bytes(member.address);
  out.U64(member.incarnation);
}

MemberRecord GetMember(ByteReader& in) {
  MemberRecord member;
  const uint32_t node = in.U32();
  if (node == 0 || node > 0xFFFF) in.Fail();
  member.node = static_cast<NodeId>(node);
  member.address = std::string(in.Bytes());
  member.incarnation = in.U64();
  return member;
}

NodeId GetNode(ByteReader& in) {
  const uint32_t node = in.U32();
  if (node == 0 || node > 0xFFFF) in.Fail();
  return static_cast<NodeId>(node);
}

std::vector<NodeId> GetNodes(ByteReader& in) {
  const uint32_t count = in.Count(4);
  std::vector<NodeId> nodes;
  for (uint32_t i = 0; i < count && in.ok(); ++i) nodes.push_back(GetNode(in));
  return nodes;
}

std::vector<uint8_t> ToVector(std::string bytes) { return {bytes.begin(), bytes.end()}; }

}  // namespace

std::vector<uint8_t> EncodeCommand(const Command& command) {
  ByteWriter out;
  if (const auto* reset = std::get_if<RouteReset>(&command)) {
    out.U8(kReset);
    out.U32(reset->node);
    out.U64(reset->boot);
    out.U64(reset->seq);
    out.U8(reset->fresh ? 1 : 0);
    PutRoutes(out, reset->routes);
  } else if (const auto* delta = std::get_if<RouteDelta>(&command)) {
    out.U8(kDelta);
    out.U32(delta->node);
    out.U64(delta->boot);
    out.U64(delta->seq);
    PutRoutes(out, delta->adds);
    PutRoutes(out, delta->removes);
  } else if (const auto* upsert = std::get_if<MemberUpsert>(&command)) {
    out.U8(kUpsert);
    PutMember(out, upsert->member);
  } else if (const auto* gone = std::get_if<MemberGone>(&command)) {
    out.U8(kGone);
    out.U32(gone->node);
  } else if (const auto* cleared = std::get_if<FreshCleared>(&command)) {
    out.U8(kFreshCleared);
    out.U32(cleared->node);
    out.U64(cleared->boot);
  } else if (const auto* open = std::get_if<PartitionOpen>(&command)) {
    out.U8(kPartitionOpen);
    out.U32(open->partition);
    PutNodes(out, open->replicas);
  } else if (const auto* pin = std::get_if<PartitionLeaderPin>(&command)) {
    out.U8(kLeaderPin);
    out.U32(pin->partition);
    out.U32(pin->node);
  } else if (const auto* drain = std::get_if<NodeDrain>(&command)) {
    out.U8(kDrain);
    out.U32(drain->node);
    out.U8(drain->draining ? 1 : 0);
  } else {
    out.U8(kNotice);
  }
  return ToVector(out.Take());
}

std::optional<Command> DecodeCommand(const std::vector<uint8_t>& bytes) {
  ByteReader in(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  Command command;
  switch (in.U8()) {
    case kReset: {
      RouteReset reset;
      reset.node = GetNode(in);
      reset.boot = in.U64();
      reset.seq = in.U64();
      reset.fresh = in.Bool();
      reset.routes = GetRoutes(in);
      command = std::move(reset);
      break;
    }
    case kDelta: {
      RouteDelta delta;
      delta.node = GetNode(in);
      delta.boot = in.U64();
      delta.seq = in.U64();
      delta.adds = GetRoutes(in);
      delta.removes = GetRoutes(in);
      command = std::move(delta);
      break;
    }
    case kUpsert: command = MemberUpsert{GetMember(in)}; break;
    case kGone: command = MemberGone{GetNode(in)}; break;
    case kFreshCleared: {
      FreshCleared cleared;
      cleared.node = GetNode(in);
      cleared.boot = in.U64();
      command = cleared;
      break;
    }
    case kNotice: command = CommitNotice{}; break;
    case kPartitionOpen: {
      PartitionOpen open;
      open.partition = in.U32();
      open.replicas = GetNodes(in);
      command = std::move(open);
      break;
    }
    case kLeaderPin: {
      PartitionLeaderPin pin;
      pin.partition = in.U32();
      const uint32_t node = in.U32();
      if (node > 0xFFFF) in.Fail();  // 0 clears the pin
      pin.node = static_cast<NodeId>(node);
      command = pin;
      break;
    }
    case kDrain: {
      NodeDrain drain;
      drain.node = GetNode(in);
      drain.draining = in.Bool();
      command = drain;
      break;
    }
    default: return std::nullopt;
  }
  if (!in.done()) return std::nullopt;
  return command;
}

MetaState::MetaState(uint32_t partitions, uint32_t replicas) {
  placement_.partitions = partitions;
  placement_.replicas = replicas;
}

void MetaState::Apply(const raft::Entry& entry) {
  auto command = DecodeCommand(entry.data);
  if (!command) {
    ++refused_;
    return;
  }
  applying_index_ = entry.index;
  ApplyCommand(*command);
  applying_index_ = 0;
  if (applied_observer_ && !std::holds_alternative<CommitNotice>(*command)) applied_observer_();
}

bool MetaState::ApplyCommand(const Command& command) {
  const bool applied = std::visit([this](const auto& c) { return Apply(c); }, command);
  if (!applied) ++refused_;
  return applied;
}

const NodeRoutes* MetaState::RoutesOf(NodeId node) const {
  auto it = routes_.find(node);
  return it == routes_.end() ? nullptr : &it->second;
}

size_t MetaState::route_count() const {
  size_t count = 0;
  for (const auto& [node, routes] : routes_) count += routes.routes.size();
  return count;
}

void MetaState::Notify(NodeId node, const std::vector<RouteKey>& added,
                       const std::vector<RouteKey>& removed) {
  if (route_observer_ && (!added.empty() || !removed.empty())) route_observer_(node, added, removed);
}

// Sets the node's routes to `routes`, telling the observer the difference.
void MetaState::Replace(NodeId node, std::set<RouteKey> routes) {
  NodeRoutes& record = routes_[node];
  std::vector<RouteKey> added, removed;
  std::set_difference(routes.begin(), routes.end(), record.routes.begin(), record.routes.end(),
                      std::back_inserter(added));
  std::set_difference(record.routes.begin(), record.routes.end(), routes.begin(), routes.end(),
                      std::back_inserter(removed));
  record.routes = std::move(routes);
  Notify(node, added, removed);
}

bool MetaState::Apply(const RouteReset& command) {
  auto it = routes_.find(command.node);
  if (it != routes_.end() && it->second.boot == command.boot && command.seq <= it->second.seq) {
    return false;  // a late retry of an older reset
  }
  const bool new_boot = it == routes_.end() || it->second.boot != command.boot;
  Replace(command.node, std::set<RouteKey>(command.routes.begin(), command.routes.end()));
  NodeRoutes& record = routes_[command.node];
  // `fresh` belongs to a boot: a later reset of the same boot neither sets
  // nor clears it (FreshCleared does).
  if (new_boot) {
    record.returning = it != routes_.end();  // `it` is from before Replace made the record
    record.fresh = command.fresh;
    record.boot_index = applying_index_;
  }
  record.boot = command.boot;
  record.seq = command.seq;
  return true;
}

bool MetaState::Apply(const RouteDelta& command) {
  auto it = routes_.find(command.node);
  if (it == routes_.end() || it->second.boot != command.boot || command.seq != it->second.seq + 1) {
    if (refused_observer_) refused_observer_(command.node, command.boot, command.seq);
    return false;
  }
  std::set<RouteKey> routes = it->second.routes;
  for (const RouteKey& route : command.removes) routes.erase(route);
  for (const RouteKey& route : command.adds) routes.insert(route);
  it->second.seq = command.seq;
  Replace(command.node, std::move(routes));
  return true;
}

bool MetaState::Apply(const PartitionOpen& command) {
  if (command.partition >= placement_.partitions || command.replicas.empty()) return false;
  if (!open_partitions_.emplace(command.partition, OpenPartition{command.replicas, applying_index_}).second) {
    return true;  // open already
  }
  if (partitions_observer_) partitions_observer_();
  return true;
}

NodeId MetaState::LeaderPinOf(uint32_t partition) const {
  auto it = open_partitions_.find(partition);
  return it == open_partitions_.end() ? 0 : it->second.leader_pin;
}

bool MetaState::Apply(const PartitionLeaderPin& command) {
  auto it = open_partitions_.find(command.partition);
  if (it == open_partitions_.end()) return false;
  if (it->second.leader_pin == command.node) return true;
  it->second.leader_pin = command.node;
  if (partitions_observer_) partitions_observer_();
  return true;
}

bool MetaState::Apply(const NodeDrain& command) {
  if (command.node == 0) return false;
  const bool changed = command.draining ? draining_.insert(command.node).second : draining_.erase(command.node) > 0;
  if (changed && partitions_observer_) partitions_observer_();
  return true;
}

bool MetaState::Apply(const MemberUpsert& command) {
  if (command.member.node == 0) return false;
  const bool added = members_.count(command.member.node) == 0;
  MemberRecord& record = members_[command.member.node];
  record = command.member;
  RecomputePlacement();
  if (added && member_observer_) member_observer_(command.member.node, true, applying_index_);
  return true;
}

bool MetaState::Apply(const MemberGone& command) {
  const bool was_member = members_.erase(command.node) != 0;
  const bool known = was_member || routes_.count(command.node) > 0;
  if (auto it = routes_.find(command.node); it != routes_.end()) {
    Replace(command.node, {});
    routes_.erase(command.node);
  }
  // A node that left is neither a leader anyone should prefer nor one
  // being drained (if it comes back, it comes back undrained).
  draining_.erase(command.node);
  for (auto& [partition, open] : open_partitions_) {
    if (open.leader_pin == command.node) open.leader_pin = 0;
  }
  RecomputePlacement();
  if (was_member && member_observer_) member_observer_(command.node, false, applying_index_);
  return known;
}

bool MetaState::Apply(const FreshCleared& command) {
  auto it = routes_.find(command.node);
  if (it == routes_.end() || it->second.boot != command.boot) return false;
  it->second.fresh = false;
  return true;
}

void MetaState::RecomputePlacement() {
  std::vector<NodeId> nodes;
  for (const auto& [node, member] : members_) nodes.push_back(node);
  std::vector<std::vector<NodeId>> assignment;
  if (!nodes.empty()) {
    std::vector<std::string> names;
    for (NodeId node : nodes) names.push_back(std::to_string(node));
    ring::RingOptions options;
    options.partitions = placement_.partitions;
    options.replicas = placement_.replicas;
    auto ring = ring::Ring::Build(names, options);
    if (ring) {
      assignment.resize(placement_.partitions);
      for (uint32_t p = 0; p < placement_.partitions; ++p) {
        for (const std::string& name : ring->Replicas(p)) {
          assignment[p].push_back(static_cast<NodeId>(std::stoul(name)));
        }
      }
    }
  }
  const bool moved = assignment != placement_.assignment;
  if (moved) ++placement_.epoch;
  placement_.nodes = std::move(nodes);
  placement_.assignment = std::move(assignment);
  if (moved && partitions_observer_) partitions_observer_();
}

std::vector<uint8_t> MetaState::Snapshot() const {
  ByteWriter out;
  out.U8(kSnapshotVersion);
  out.U32(placement_.partitions);
  out.U32(placement_.replicas);
  out.U64(placement_.epoch);
  out.U32(static_cast<uint32_t>(members_.size()));
  for (const auto& [node, member] : members_) PutMember(out, member);
  out.U32(static_cast<uint32_t>(routes_.size()));
  for (const auto& [node, record] : routes_) {
    out.U32(node);
    out.U64(record.boot);
    out.U64(record.seq);
    out.U8(record.fresh ? 1 : 0);
    out.U64(record.boot_index);
    out.U8(record.returning ? 1 : 0);
    PutRoutes(out, record.routes);
  }
  out.U32(static_cast<uint32_t>(open_partitions_.size()));
  for (const auto& [partition, open] : open_partitions_) {
    out.U32(partition);
    PutNodes(out, open.replicas);
    out.U64(open.opened_at);
    out.U32(open.leader_pin);
  }
  PutNodes(out, std::vector<NodeId>(draining_.begin(), draining_.end()));
  return ToVector(out.Take());
}

bool MetaState::Restore(const std::vector<uint8_t>& data) {
  ByteReader in(std::string_view(reinterpret_cast<const char*>(data.data()), data.size()));
  const uint8_t version = in.U8();
  if (version < 1 || version > kSnapshotVersion) return false;
  Placement placement;
  placement.partitions = in.U32();
  placement.replicas = in.U32();
  placement.epoch = in.U64();
  std::map<NodeId, MemberRecord> members;
  const uint32_t member_count = in.Count(16);
  for (uint32_t i = 0; i < member_count && in.ok(); ++i) {
    MemberRecord member = GetMember(in);
    members[member.node] = std::move(member);
  }
  std::map<NodeId, NodeRoutes> routes;
  const uint32_t node_count = in.Count(25);
  for (uint32_t i = 0; i < node_count && in.ok(); ++i) {
    const NodeId node = GetNode(in);
    NodeRoutes& record = routes[node];
    record.boot = in.U64();
    record.seq = in.U64();
    record.fresh = in.Bool();
    if (version >= 2) {
      record.boot_index = in.U64();
      record.returning = in.Bool();
    }
    for (RouteKey& route : GetRoutes(in)) record.routes.insert(std::move(route));
  }
  std::map<uint32_t, OpenPartition> open_partitions;
  if (version >= 2) {
    const uint32_t open_count = in.Count(16);
    for (uint32_t i = 0; i < open_count && in.ok(); ++i) {
      const uint32_t partition = in.U32();
      OpenPartition& open = open_partitions[partition];
      open.replicas = GetNodes(in);
      open.opened_at = in.U64();
      if (version >= 3) {
        const uint32_t pin = in.U32();
        if (pin > 0xFFFF) in.Fail();
        open.leader_pin = static_cast<NodeId>(pin);
      }
    }
  }
  std::set<NodeId> draining;
  if (version >= 3) {
    for (NodeId node : GetNodes(in)) draining.insert(node);
  }
  if (!in.done()) return false;
  // Tell the observer what changed, node by node, then take the new state.
  std::set<NodeId> nodes;
  for (const auto& [node, record] : routes_) nodes.insert(node);
  for (const auto& [node, record] : routes) nodes.insert(node);
  for (NodeId node : nodes) {
    auto it = routes.find(node);
    Replace(node, it == routes.end() ? std::set<RouteKey>{} : it->second.routes);
  }
  routes_ = std::move(routes);
  members_ = std::move(members);
  open_partitions_ = std::move(open_partitions);
  draining_ = std::move(draining);
  placement_.partitions = placement.partitions;
  placement_.replicas = placement.replicas;
  RecomputePlacement();
  placement_.epoch = placement.epoch;
  if (partitions_observer_) partitions_observer_();
  return true;
}

}  // namespace estuary::meta
