#include "cluster-core/meta/meta_group.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

namespace estuary::meta {

namespace {

std::string_view RoleName(raft::Role role) {
  switch (role) {
    case raft::Role::kFollower: return "follower";
    case raft::Role::kPreCandidate: return "precandidate";
    case raft::Role::kCandidate: return "candidate";
    case raft::Role::kLeader: return "leader";
  }
  return "unknown";
}

}  // namespace

MetaGroup::MetaGroup(RaftHost& host, persistence::StorageEngine& engine, MetaGroupConfig config)
    : host_(host),
      engine_(engine),
      config_(std::move(config)),
      state_(config_.partitions, config_.replicas) {
  state_.set_route_observer([this](NodeId node, const std::vector<RouteKey>& added,
                                   const std::vector<RouteKey>& removed) {
    if (route_observer_) route_observer_(node, added, removed);
  });
  state_.set_refused_observer([this](NodeId node, uint64_t boot, uint64_t) {
    if (node != config_.self || boot != config_.boot_id) return;
    ++counters_.deltas_refused;
    need_reset_ = true;
  });
  state_.set_applied_observer([this] {
    ScheduleCommitNotice();
    NoteMembers();
    // (Inside the apply: `applied()` counts the entry once it returns.)
    if (!leave_done_.empty()) host_.loop().Post(scope_.Guard([this] { CheckLeft(); }));
  });
}

// On the leader, once per loop iteration that applied commands: a no-op
// entry whose append tells every node the new commit index now.
void MetaGroup::ScheduleCommitNotice() {
  if (notice_scheduled_ || group_ == nullptr || group_->raft().role() != raft::Role::kLeader) return;
  notice_scheduled_ = true;
  host_.loop().Post(scope_.Guard([this] {
    notice_scheduled_ = false;
    if (group_->raft().role() == raft::Role::kLeader) group_->Propose(EncodeCommand(CommitNotice{}), {}, nullptr);
  }));
}

// A MemberGone for a node membership still reports live here: its own
// leave (Leave), or a verdict of a leader that lost it while this node
// still reaches it. Either way the node registers again (RouteReset)
// before it is re-admitted: a live node does so once it sees its record
// gone, a leaving one does not, and a new process always does.
void MetaGroup::NoteMembers() {
  for (const auto& [node, record] : live_) {
    if (state_.members().count(node) != 0) {
      admitted_.insert(node);
    } else if (admitted_.erase(node) != 0 && state_.RoutesOf(node) == nullptr) {
      unregistered_.insert(node);
    }
  }
  std::erase_if(unregistered_, [this](NodeId node) { return state_.RoutesOf(node) != nullptr; });
}

MetaGroup::~MetaGroup() {
  host_.loop().CancelTimer(reconcile_timer_);
  host_.loop().CancelTimer(leave_timer_);
}

Expected<void, std::string> MetaGroup::Start() {
  GroupConfig group;
  group.group = kMetaGroup;
  group.raft = config_.raft;
  group.raft.mode = raft::Mode::kTimestamp;
  group.snapshot_every = config_.snapshot_every;
  group.propose_timeout_ms = config_.propose_timeout_ms;
  // Used only if the engine holds no state for the group.
  if (!config_.has_seeds) group.bootstrap.voters = {config_.self};
  auto added = host_.AddGroup(std::move(group), engine_, state_);
  if (!added) return MakeError(added.error());
  group_ = *added;
  if (live_.count(config_.self) == 0) {
    live_[config_.self] = MemberRecord{config_.self, config_.cluster_address, 0};
  }
  ScheduleReconcile();
  return {};
}

Expected<void, std::string> MetaGroup::Bootstrap() {
  if (group_ == nullptr) return MakeError(std::string("the metadata group is not started"));
  if (auto booted = group_->Bootstrap(raft::Config{.voters = {config_.self}}); !booted) return booted;
  // From now on this node is the founder, as one started without seeds: its
  // route reset is not "fresh" (it never voted anywhere before), so the one
  // built while no leader was known is built again.
  config_.has_seeds = false;
  if (in_flight_ && in_flight_->failed) {
    in_flight_.reset();
    pending_.clear();  // the reset carries every desired route
    need_reset_ = true;
  }
  FlushRoutes();
  return {};
}

void MetaGroup::OnMemberLive(NodeId node, const std::string& address, uint64_t incarnation) {
  gone_.erase(node);
  live_[node] = MemberRecord{node, address, incarnation};
}

void MetaGroup::OnMemberGone(NodeId node) {
  if (node == config_.self) return;
  live_.erase(node);
  admitted_.erase(node);
  unregistered_.erase(node);
  gone_.insert(node);
}

// ---- leaving ------------------------------------------------------------

void MetaGroup::Leave(uint32_t timeout_ms, std::function<void(bool)> done) {
  if (done) leave_done_.push_back(std::move(done));
  if (!leaving_) spdlog::info("meta: node {} leaving the metadata group", config_.self);
  leaving_ = true;
  if (group_ == nullptr) return FinishLeave(false);
  if (Left()) return FinishLeave(true);
  if (!VotersLive()) return FinishLeave(false);
  if (leave_timer_ == 0) {
    leave_timer_ = host_.loop().AddTimer(timeout_ms, scope_.Guard([this] {
      leave_timer_ = 0;
      FinishLeave(Left());
    }));
  }
  ProposeLeave();
}

// Our MemberGone was applied here and what it clears is gone from this
// copy. (A route reset of this boot still in flight and applied after it
// brings a record back: then the node proposes MemberGone again.)
bool MetaGroup::Left() const {
  return leave_acked_index_ != 0 && group_->applied() >= leave_acked_index_ && LeftHere();
}

bool MetaGroup::LeftHere() const {
  return state_.members().count(config_.self) == 0 && state_.RoutesOf(config_.self) == nullptr &&
         !state_.IsDraining(config_.self);
}

// Gives up early when nothing can commit it: no majority of the voters is
// live in membership's view (the last nodes of a cluster stopped at once
// would otherwise each wait the whole timeout).
void MetaGroup::CheckLeft() {
  if (leave_done_.empty()) return;
  if (Left()) return FinishLeave(true);
  if (!VotersLive()) FinishLeave(false);
}

bool MetaGroup::VotersLive() const {
  const std::vector<raft::NodeId>& voters = group_->raft().config().voters;
  size_t live = 0;
  for (raft::NodeId voter : voters) {
    if (voter == config_.self || live_.count(static_cast<NodeId>(voter)) != 0) ++live;
  }
  return 2 * live > voters.size();
}

// One in flight; again (from Reconcile) after a failure, or when this copy
// has applied the one answered and still shows the node.
void MetaGroup::ProposeLeave() {
  if (leave_in_flight_ || leave_done_.empty()) return;
  if (leave_acked_index_ != 0 && (group_->applied() < leave_acked_index_ || LeftHere())) return;
  if (group_->raft().leader() == raft::kNoNode) return;  // Reconcile tries once a leader is known
  leave_in_flight_ = true;
  group_->Propose(EncodeCommand(MemberGone{config_.self}), {}, scope_.Guard([this](ProposeResult result) {
    leave_in_flight_ = false;
    if (result.status != ProposeStatus::kOk) return;
    leave_acked_index_ = std::max(leave_acked_index_, result.index);
    CheckLeft();
  }));
}

void MetaGroup::FinishLeave(bool left) {
  if (leave_timer_ != 0) host_.loop().CancelTimer(leave_timer_);
  leave_timer_ = 0;
  auto callbacks = std::move(leave_done_);
  leave_done_.clear();
  if (callbacks.empty()) return;
  if (left) {
    spdlog::info("meta: node {} left the metadata group (its MemberGone applied)", config_.self);
  } else {
    spdlog::warn("meta: node {} leaves without its MemberGone applied (no metadata majority, or none in time); a "
                 "drain of it stays until the others declare it gone",
                 config_.self);
  }
  for (auto& fn : callbacks) host_.loop().Post([fn = std::move(fn), left] { fn(left); });
}

// ---- routes ---------------------------------------------------------------

void MetaGroup::Change(const RouteKey& route, bool add) {
  if (add ? desired_.insert(route).second : desired_.erase(route) != 0) pending_[route] = add;
}

void MetaGroup::UpdateRoutes(const std::vector<RouteKey>& adds, const std::vector<RouteKey>& removes) {
  for (const RouteKey& route : adds) Change(route, true);
  for (const RouteKey& route : removes) Change(route, false);
  FlushRoutes();
}

void MetaGroup::UpdateRoutes(const std::vector<std::pair<RouteKey, bool>>& changes) {
  for (const auto& [route, add] : changes) Change(route, add);
  FlushRoutes();
}

void MetaGroup::ScheduleReconcile() {
  reconcile_timer_ = host_.loop().AddTimer(config_.reconcile_ms, scope_.Guard([this] {
    Reconcile();
    ScheduleReconcile();
  }));
}

void MetaGroup::Reconcile() {
  // Retried once a leader is known (before the first election, or while
  // cut off, every try would fail at once).
  if (leaving_) {
    CheckLeft();
    ProposeLeave();
  }
  if (in_flight_ && in_flight_->failed && !leaving_ && group_->raft().leader() != raft::kNoNode) {
    ++counters_.route_retries;
    SendInFlight();
  }
  // Our record vanished or carries another boot (MemberGone while we were
  // cut off, say): register again once our copy has caught up with the
  // last acknowledged route proposal.
  if (!leaving_ && !in_flight_ && !need_reset_ && acked_index_ > 0 && group_->applied() >= acked_index_) {
    const NodeRoutes* record = state_.RoutesOf(config_.self);
    if (!record || record->boot != config_.boot_id) need_reset_ = true;
  }
  FlushRoutes();
  ManageMembers();
}

// One route proposal in flight: everything changed meanwhile is the next.
void MetaGroup::FlushRoutes() {
  if (in_flight_ || group_ == nullptr || leaving_) return;
  Command command;
  if (need_reset_) {
    // A node that bootstrapped the group started empty by definition: only
    // a node that joins through seeds can have lost a vote it once cast.
    const bool fresh = group_->started_empty() && config_.has_seeds;
    RouteReset reset{config_.self, config_.boot_id, ++seq_, fresh,
                     {desired_.begin(), desired_.end()}};
    command = std::move(reset);
    need_reset_ = false;
    ++counters_.route_resets;
  } else if (!pending_.empty()) {
    RouteDelta delta{config_.self, config_.boot_id, ++seq_, {}, {}};
    for (const auto& [route, add] : pending_) (add ? delta.adds : delta.removes).push_back(route);
    command = std::move(delta);
    ++counters_.route_deltas;
  } else {
    return;
  }
  pending_.clear();
  const uint64_t producer = (uint64_t{config_.self} << 48) | (config_.boot_id & ((uint64_t{1} << 48) - 1));
  in_flight_ = InFlight{std::move(command), raft::WriteId{producer, seq_}, false};
  if (group_->raft().leader() == raft::kNoNode) {
    in_flight_->failed = true;  // sent by Reconcile once a leader is known
    return;
  }
  SendInFlight();
}

void MetaGroup::SendInFlight() {
  in_flight_->failed = false;
  const uint64_t seq = in_flight_->id.sequence;
  group_->Propose(EncodeCommand(in_flight_->command), in_flight_->id,
                  scope_.Guard([this, seq](ProposeResult result) { OnRouteAnswer(seq, result); }));
}

void MetaGroup::OnRouteAnswer(uint64_t seq, ProposeResult result) {
  if (!in_flight_ || in_flight_->id.sequence != seq) return;
  if (result.status != ProposeStatus::kOk) {
    in_flight_->failed = true;  // sent again, same write id, at the next reconcile
    return;
  }
  acked_index_ = std::max(acked_index_, result.index);
  in_flight_.reset();
  FlushRoutes();
}

void MetaGroup::ProposeMember(Command command) {
  member_in_flight_ = true;
  group_->Propose(EncodeCommand(command), {}, scope_.Guard([this](ProposeResult) { member_in_flight_ = false; }));
}

void MetaGroup::ManageMembers() {
  if (group_->raft().role() != raft::Role::kLeader) return;
  if (!member_in_flight_) {
    for (NodeId node : gone_) {
      if (state_.members().count(node) != 0 || state_.RoutesOf(node) != nullptr) {
        return ProposeMember(MemberGone{node});
      }
    }
    for (const auto& [node, record] : live_) {
      if (leaving_ && node == config_.self) continue;  // a new process registers
      if (unregistered_.count(node) != 0) continue;
      auto it = state_.members().find(node);
      if (it == state_.members().end() || it->second != record) return ProposeMember(MemberUpsert{record});
    }
    for (raft::NodeId id : group_->raft().config().learners) {
      const NodeRoutes* routes = state_.RoutesOf(static_cast<NodeId>(id));
      if (routes && routes->fresh) {
        return ProposeMember(FreshCleared{static_cast<NodeId>(id), routes->boot});
      }
    }
  }
  ManageConfig();
}

size_t MetaGroup::TargetVoters() const {
  size_t live = live_.size();
  if (live_.count(config_.self) == 0) ++live;
  if (live >= 5) return 5;
  if (live >= 3) return 3;
  return 1;
}

// At most one config change per call, and none while one is uncommitted.
bool MetaGroup::ManageConfig() {
  const raft::Raft& raft = group_->raft();
  if (raft.log().config_index() > raft.commit()) return false;
  const raft::Config& config = raft.config();
  auto change = [&](raft::ConfigChangeType type, raft::NodeId node) {
    if (group_->ChangeConfig({type, node})) {
      ++counters_.config_changes;
      spdlog::info("meta: config change {} node {}", static_cast<int>(type), node);
    }
    return true;
  };
  auto fresh = [&](raft::NodeId id) {
    const NodeRoutes* routes = state_.RoutesOf(static_cast<NodeId>(id));
    return routes != nullptr && routes->fresh;
  };
  const raft::NodeId self = config_.self;
  std::vector<raft::NodeId> members = config.voters;
  members.insert(members.end(), config.learners.begin(), config.learners.end());
  for (raft::NodeId id : members) {
    if (id != self && gone_.count(static_cast<NodeId>(id)) != 0) {
      return change(raft::ConfigChangeType::kRemove, id);
    }
  }
  for (raft::NodeId id : config.voters) {
    if (id != self && fresh(id)) return change(raft::ConfigChangeType::kRemove, id);
  }
  for (const auto& [node, record] : live_) {
    if (!config.Contains(node)) return change(raft::ConfigChangeType::kAddLearner, node);
  }
  const size_t target = TargetVoters();
  if (config.voters.size() < target) {
    std::vector<raft::NodeId> learners = config.learners;
    std::sort(learners.begin(), learners.end());
    for (raft::NodeId id : learners) {
      auto progress = raft.progress().find(id);
      const bool caught_up = progress != raft.progress().end() && progress->second.match >= raft.commit();
      const bool registered = state_.RoutesOf(static_cast<NodeId>(id)) != nullptr && !fresh(id);
      if (live_.count(static_cast<NodeId>(id)) != 0 && caught_up && registered) {
        return change(raft::ConfigChangeType::kPromoteLearner, id);
      }
    }
  } else if (config.voters.size() > target) {
    std::vector<raft::NodeId> voters = config.voters;
    std::sort(voters.rbegin(), voters.rend());
    for (raft::NodeId id : voters) {
      if (id != self) return change(raft::ConfigChangeType::kRemove, id);
    }
  }
  return false;
}

std::string MetaGroup::StatusJson() const {
  const raft::Raft& raft = group_->raft();
  nlohmann::json out;
  out["node"] = config_.self;
  out["boot"] = config_.boot_id;
  out["role"] = RoleName(raft.role());
  out["term"] = raft.term();
  out["leader"] = raft.leader();
  out["commit"] = raft.commit();
  out["applied"] = group_->applied();
  out["snapshot_index"] = raft.log().snapshot()->index;
  out["voters"] = raft.config().voters;
  out["learners"] = raft.config().learners;
  nlohmann::json members = nlohmann::json::array();
  for (const auto& [node, member] : state_.members()) {
    const NodeRoutes* routes = state_.RoutesOf(node);
    members.push_back({{"node", node},
                       {"address", member.address},
                       {"incarnation", member.incarnation},
                       {"boot", routes ? routes->boot : 0},
                       {"routes", routes ? routes->routes.size() : 0}});
  }
  out["members"] = members;
  out["placement"] = {{"epoch", state_.placement().epoch},
                      {"partitions", state_.placement().partitions},
                      {"replicas", state_.placement().replicas},
                      {"nodes", state_.placement().nodes}};
  nlohmann::json route_counts = nlohmann::json::object();
  for (const auto& [node, routes] : state_.routes()) route_counts[std::to_string(node)] = routes.routes.size();
  out["route_counts"] = route_counts;
  out["routes_total"] = state_.route_count();
  out["local_routes"] = desired_.size();
  out["routes_committed"] = routes_committed();
  return out.dump();
}

std::string MetaGroup::MetricsText() const {
  const raft::Raft& raft = group_->raft();
  const GroupCounters& group = group_->counters();
  std::string out;
  // Every family has HELP and TYPE (promtool check metrics; docs/monitoring/).
  auto metric = [&](std::string_view name, std::string_view type, std::string_view help, uint64_t value) {
    out += fmt::format("# HELP estuary_meta_{} {}\n# TYPE estuary_meta_{} {}\nestuary_meta_{}{{node=\"{}\"}} {}\n", name,
                       help, name, type, name, config_.self, value);
  };
  metric("is_leader", "gauge", "1 when this node leads the metadata raft group.",
         raft.role() == raft::Role::kLeader ? 1 : 0);
  metric("term", "gauge", "The metadata group's raft term as this node knows it.", raft.term());
  metric("commit_index", "gauge", "The metadata group's commit index on this node.", raft.commit());
  metric("applied_index", "gauge", "The metadata group's last entry applied on this node.", group_->applied());
  metric("voters", "gauge", "Voters of the metadata group.", raft.config().voters.size());
  metric("learners", "gauge", "Learners (non-voting members) of the metadata group.", raft.config().learners.size());
  metric("members", "gauge", "Cluster members in the metadata group's state.", state_.members().size());
  metric("routes", "gauge", "Routes (filter -> node) in the metadata group's route table.", state_.route_count());
  metric("placement_epoch", "gauge", "Epoch of the partition placement in force.", state_.placement().epoch);
  metric("route_resets_total", "counter", "Full route-table resets this node proposed.", counters_.route_resets);
  metric("route_deltas_total", "counter", "Route changes this node proposed.", counters_.route_deltas);
  metric("route_retries_total", "counter", "Route proposals this node sent again.", counters_.route_retries);
  metric("config_changes_total", "counter", "Metadata group membership changes proposed.", counters_.config_changes);
  metric("proposals_total", "counter", "Entries proposed to the metadata group by this node.", group.proposals);
  metric("proposals_failed_total", "counter", "Metadata proposals that failed (no leader, lost leadership).",
         group.proposals_failed);
  metric("snapshots_taken_total", "counter", "Metadata snapshots this node took.", group.snapshots_taken);
  metric("snapshots_installed_total", "counter", "Metadata snapshots installed from the leader.",
         group.snapshots_installed);
  metric("votes_refused_total", "counter", "Metadata vote requests this node refused.", group.votes_refused);
  return out;
}

}  // namespace estuary::meta
