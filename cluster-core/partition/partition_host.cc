#include "cluster-core/partition/partition_host.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>
#include <nlohmann/json.hpp>
#include <utility>

#include "cluster-core/partition/partition_frames.h"
#include "cluster-core/partition/partition_replica.h"
#include "cluster-core/ring/ring.h"

namespace estuary::partition {

namespace {

const char* RoleName(raft::Role role) {
  switch (role) {
    case raft::Role::kLeader:
      return "leader";
    case raft::Role::kCandidate:
      return "candidate";
    case raft::Role::kPreCandidate:
      return "pre-candidate";
    case raft::Role::kFollower:
      return "follower";
  }
  return "unknown";
}

bool Contains(const std::vector<NodeId>& nodes, raft::NodeId node) {
  return std::find(nodes.begin(), nodes.end(), node) != nodes.end();
}

}  // namespace


PartitionHost::PartitionHost(meta::RaftHost& host, cluster::Transport& transport, meta::MetaGroup& meta,
                             persistence::StorageEngine& engine, PartitionHostConfig config, MachineFactory factory)
    : host_(host),
      loop_(host.loop()),
      transport_(transport),
      meta_(meta),
      engine_(engine),
      config_(std::move(config)),
      factory_(std::move(factory)) {
  config_.raft.mode = raft::Mode::kTimestamp;
}

PartitionHost::~PartitionHost() { loop_.CancelTimer(reconcile_timer_); }

void PartitionHost::Start() {
  started_ = true;
  meta_.state().set_partitions_observer(scope_.Guard([this] {
    // Inside the meta group's apply: start groups on the next iteration.
    // A pin or a drain is acted on at once, not at the next reconcile.
    host_.loop().Post(scope_.Guard([this] { Reconcile(); }));
  }));
  StartGroups();
  ScheduleReconcile();
}

PartitionId PartitionHost::PartitionOf(std::string_view key) const {
  return ring::Ring::PartitionOf(key, partitions());
}

meta::RaftGroup* PartitionHost::group(PartitionId partition) {
  auto it = replicas_.find(partition);
  return it == replicas_.end() ? nullptr : it->second->group;
}

PartitionMachine* PartitionHost::machine(PartitionId partition) {
  auto it = replicas_.find(partition);
  return it == replicas_.end() ? nullptr : &it->second->machine();
}

const std::vector<NodeId>* PartitionHost::PlacedReplicas(PartitionId partition) const {
  const meta::Placement& placement = meta_.state().placement();
  if (partition >= placement.assignment.size()) return nullptr;
  return &placement.assignment[partition];
}

// --- groups -------------------------------------------------------------

// Whether this node may have voted in the partition's group before its
// store was lost (raft_host.h, the lost-state rule): only if it started
// with empty state (its metadata store was empty too: one data folder), an
// earlier boot of it was known to the cluster, and the partition was
// opened before this boot's first route reset. A node new to the cluster
// never voted anywhere, so a new group whose replicas all start empty can
// still elect. nullopt until this boot's reset is applied here.
std::optional<bool> PartitionHost::MayHaveVoted(uint64_t opened_at) const {
  if (!meta_.group().started_empty()) return false;
  const meta::NodeRoutes* routes = meta_.state().RoutesOf(config_.self);
  if (routes == nullptr || routes->boot != config_.boot_id) return std::nullopt;
  return routes->returning && opened_at <= routes->boot_index;
}

// Whether an open record may come from before this process started: only
// if this process started with an empty store and joined an existing
// cluster (a node that founds a new one has no earlier life in it), and the
// record was applied no later than this boot's first route reset. A node
// that kept its store holds every group it ever started. Called once
// MayHaveVoted has an answer (this boot's reset is applied).
bool PartitionHost::MayPredateThisProcess(uint64_t opened_at) const {
  if (!meta_.group().started_empty() || !meta_.config().has_seeds) return false;
  const meta::NodeRoutes* routes = meta_.state().RoutesOf(config_.self);
  return routes == nullptr || routes->boot != config_.boot_id || opened_at <= routes->boot_index;
}

void PartitionHost::StartGroups() {
  const auto& open = meta_.state().open_partitions();
  for (const auto& [partition, record] : open) {
    if (replicas_.count(partition) != 0) continue;
    const std::vector<NodeId>* placed = PlacedReplicas(partition);
    const bool named = Contains(record.replicas, config_.self);
    if (!named && (placed == nullptr || !Contains(*placed, config_.self))) continue;
    const std::optional<bool> may_have_voted = MayHaveVoted(record.opened_at);
    if (!may_have_voted) continue;  // the next reconcile tries again
    meta::GroupConfig group;
    group.group = GroupOf(partition);
    group.raft = config_.raft;
    group.snapshot_every = config_.snapshot_every;
    group.propose_timeout_ms = config_.attempt_timeout_ms;
    // A new partition's replicas (named by its open record) all start from
    // the record's config. A replica that may have voted in it before its
    // store was lost waits for the group's leader instead, and neither votes
    // nor stands until it has caught up (raft::Storage::lost_state). So does
    // the only replica of a record that the placement has grown past: the
    // group's config has moved on without it (it was opened while this node
    // was the whole cluster), and the record's config alone would let this
    // node elect itself on a fork of the group. (A partition whose only
    // replica lost its store, and still has no other, starts again empty.)
    // Only a record from before this process can be outgrown: one opened
    // while it ran names a group it never started (groups are never
    // dropped), which no other node can have run, since only this node
    // could elect a leader for it. A new cluster forming is the usual case:
    // node 1 opens partitions alone while the others join, and may first
    // see the record after a join has grown the placement.
    const bool outgrown = record.replicas.size() == 1 && record.replicas.front() == config_.self &&
                          placed != nullptr && placed->size() > 1 && MayPredateThisProcess(record.opened_at);
    const bool lost = *may_have_voted || outgrown;
    if (named && !lost) group.bootstrap.voters.assign(record.replicas.begin(), record.replicas.end());
    group.refuse_votes_when_empty = lost;
    // Idle partitions send nothing: node-level liveness (the owner calls
    // RaftHost::OnPeerDown/OnPeerUp) stands in for their heartbeats.
    group.quiesce = config_.quiesce;
    auto replica = std::make_unique<Replica>(*this, factory_(partition));
    auto added = host_.AddGroup(group, engine_, *replica);
    if (!added) {
      spdlog::error("partition {}: cannot start its group: {}", partition, added.error());
      continue;
    }
    replica->group = *added;
    // A new group's preferred leader (the record's first replica) stands at
    // once instead of after an election timeout (500-1000 ms): the write
    // that opened the partition is waiting for it.
    if (named && !lost && record.replicas.front() == config_.self && (*added)->started_empty() && !draining()) {
      (*added)->CampaignNow();
    }
    replicas_.emplace(partition, std::move(replica));
    ++counters_.groups_started;
    // A replica that lost its store waits for the leader, which may be
    // idle (quiescent) and not heartbeating: an empty read wakes it, and
    // its heartbeats then reach this node, which is caught up from there.
    if (lost) Read(partition, std::string(), nullptr, /*open_elsewhere=*/true);
    spdlog::debug("partition {}: group started (replicas {})", partition, fmt::join(record.replicas, ","));
  }
}

void PartitionHost::ScheduleReconcile() {
  reconcile_timer_ = host_.loop().AddTimer(config_.reconcile_ms, scope_.Guard([this] {
    Reconcile();
    ScheduleReconcile();
  }));
}

void PartitionHost::Reconcile() {
  StartGroups();
  const auto& open = meta_.state().open_partitions();
  for (auto& [partition, replica] : replicas_) {
    replica->Sweep();
    ReleaseStranded(*replica);  // leadership lost some other way (an election)
    // A new group's preferred leader stands again while the group never had
    // a leader: its first PreVotes may have reached replicas that had not
    // started the group yet (PreVote keeps this from disturbing a leader).
    const raft::Raft& raft = replica->group->raft();
    if (raft.term() <= 1 && raft.leader() == raft::kNoNode && raft.log().LastIndex() == 0) {
      auto record = open.find(partition);
      if (record != open.end() && record->second.replicas.front() == config_.self && !draining()) {
        replica->group->CampaignNow();
      }
    }
    if (replica->group->raft().role() == raft::Role::kLeader) {
      if (replica->led_term != replica->group->raft().term()) {
        replica->led_term = replica->group->raft().term();
        replica->led_since_ms = host_.loop().NowMs();
      }
      ManageConfig(partition, *replica);
    }
  }
}

// The leader's config policy (the header): one change at a time, towards
// the placement's replicas among the live members.
void PartitionHost::ManageConfig(PartitionId partition, Replica& replica) {
  const raft::Raft& raft = replica.group->raft();
  if (raft.log().config_index() > raft.commit()) return;
  const std::vector<NodeId>* placed = PlacedReplicas(partition);
  if (placed == nullptr || placed->empty()) return;
  const raft::Config& config = raft.config();
  const auto& members = meta_.state().members();
  auto change = [&](raft::ConfigChangeType type, raft::NodeId node) {
    if (replica.group->ChangeConfig({type, node})) {
      ++counters_.config_changes;
      spdlog::info("partition {}: config change {} node {}", partition, static_cast<int>(type), node);
    }
  };
  auto caught_up = [&](raft::NodeId node) {
    auto it = raft.progress().find(node);
    return it != raft.progress().end() && it->second.match >= raft.commit();
  };
  for (NodeId node : *placed) {
    if (!config.Contains(node) && members.count(node) != 0) return change(raft::ConfigChangeType::kAddLearner, node);
  }
  for (raft::NodeId node : config.learners) {
    if (Contains(*placed, node) && caught_up(node)) return change(raft::ConfigChangeType::kPromoteLearner, node);
  }
  size_t placed_voters = 0;
  for (raft::NodeId node : config.voters) placed_voters += Contains(*placed, node) ? 1 : 0;
  if (placed_voters >= placed->size()) {
    for (raft::NodeId node : config.voters) {
      if (!Contains(*placed, node) && node != config_.self) return change(raft::ConfigChangeType::kRemove, node);
    }
    for (raft::NodeId node : config.learners) {
      if (!Contains(*placed, node)) return change(raft::ConfigChangeType::kRemove, node);
    }
  }
  ManageLeadership(partition, replica, *placed);
}

// --- proposals ----------------------------------------------------------

void PartitionHost::Propose(PartitionId partition, std::string data, PartitionCallback done) {
  const uint64_t key = next_key_++;
  Pending pending;
  pending.partition = partition;
  pending.data = std::move(data);
  // The producer is this process (node and boot), so a retry after a
  // leader change is recognised and applied once.
  pending.id = raft::WriteId{(uint64_t{config_.self} << 48) ^ config_.boot_id, next_sequence_++};
  pending.done = std::move(done);
  pending.deadline_ms = host_.loop().NowMs() + config_.propose_timeout_ms;
  pending_.emplace(key, std::move(pending));
  ++counters_.proposals;
  host_.loop().Post(scope_.Guard([this, key] { Attempt(key); }));
}

void PartitionHost::Read(PartitionId partition, std::string query, PartitionCallback done, bool open_elsewhere) {
  const uint64_t key = next_key_++;
  Pending pending;
  pending.partition = partition;
  pending.data = std::move(query);
  pending.read = true;
  pending.open_elsewhere = open_elsewhere;
  pending.done = std::move(done);
  pending.deadline_ms = host_.loop().NowMs() + config_.propose_timeout_ms;
  pending_.emplace(key, std::move(pending));
  ++counters_.reads;
  host_.loop().Post(scope_.Guard([this, key] { Attempt(key); }));
}

void PartitionHost::Attempt(uint64_t key) {
  auto it = pending_.find(key);
  if (it == pending_.end()) return;
  Pending& pending = it->second;
  if (host_.loop().NowMs() >= pending.deadline_ms) return Finish(key, pending.last);
  if (pending.partition >= partitions()) {
    return Finish(key, {meta::ProposeStatus::kRejected, 0, std::nullopt});
  }
  ++pending.attempts;
  const auto& open = meta_.state().open_partitions();
  if (pending.read && open.count(pending.partition) == 0 && !pending.open_elsewhere) {
    return Finish(key, {meta::ProposeStatus::kOk, 0, std::nullopt});  // never written
  }
  if (!pending.read && open.count(pending.partition) == 0) {
    const std::vector<NodeId>* placed = PlacedReplicas(pending.partition);
    if (placed != nullptr && !placed->empty() && !pending.open_proposed) {
      pending.open_proposed = true;
      ++counters_.opens_proposed;
      meta::PartitionOpen command{pending.partition, *placed};
      meta_.group().Propose(meta::EncodeCommand(command), {}, nullptr);
    }
    return Retry(key, {meta::ProposeStatus::kNotLeader, 0, std::nullopt});
  }
  // Through this node's own group only while the placement names it: a
  // replica that was moved away may hold a group that no longer hears of
  // its config (it was removed) and would wait for a leader forever.
  // On the leader, straight into its group. A follower here sends it to
  // the leader like any other node does: the leader's answer carries the
  // result, where this node's own copy would have it only once the next
  // append or heartbeat tells it the commit (up to a heartbeat later).
  const std::vector<NodeId>* placed = PlacedReplicas(pending.partition);
  const bool placed_here = placed != nullptr && Contains(*placed, config_.self);
  auto local = replicas_.find(pending.partition);
  const bool leading = local != replicas_.end() && local->second->group->raft().role() == raft::Role::kLeader;
  const bool leader_known = local != replicas_.end() && local->second->group->raft().leader() != raft::kNoNode;
  // A replica that lost its store and has not heard from the leader yet
  // has no config to campaign with: the write goes to the likely leader.
  const bool barred = local != replicas_.end() && local->second->group->raft().votes_barred();
  auto answered = scope_.Guard([this, key](PartitionResult result) {
    if (result.status == meta::ProposeStatus::kOk) return Finish(key, std::move(result));
    Retry(key, std::move(result));
  });
  if (pending.read && placed_here && leading) return ReadLocal(pending.partition, pending.data, std::move(answered));
  if (!pending.read && placed_here && local != replicas_.end() && (leading || (!leader_known && !barred))) {
    ProposeLocal(pending.partition, pending.data, pending.id, scope_.Guard([this, key](PartitionResult result) {
      if (result.status == meta::ProposeStatus::kOk) return Finish(key, std::move(result));
      Retry(key, std::move(result));
    }));
    return;
  }
  // Not a replica: ask the one most likely to lead.
  const NodeId target = LikelyLeader(pending.partition, pending.failed_target);
  pending.target = target;
  if (target == 0) return Retry(key, {meta::ProposeStatus::kNotLeader, 0, std::nullopt});
  cluster::SendResult sent;
  if (pending.read) {
    ++counters_.reads_remote;
    sent = transport_.Send(target, kPartitionRead, Encode(ProposeFrame{key, pending.partition, {}, pending.data}));
  } else {
    ++counters_.proposals_remote;
    sent = transport_.Send(target, kPartitionPropose,
                           Encode(ProposeFrame{key, pending.partition, pending.id, pending.data}));
  }
  if (sent == cluster::SendResult::kNoLink) {
    // No link to it (the leader this node knew has just died, or is cut
    // off): another is asked after retry_ms, not after attempt_timeout_ms.
    // A takeover that starts during the election of a partition the dead
    // node led then reads as soon as the new leader is up (it waited a
    // whole attempt timeout, 1 s, before: docs/reliability.md).
    pending.failed_target = target;
    return Retry(key, {meta::ProposeStatus::kTimeout, 0, std::nullopt});
  }
  const uint32_t attempt = pending.attempts;
  host_.loop().AddTimer(config_.attempt_timeout_ms, scope_.Guard([this, key, attempt] {
    auto waiting = pending_.find(key);
    if (waiting == pending_.end() || waiting->second.attempts != attempt) return;
    waiting->second.failed_target = waiting->second.target;
    Retry(key, {meta::ProposeStatus::kTimeout, 0, std::nullopt});
  }));
}

void PartitionHost::Retry(uint64_t key, PartitionResult result) {
  auto it = pending_.find(key);
  if (it == pending_.end()) return;
  Pending& pending = it->second;
  pending.last = std::move(result);
  // Straight away when an answer named a leader not yet asked (a few times
  // per proposal at most); after retry_ms otherwise (an election or a
  // partition being opened is under way).
  auto hint = leader_hints_.find(pending.partition);
  const bool redirect = pending.last.status == meta::ProposeStatus::kNotLeader && hint != leader_hints_.end() &&
                        hint->second != pending.target && pending.redirects < 3;
  const uint32_t delay = redirect ? 0 : config_.retry_ms;
  if (host_.loop().NowMs() + delay >= pending.deadline_ms) return Finish(key, pending.last);
  ++counters_.retries;
  pending.redirects += redirect ? 1 : 0;
  ++pending.attempts;  // a late answer to the last attempt is still taken (Finish once)
  host_.loop().AddTimer(delay, scope_.Guard([this, key] { Attempt(key); }));
}

void PartitionHost::Finish(uint64_t key, PartitionResult result) {
  auto it = pending_.find(key);
  if (it == pending_.end()) return;
  PartitionCallback done = std::move(it->second.done);
  const bool read = it->second.read;
  pending_.erase(it);
  if (result.status != meta::ProposeStatus::kOk) ++(read ? counters_.reads_failed : counters_.proposals_failed);
  if (done) done(std::move(result));
}

// On a replica. A group with fewer voters than the placement has replicas
// for it is not offered writes: a partition opened while the metadata knew
// fewer members (a cluster starting) begins with fewer voters, and a write
// acknowledged by the majority of that smaller group could die with one
// node. The leader's config policy fills the group within a few reconciles.
void PartitionHost::ProposeLocal(PartitionId partition, std::string data, raft::WriteId id, PartitionCallback done) {
  Replica& replica = *replicas_.at(partition);
  const std::vector<NodeId>* placed = PlacedReplicas(partition);
  const size_t wanted = placed == nullptr ? 1 : placed->size();
  if (replica.group->raft().config().voters.size() < wanted) {
    host_.loop().Post([done = std::move(done)] { done({meta::ProposeStatus::kNotLeader, 0, std::nullopt}); });
    return;
  }
  // Answered once: by the group, or by ReleaseStranded if leadership moves first.
  auto once = std::make_shared<PartitionCallback>(std::move(done));
  auto answer = [once](PartitionResult result) {
    if (!*once) return;
    PartitionCallback call = std::move(*once);
    *once = nullptr;
    call(std::move(result));
  };
  const raft::Raft& raft = replica.group->raft();
  if (replica.stranded.size() >= 2 * replica.stranded_pruned_at + 64) {
    std::erase_if(replica.stranded, [](const Replica::Stranded& entry) { return entry.once.expired(); });
    replica.stranded_pruned_at = replica.stranded.size();
  }
  replica.stranded.push_back({once, raft.term(), raft.role(), raft.leader()});
  // Not the leader: a campaign may be holding it; watch for the outcome.
  if (raft.role() != raft::Role::kLeader) WatchStranded();
  replica.group->Propose(std::vector<uint8_t>(data.begin(), data.end()), id,
                         scope_.Guard([this, partition, id,
                                       answer = std::move(answer)](meta::ProposeResult result) mutable {
                           Replica& target = *replicas_.at(partition);
                           if (result.status != meta::ProposeStatus::kOk) {
                             return answer({result.status, result.index, std::nullopt});
                           }
                           const raft::Index index = result.index;
                           target.WhenApplied(index, [&target, index, id, answer = std::move(answer)] {
                             answer({meta::ProposeStatus::kOk, index, target.ResultOf(id)});
                           });
                         }));
}

// On the leader: the lease read barrier, then the machine's answer.
void PartitionHost::ReadLocal(PartitionId partition, std::string query, PartitionCallback done) {
  replicas_.at(partition)->group->ReadBarrier(scope_.Guard([this, partition, query = std::move(query),
                                                            done = std::move(done)](meta::ProposeResult result) {
    auto replica = replicas_.find(partition);
    if (result.status != meta::ProposeStatus::kOk || replica == replicas_.end()) {
      return done({result.status == meta::ProposeStatus::kOk ? meta::ProposeStatus::kNotLeader : result.status,
                   result.index, std::nullopt});
    }
    done({meta::ProposeStatus::kOk, result.index, replica->second->machine().Query(query)});
  }));
}

NodeId PartitionHost::KnownLeader(PartitionId partition) const {
  if (auto local = replicas_.find(partition); local != replicas_.end()) {
    if (const auto leader = static_cast<NodeId>(local->second->group->raft().leader()); leader != 0) return leader;
  }
  if (auto hint = leader_hints_.find(partition); hint != leader_hints_.end() && hint->second != 0) return hint->second;
  const std::vector<NodeId>* placed = PlacedReplicas(partition);
  return placed != nullptr && !placed->empty() ? placed->front() : 0;
}

bool PartitionHost::Leads(PartitionId partition) const {
  auto local = replicas_.find(partition);
  return local != replicas_.end() && local->second->group->raft().role() == raft::Role::kLeader;
}

NodeId PartitionHost::LikelyLeader(PartitionId partition, NodeId failed) const {
  if (auto local = replicas_.find(partition); local != replicas_.end()) {
    const auto leader = static_cast<NodeId>(local->second->group->raft().leader());
    if (leader != 0 && leader != config_.self && leader != failed) return leader;
  }
  std::vector<NodeId> candidates;
  if (auto hint = leader_hints_.find(partition); hint != leader_hints_.end() && hint->second != failed) {
    return hint->second;
  }
  if (const std::vector<NodeId>* placed = PlacedReplicas(partition)) candidates = *placed;
  const auto& open = meta_.state().open_partitions();
  if (auto record = open.find(partition); record != open.end()) {
    for (NodeId node : record->second.replicas) {
      if (!Contains(candidates, node)) candidates.push_back(node);
    }
  }
  candidates.erase(std::remove(candidates.begin(), candidates.end(), config_.self), candidates.end());
  if (candidates.empty()) return 0;
  // After a failed one, the next in the list.
  auto at = std::find(candidates.begin(), candidates.end(), failed);
  if (at == candidates.end()) return candidates.front();
  ++at;
  return at == candidates.end() ? candidates.front() : *at;
}

void PartitionHost::OnFrame(NodeId from, uint8_t type, std::string_view body) {
  switch (type) {
    case kPartitionPropose:
      return OnProposeFrame(from, body);
    case kPartitionProposed:
    case kPartitionReadAnswer:  // the same layout; pending requests are keyed alike
      return OnProposedFrame(body);
    case kPartitionRead:
      return OnReadFrame(from, body);
    default:
      ++counters_.bad_frames;
      spdlog::debug("partition: node {} sent unknown frame type {:#x}", from, type);
  }
}

void PartitionHost::OnProposeFrame(NodeId from, std::string_view body) {
  auto frame = DecodePropose(body);
  if (!frame) {
    ++counters_.bad_frames;
    spdlog::warn("partition: malformed propose frame from node {}", from);
    return;
  }
  ++counters_.proposals_served;
  const uint64_t request = frame->request;
  auto answer = [this, from, request, partition = frame->partition](PartitionResult result) {
    NodeId leader = 0;
    if (auto it = replicas_.find(partition); it != replicas_.end()) {
      leader = static_cast<NodeId>(it->second->group->raft().leader());
    }
    transport_.Send(from, kPartitionProposed,
                    Encode(ProposedFrame{request, result.status, result.index, leader, std::move(result.result)}));
  };
  const std::vector<NodeId>* placed = PlacedReplicas(frame->partition);
  if (replicas_.count(frame->partition) == 0 || placed == nullptr || !Contains(*placed, config_.self)) {
    return answer({meta::ProposeStatus::kNotLeader, 0, std::nullopt});
  }
  // A follower that knows the leader names it (the answer carries it)
  // rather than forwarding: the asker's next attempt goes there directly,
  // one round trip, and gets the leader's result.
  const raft::Raft& raft = replicas_.at(frame->partition)->group->raft();
  if (raft.role() != raft::Role::kLeader && raft.leader() != raft::kNoNode) {
    return answer({meta::ProposeStatus::kNotLeader, 0, std::nullopt});
  }
  ProposeLocal(frame->partition, std::move(frame->data), frame->id,
               scope_.Guard([answer](PartitionResult result) { answer(std::move(result)); }));
}

void PartitionHost::OnReadFrame(NodeId from, std::string_view body) {
  auto frame = DecodePropose(body);
  if (!frame) {
    ++counters_.bad_frames;
    spdlog::warn("partition: malformed read frame from node {}", from);
    return;
  }
  ++counters_.reads_served;
  const uint64_t request = frame->request;
  auto answer = [this, from, request, partition = frame->partition](PartitionResult result) {
    NodeId leader = 0;
    if (auto it = replicas_.find(partition); it != replicas_.end()) {
      leader = static_cast<NodeId>(it->second->group->raft().leader());
    }
    transport_.Send(from, kPartitionReadAnswer,
                    Encode(ProposedFrame{request, result.status, result.index, leader, std::move(result.result)}));
  };
  auto local = replicas_.find(frame->partition);
  if (local == replicas_.end() || local->second->group->raft().role() != raft::Role::kLeader) {
    return answer({meta::ProposeStatus::kNotLeader, 0, std::nullopt});
  }
  ReadLocal(frame->partition, std::move(frame->data),
            scope_.Guard([answer](PartitionResult result) { answer(std::move(result)); }));
}

void PartitionHost::OnProposedFrame(std::string_view body) {
  auto frame = DecodeProposed(body);
  if (!frame) {
    ++counters_.bad_frames;
    return;
  }
  auto it = pending_.find(frame->request);
  if (it == pending_.end()) return;
  if (frame->leader != 0) {
    leader_hints_[it->second.partition] = frame->leader;
  } else if (frame->status != meta::ProposeStatus::kOk) {
    leader_hints_.erase(it->second.partition);
  }
  if (frame->status == meta::ProposeStatus::kOk) {
    return Finish(frame->request, {frame->status, frame->index, std::move(frame->result)});
  }
  it->second.failed_target = it->second.target;
  Retry(frame->request, {frame->status, frame->index, std::nullopt});
}

// --- reporting ----------------------------------------------------------

std::string PartitionHost::StatusJson() const {
  nlohmann::json out;
  out["node"] = config_.self;
  out["partitions"] = partitions();
  out["placement_epoch"] = meta_.state().placement().epoch;
  nlohmann::json open = nlohmann::json::array();
  for (const auto& [partition, record] : meta_.state().open_partitions()) {
    nlohmann::json entry;
    entry["partition"] = partition;
    entry["opened_with"] = record.replicas;
    if (record.leader_pin != 0) entry["pin"] = record.leader_pin;
    if (const std::vector<NodeId>* placed = PlacedReplicas(partition)) entry["placed"] = *placed;
    if (auto it = replicas_.find(partition); it != replicas_.end()) {
      const raft::Raft& raft = it->second->group->raft();
      entry["role"] = RoleName(raft.role());
      entry["leader"] = raft.leader();
      entry["term"] = raft.term();
      entry["commit"] = raft.commit();
      entry["applied"] = it->second->group->applied();
      entry["last_index"] = raft.log().LastIndex();
      entry["voters"] = raft.config().voters;
      entry["learners"] = raft.config().learners;
      if (raft.role() == raft::Role::kLeader) {
        nlohmann::json lag = nlohmann::json::object();
        for (const auto& [node, progress] : raft.progress()) {
          lag[std::to_string(node)] = raft.log().LastIndex() - std::min(progress.match, raft.log().LastIndex());
        }
        entry["lag"] = lag;
      }
    }
    open.push_back(std::move(entry));
  }
  out["open"] = std::move(open);
  out["leading"] = leading();
  out["draining"] = std::vector<NodeId>(meta_.state().draining().begin(), meta_.state().draining().end());
  return out.dump();
}

std::string PartitionHost::MetricsText() const {
  std::string out;
  auto series = [&out](const char* name, const char* type, const char* help, uint64_t value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, value);
  };
  const size_t leading = this->leading();
  series("estuary_partition_open", "gauge", "Partitions opened in the cluster (raft groups).",
         meta_.state().open_partitions().size());
  series("estuary_partition_groups", "gauge", "Partition groups this node holds a replica of.", replicas_.size());
  series("estuary_partition_leading", "gauge", "Partition groups this node leads.", leading);
  series("estuary_partition_proposals_total", "counter", "Writes proposed to partitions from this node.",
         counters_.proposals);
  series("estuary_partition_proposals_remote_total", "counter",
         "Proposal attempts sent to another node (this one holds no replica).", counters_.proposals_remote);
  series("estuary_partition_proposals_served_total", "counter", "Proposals other nodes sent here.",
         counters_.proposals_served);
  series("estuary_partition_proposals_failed_total", "counter", "Proposals that failed at their deadline.",
         counters_.proposals_failed);
  series("estuary_partition_retries_total", "counter", "Proposal attempts made again.", counters_.retries);
  series("estuary_partition_reads_total", "counter", "Linearizable reads of partitions from this node.",
         counters_.reads);
  series("estuary_partition_reads_served_total", "counter", "Reads other nodes sent here.", counters_.reads_served);
  series("estuary_partition_reads_failed_total", "counter", "Reads that failed at their deadline.",
         counters_.reads_failed);
  series("estuary_partition_config_changes_total", "counter", "Config changes this node's leaders made.",
         counters_.config_changes);
  series("estuary_partition_leader_transfers_total", "counter",
         "Leadership handed to the preferred replica (the pin, else the placement's first).",
         counters_.leader_transfers);
  series("estuary_partition_drain_transfers_total", "counter", "Leadership handed away while this node drains.",
         counters_.drain_transfers);
  series("estuary_partition_transfer_requests_total", "counter", "Leadership moves requested here (transfer-leader).",
         counters_.transfer_requests);
  series("estuary_partition_draining", "gauge", "1 while this node is being drained.", draining() ? 1 : 0);
  return out;
}

}  // namespace estuary::partition
