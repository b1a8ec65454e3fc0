#include "cluster-core/cluster/cluster_agent.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <mutex>
#include <tuple>

namespace estuary::cluster {

// The shards' side: every call hops to the agent's loop.
class ClusterAgent::Port final : public core::ClusterPort {
 public:
  Port(ClusterAgent& agent, Poster post) : agent_(agent), post_(std::move(post)) {}
  void RouteChanged(const core::RouteUpdate& update) override {
    Run([update](ClusterAgent& agent) { agent.OnRouteChanged(update); });
  }
  // Forwards are batched per origin shard: one post per batch, not one
  // per forward (the batch keeps their order).
  void Forward(uint16_t node, core::NodeForward forward) override {
    const uint16_t shard = forward.origin_shard;
    ForwardBatch& batch = forward_batches_[shard];
    bool first = false;
    {
      std::lock_guard lock(batch.mutex);
      first = batch.forwards.empty();
      batch.forwards.emplace_back(node, std::move(forward));
    }
    if (first) Run([shard](ClusterAgent& agent) { agent.port_->TakeForwards(shard, agent); });
  }
  bool RetainedOnPartitions() const override { return retained_on_partitions_.load(std::memory_order_acquire); }
  void RetainedToPartition(const MessagePtr& message, uint16_t origin_shard, uint64_t safe_token) override {
    Run([message, origin_shard, safe_token](ClusterAgent& agent) {
      agent.OnRetainedToPartition(message, origin_shard, safe_token);
    });
  }
  void ReadRetained(uint16_t shard, const std::string& filter, RetainedReadDone done) override {
    Run([shard, filter, done = std::move(done)](ClusterAgent& agent) mutable {
      agent.OnReadRetained(shard, filter, std::move(done));
    });
  }
  void set_retained_on_partitions(bool on) { retained_on_partitions_.store(on, std::memory_order_release); }
  // Partitioned groups' queues live on the same partitions.
  bool QueuesOnPartitions() const override { return retained_on_partitions_.load(std::memory_order_acquire); }
  void AppendToGroupQueue(const MessagePtr& message, const std::string& key, uint16_t origin_shard,
                          uint64_t safe_token) override {
    Run([message, key, origin_shard, safe_token](ClusterAgent& agent) {
      agent.OnAppendToGroupQueue(message, key, origin_shard, safe_token);
    });
  }
  void GroupQueueHandoff(uint64_t handoff, bool taken) override {
    Run([handoff, taken](ClusterAgent& agent) { agent.OnGroupQueueHandoff(handoff, taken); });
  }
  bool HandsOnGroupQueues() const override { return hands_on_group_queues_.load(std::memory_order_acquire); }
  void set_hands_on_group_queues(bool on) { hands_on_group_queues_.store(on, std::memory_order_release); }
  void GroupQueueHand(uint64_t handoff, std::string client_id) override {
    Run([handoff, client_id = std::move(client_id)](ClusterAgent& agent) mutable {
      agent.OnGroupQueueHand(handoff, std::move(client_id));
    });
  }
  void GroupSessionArrived(std::string client_id, std::vector<std::string> keys,
                           std::vector<MessageId> held) override {
    Run([client_id = std::move(client_id), keys = std::move(keys), held = std::move(held)](ClusterAgent& agent) {
      agent.OnGroupSessionArrived(client_id, keys, held);
    });
  }
  void GroupConsumersOn(uint16_t shard, std::vector<std::string> keys) override {
    Run([shard, keys = std::move(keys)](ClusterAgent& agent) mutable {
      agent.OnGroupConsumersOn(shard, std::move(keys));
    });
  }
  bool SessionsOnPartitions() const override { return sessions_on_partitions_.load(std::memory_order_acquire); }
  bool GroupKeysInRecords() const override { return group_keys_in_records_.load(std::memory_order_acquire); }
  void set_group_keys_in_records(bool on) { group_keys_in_records_.store(on, std::memory_order_release); }
  void ReplicateSessions(uint16_t shard, std::vector<core::store::SessionChange> changes,
                         std::function<void()> done) override {
    Run([shard, changes = std::move(changes), done = std::move(done)](ClusterAgent& agent) mutable {
      agent.OnReplicateSessions(shard, std::move(changes), std::move(done));
    });
  }
  void ConfirmRecovered(uint16_t shard, std::vector<std::string> client_ids) override {
    Run([shard, client_ids = std::move(client_ids)](ClusterAgent& agent) mutable {
      for (const std::string& client : client_ids) agent.ConfirmRecoveredSession(shard, client, 0);
    });
  }
  void SessionCopyReplaced(uint16_t /*shard*/, std::string client_id, uint64_t fence) override {
    Run([client_id = std::move(client_id), fence](ClusterAgent& agent) {
      agent.OnSessionCopyReplaced(client_id, fence);
    });
  }
  void SessionLeftBehind(std::string client_id, std::vector<core::Delivery> deliveries) override {
    Run([client_id = std::move(client_id), deliveries = std::move(deliveries)](ClusterAgent& agent) mutable {
      agent.OnSessionLeftBehind(client_id, std::move(deliveries));
    });
  }
  void MovedStubOpened(uint16_t shard, std::string client_id, uint64_t stub,
                       std::vector<std::string> filters) override {
    Run([shard, client_id = std::move(client_id), stub, filters = std::move(filters)](ClusterAgent& agent) mutable {
      agent.moved_stubs_->Opened(shard, client_id, stub, std::move(filters));
    });
  }
  void MovedStubDeliveries(uint16_t shard, std::string client_id, std::vector<core::Delivery> deliveries,
                           std::function<void()> done) override {
    Run([shard, client_id = std::move(client_id), deliveries = std::move(deliveries),
         done = std::move(done)](ClusterAgent& agent) mutable {
      agent.OnMovedStubDeliveries(shard, client_id, std::move(deliveries), std::move(done));
    });
  }
  void HandOffTaken(uint16_t from, uint64_t handoff, bool taken) override {
    Run([from, handoff, taken](ClusterAgent& agent) { agent.OnHandOffTaken(from, handoff, taken); });
  }
  void set_sessions_on_partitions(bool on) { sessions_on_partitions_.store(on, std::memory_order_release); }
  // Batched too: every shard's confirmations in one list, one post per batch.
  void ForwardSafe(uint16_t origin, uint64_t forward_id) override {
    bool first = false;
    {
      std::lock_guard lock(safe_mutex_);
      first = safe_batch_.empty();
      safe_batch_.emplace_back(origin, forward_id);
    }
    if (first) Run([](ClusterAgent& agent) { agent.port_->TakeForwardSafes(agent); });
  }

 private:
  std::atomic<bool> retained_on_partitions_{false};
  std::atomic<bool> sessions_on_partitions_{false};
  std::atomic<bool> group_keys_in_records_{true};
  std::atomic<bool> hands_on_group_queues_{true};
  struct ForwardBatch {
    std::mutex mutex;
    std::vector<std::pair<uint16_t, core::NodeForward>> forwards;
  };
  // On the agent's loop: the batch is swapped out under its lock (the
  // shard may be adding to it meanwhile on its own thread) and handed over.
  void TakeForwards(uint16_t shard, ClusterAgent& agent) {
    std::vector<std::pair<uint16_t, core::NodeForward>> taken;
    taken.swap(spare_forwards_);  // a vector that has grown already
    {
      std::lock_guard lock(forward_batches_[shard].mutex);
      taken.swap(forward_batches_[shard].forwards);
    }
    for (auto& [node, forward] : taken) agent.OnForward(node, std::move(forward));
    taken.clear();
    spare_forwards_.swap(taken);
  }
  void TakeForwardSafes(ClusterAgent& agent) {
    std::vector<std::pair<uint16_t, uint64_t>> taken;
    taken.swap(spare_safes_);
    {
      std::lock_guard lock(safe_mutex_);
      taken.swap(safe_batch_);
    }
    for (const auto& [origin, forward_id] : taken) agent.OnForwardSafe(origin, forward_id);
    taken.clear();
    spare_safes_.swap(taken);
  }

  template <typename Fn>
  void Run(Fn fn) {
    // Guarded on the calling shard's thread (the agent must be alive there,
    // as for the weak_ptr this replaced); checked on the agent's own thread.
    ClusterAgent* agent = &agent_;
    post_(agent_.scope_.Guard([agent, fn = std::move(fn)]() mutable { fn(*agent); }));
  }
  ClusterAgent& agent_;
  Poster post_;
  std::vector<ForwardBatch> forward_batches_ = std::vector<ForwardBatch>(agent_.config_.shard_count);
  std::vector<std::pair<uint16_t, core::NodeForward>> spare_forwards_;       // the agent's loop only
  std::mutex safe_mutex_;
  std::vector<std::pair<uint16_t, uint64_t>> safe_batch_;
  std::vector<std::pair<uint16_t, uint64_t>> spare_safes_;  // the agent's loop only
};

ClusterAgent::ClusterAgent(ClusterAgentConfig config, io::Loop& loop, Transport& transport,
                           core::ShardLink& shards, Poster post_here)
    : config_(config),
      loop_(loop),
      transport_(transport),
      shards_(shards),
      port_(std::make_unique<Port>(*this, std::move(post_here))),
      pending_credits_(config.shard_count),
      // A copy comes at most a park timeout after its original (then the
      // sender gives the forward up); memory: about 120 bytes an entry.
      forward_dedup_(int64_t{config.park_timeout_ms} + config.forward_timeout_ms + 5000, 1'000'000),
      shard_items_(config.shard_count) {
  // Unique to this process (hands made by an earlier one are settled).
  incarnation_ = config_.incarnation != 0 ? config_.incarnation : static_cast<uint64_t>(loop_.clock().WallMs());
  HandleFrames(kClusterFrames, [this](NodeId from, uint8_t type, std::string_view body) {
    OnClusterFrame(from, type, body);
  });
  HandleFrames(kQueueFrames,
               [this](NodeId from, uint8_t type, std::string_view body) { OnQueueFrame(from, type, body); });
  transport_.set_handler(this);
  tick_timer_ = loop_.AddTimer(config_.tick_ms, [this] { Tick(); });
  moved_stubs_ = std::make_unique<MovedStubs>(loop_, config_.self, MovedStubHooks());
}

core::ClusterPort& ClusterAgent::port() { return *port_; }

ClusterAgent::Held ClusterAgent::Control(uint8_t type, std::string body) {
  Held frame;
  frame.type = type;
  frame.body = std::move(body);
  return frame;
}

Membership& ClusterAgent::EnableMembership(MembershipConfig config) {
  config.self = config_.self;
  membership_owned_ = std::make_unique<Membership>(loop_, transport_, std::move(config));
  Membership* membership = membership_owned_.get();
  HandleFrames(kMembershipFrames, [membership](NodeId from, uint8_t type, std::string_view body) {
    membership->OnFrame(from, type, body);
  });
  membership->set_on_change([this](const Member& member) {
    if (meta_) TellMetadata(member);
    if (member.node == config_.self) return;
    // (Replays keep waiting for a node that is suspect or down here: only
    // its declaration as gone hands its share on, RedirectReplaysWaitingOn.)
    if (member.state == MemberState::kSuspect) UnchargeHeldTo(member.node);
    if (member.state == MemberState::kDown || member.state == MemberState::kLeft) {
      // A node's own view that another is down is no verdict to act on: a
      // node cut off from the majority sees everyone down (issue 29). The
      // metadata group's MemberGone, which only a majority commits,
      // declares it gone (OnMetaMember). A graceful leave is the member's
      // own act.
      if (member.state == MemberState::kLeft) {
        DeclareGone(member.node);
      } else if (auto skipped = unacted_verdicts_.find(member.node); skipped != unacted_verdicts_.end()) {
        // The group's verdict came while this node still reached it: now
        // this node agrees, and takes its share over.
        const uint64_t verdict = skipped->second;
        unacted_verdicts_.erase(skipped);
        if (meta_->state().members().count(member.node) == 0) DeclareGone(member.node, verdict);
      }
    }
    if (member.state == MemberState::kLeft) {
      peers_[member.node].minor_known = false;  // whatever binary it comes back with, it says so again
      UpdateVersionGates();
    }
    if (member.state == MemberState::kUp) ResendParked(member.node);
  });
  return *membership;
}

void ClusterAgent::Leave(std::function<void()> done) {
  Membership* membership = membership_owned_.get();
  if (membership == nullptr) {
    if (done) loop_.Post(std::move(done));
    return;
  }
  if (!meta_) return membership->Leave(std::move(done));
  // Leaderships cannot come back meanwhile: the node drains until its
  // MemberGone applies, and is no member (nobody's candidate) after it.
  meta_->Leave(membership->leave_timeout_ms(),
               scope_.Guard([membership, done = std::move(done)](bool) mutable { membership->Leave(std::move(done)); }));
}

ClusterAgent::~ClusterAgent() {
  frame_handlers_ = {};  // they name the parts going now
  retained_.reset();
  meta_.reset();
  meta_host_.reset();
  membership_owned_.reset();  // before the handler goes: it may still use the transport
  loop_.CancelTimer(tick_timer_);
  transport_.set_handler(nullptr);
}

void ClusterAgent::SetRetainedOnPartitions(bool on) { port_->set_retained_on_partitions(on); }

void ClusterAgent::SetSessionsOnPartitions(bool on) { port_->set_sessions_on_partitions(on); }

void ClusterAgent::PostToShard(uint16_t shard, std::function<void(core::ShardBroker&)> work) {
  FlushShardItems(shard);  // queued forwards and confirmations go first, in order
  shards_.Post(shard, std::move(work));
}

// --- routes ------------------------------------------------------------------

void ClusterAgent::OnRouteChanged(const core::RouteUpdate& update) {
  RouteKey key{update.filter, update.shared_key};
  if (update.add) {
    if (++local_routes_[key] > 1) return;
  } else {
    auto it = local_routes_.find(key);
    if (it == local_routes_.end() || --it->second > 0) return;
    local_routes_.erase(it);
  }
  pending_routes_.push_back({meta::RouteKey{update.filter, update.shared_key}, update.add});
  ScheduleFlush();
}

void ClusterAgent::UseRouteProposer(RouteProposer proposer) {
  route_proposer_ = std::move(proposer);
  if (!pending_routes_.empty()) ScheduleFlush();
}

Expected<void, std::string> ClusterAgent::EnableMetadata(meta::MetaGroupConfig config,
                                                         persistence::StorageEngine& engine) {
  config.self = config_.self;
  meta_host_ = std::make_unique<meta::RaftHost>(loop_, transport_);
  HandleFrames(kRaftFrames, [host = meta_host_.get()](NodeId from, uint8_t type, std::string_view body) {
    host->OnFrame(from, type, body);
  });
  meta_ = std::make_unique<meta::MetaGroup>(*meta_host_, engine, std::move(config));
  meta_->set_route_observer([this](NodeId node, const std::vector<meta::RouteKey>& added,
                                   const std::vector<meta::RouteKey>& removed) {
    ApplyRemoteRoutes(node, added, removed);
  });
  meta_->state().set_member_observer(
      [this](NodeId node, bool present, uint64_t index) { OnMetaMember(node, present, index); });
  if (auto started = meta_->Start(); !started) {
    HandleFrames(kRaftFrames, nullptr);
    meta_.reset();
    meta_host_.reset();
    return started;
  }
  if (membership_owned_) {
    for (const Member& member : membership_owned_->members()) TellMetadata(member);
  }
  // This iteration's changes join the node's next route proposal.
  UseRouteProposer([group = meta_.get()](const RouteChanges& changes) { group->UpdateRoutes(changes); });
  return {};
}

void ClusterAgent::TellMetadata(const Member& member) {
  // Node-level liveness for quiescent raft groups (docs/raft.md,
  // "Quiescence"): it stands in for their heartbeats.
  if (member.node != config_.self) {
    if (member.state == MemberState::kUp) {
      meta_host_->OnPeerUp(member.node);
    } else if (member.state == MemberState::kSuspect || member.state == MemberState::kDown ||
               member.state == MemberState::kLeft || member.state == MemberState::kLeaving) {
      meta_host_->OnPeerDown(member.node);
    }
  }
  if (member.state == MemberState::kDown || member.state == MemberState::kLeft) {
    meta_->OnMemberGone(member.node);
  } else {
    meta_->OnMemberLive(member.node, member.cluster_address, member.incarnation);
  }
}

// Routes the metadata group applied for another node: every shard's Router
// learns them as NodeDestination(node).
void ClusterAgent::ApplyRemoteRoutes(NodeId node, const std::vector<meta::RouteKey>& added,
                                   const std::vector<meta::RouteKey>& removed) {
  if (node == config_.self) return;  // the shards hold their own routes
  counters_.route_changes_in += added.size() + removed.size();
  const core::Destination destination = core::NodeDestination(node);
  auto& held = remote_routes_[node];
  std::vector<core::RouteUpdate> updates;
  std::vector<core::RouteUpdate> removals;
  for (const meta::RouteKey& route : removed) {
    held.erase({route.filter, route.share});
    removals.push_back(core::RouteUpdate{false, route.filter, route.share, destination});
  }
  if (IsGone(node) || PeerUnreachable(node)) {
    // A gone node's plain routes: kept a while, forwards on them replayed
    // (DeclareGone; its shared-group routes go now).
    std::vector<core::RouteUpdate> later;
    for (auto& removal : removals) (removal.shared_key.empty() ? later : updates).push_back(std::move(removal));
    DeferRouteRemoval(node, std::move(later));
  } else {
    updates = std::move(removals);
  }
  for (const meta::RouteKey& route : added) {
    held.emplace(route.filter, route.share);
    updates.push_back(core::RouteUpdate{true, route.filter, route.share, destination});
  }
  if (held.empty()) remote_routes_.erase(node);
  for (uint16_t shard = 0; shard < config_.shard_count; ++shard) {
    PostToShard(shard, [updates](core::ShardBroker& broker) {
      for (const auto& update : updates) broker.ApplyRouteUpdate(update);
    });
  }
}

size_t ClusterAgent::remote_route_count() const {
  size_t count = 0;
  for (const auto& [node, routes] : remote_routes_) count += routes.size();
  return count;
}

void ClusterAgent::Broadcast(uint8_t type, const std::string& body) {
  for (auto& [node, peer] : peers_) {
    if (peer.up) Send(node, Control(type, body));
  }
}

// Once per loop iteration: route changes, confirmations, credit.
void ClusterAgent::ScheduleFlush() {
  if (flush_scheduled_) return;
  flush_scheduled_ = true;
  loop_.Post(scope_.Guard([this] { Flush(); }));
}

void ClusterAgent::Flush() {
  flush_scheduled_ = false;
  for (uint16_t shard = 0; shard < config_.shard_count; ++shard) FlushShardItems(shard);
  if (!pending_routes_.empty() && route_proposer_) {
    counters_.route_changes_out += pending_routes_.size();
    route_proposer_(pending_routes_);
    pending_routes_.clear();
  }
  for (auto& [node, ids] : pending_safe_) {
    if (node == config_.self) {  // replays this node sent itself
      for (uint64_t id : ids) ReleaseForward(node, id);
    } else if (!ids.empty()) {
      Send(node, Control(kForwardSafe, EncodeForwardSafe(ids)));
    }
  }
  pending_safe_.clear();
  for (uint16_t shard = 0; shard < config_.shard_count; ++shard) {
    if (pending_credits_[shard].empty()) continue;
    std::vector<std::pair<core::FlowId, uint32_t>> credits;
    credits.swap(pending_credits_[shard]);
    PostToShard(shard, [credits = std::move(credits)](core::ShardBroker& broker) { broker.OnForwardsDelivered(credits); });
  }
}

// --- links -------------------------------------------------------------------------

void ClusterAgent::OnPeerUp(const PeerInfo& info) {
  if (membership_owned_) membership_owned_->OnPeerUp(info);
  if (meta_host_) meta_host_->OnPeerUp(info.node);
  Peer& peer = peers_[info.node];
  peer.up = true;
  peer.known = true;
  peer.minor = info.minor;
  peer.minor_known = true;
  UpdateVersionGates();
  spdlog::info("cluster: node {} ({}) up", info.node, info.cluster_address);
  // What the peer must know of this node first, then what waited.
  SendLinkUpState(info.node);
  ResendUnconfirmed(info.node);
  DrainHeld(info.node);
}

void ClusterAgent::SendLinkUpState(NodeId node) {
  if (config_.partitioned_groups.empty()) return;
  Peer& peer = peers_[node];
  std::deque<Held> waiting;
  waiting.swap(peer.held);  // ahead of held forwards
  const size_t waiting_bytes = peer.held_bytes;
  peer.held_bytes = 0;
  // Even empty: it replaces what the peer had from an earlier boot.
  Send(node, Control(kGroupConsumers, EncodeClientIds({group_ready_announced_.begin(), group_ready_announced_.end()})));
  for (Held& frame : waiting) peer.held.push_back(std::move(frame));
  peer.held_bytes += waiting_bytes;
}

void ClusterAgent::UpdateVersionGates() {
  // A node of an older binary rejects a delivery record with a group key
  // (docs/storage.md, "Older binaries and rolling upgrades"): while one is
  // in the cluster, records are written without it (the deliveries are
  // tagged from the subscriptions after a restart or a move, as before).
  // Nor does it apply a queue's hands: partitioned groups deliver QoS 2 at
  // least once meanwhile (docs/cluster.md).
  // Nor a takeover claim guarded by its owner (kMinorClaimGuard): claims are
  // then conditional on the owner's node only, as before (issue 29).
  NodeId older = 0;
  NodeId without_hands = 0;
  NodeId without_guard = 0;
  NodeId without_fence = 0;
  counters_.older_binary_peers = 0;
  for (const auto& [node, peer] : peers_) {
    if (!peer.minor_known || peer.minor >= kLinkVersionMinor) continue;
    ++counters_.older_binary_peers;
    if (peer.minor < kMinorGroupKeyRecords && older == 0) older = node;
    if (peer.minor < kMinorQueueHands && without_hands == 0) without_hands = node;
    if (peer.minor < kMinorClaimGuard && without_guard == 0) without_guard = node;
    if (peer.minor < kMinorCopyFence && without_fence == 0) without_fence = node;
  }
  // A gate of this agent's own: opened (info) or closed (warning, naming
  // the first node that holds it closed) as the linked nodes' minors say.
  auto gate = [this](bool& open, NodeId holding, const char* opened, const char* closed) {
    if (open == (holding == 0)) return;
    open = holding == 0;
    if (open) {
      spdlog::info("cluster: every node {} again", opened);
    } else {
      spdlog::warn("cluster: node {} speaks link minor {}: {} until it leaves or is upgraded", holding,
                   peers_[holding].minor, closed);
    }
  };
  gate(copy_fence_, without_fence, "applies fenced session writes", "session writes are fenced by node only");
  gate(claim_guard_, without_guard, "applies guarded takeover claims",
       "takeover claims are conditional on the owner's node only");
  const bool hands = without_hands == 0;
  if (hands != port_->HandsOnGroupQueues()) {
    port_->set_hands_on_group_queues(hands);
    if (hands) {
      spdlog::info("cluster: every node applies queue hands: partitioned groups deliver QoS 2 exactly once again");
    } else {
      spdlog::warn("cluster: node {} speaks link minor {} (an older binary without queue hands): partitioned "
                   "groups deliver QoS 2 at least once until it leaves or is upgraded",
                   without_hands, peers_[without_hands].minor);
    }
  }
  const bool allowed = older == 0;
  if (allowed == port_->GroupKeysInRecords()) return;
  port_->set_group_keys_in_records(allowed);
  if (allowed) {
    spdlog::info("cluster: every node reads delivery records with a shared group's key: written with it again");
  } else {
    spdlog::warn("cluster: node {} speaks link minor {} (an older binary that rejects delivery records with a "
                 "shared group's key): delivery records are written without it until it leaves or is upgraded",
                 older, peers_[older].minor);
  }
}

void ClusterAgent::OnPeerDown(NodeId node) {
  if (membership_owned_) membership_owned_->OnPeerDown(node);
  // A lost link is a lost leader for quiescent groups until shown
  // otherwise: a node killed and restarted at once may never be suspected
  // by membership, and its groups restart empty (docs/partitions.md).
  if (meta_host_) meta_host_->OnPeerDown(node);
  Peer& peer = peers_[node];
  if (!peer.up) return;
  peer.up = false;
  DropHeld(peer, true);  // control frames: the state they carry is sent again at link up
  ResetGroupQueueLinks(node, false);
  spdlog::info("cluster: node {} down", node);
}

void ClusterAgent::OnWritable(NodeId node) { DrainHeld(node); }

// The metadata group committed that `node` is no longer a member: the one
// verdict about a death a node acts on when a metadata group runs. Acted on
// after the commands applied with it (a node catching up may apply a
// MemberGone and the re-admission after it in one batch: history, not a
// verdict), and only while this node does not reach `node` itself.
void ClusterAgent::OnMetaMember(NodeId node, bool present, uint64_t index) {
  if (node == config_.self) return;
  if (present) {  // a re-admission: membership's up resends what waited
    unacted_verdicts_.erase(node);
    return;
  }
  loop_.Post(scope_.Guard([this, node, index] {
    if (!meta_ || meta_->state().members().count(node) != 0) return;
    if (membership_owned_ && !PeerUnreachable(node) && membership_owned_->Find(node) != nullptr) {
      spdlog::info("cluster: the metadata group declared node {} gone, but it is live here: acted on once this "
                   "node sees it down too",
                   node);
      unacted_verdicts_[node] = index;
      return;
    }
    if (auto progress = takeovers_.find(node); progress != takeovers_.end() && progress->second.declared &&
                                               !progress->second.back && progress->second.verdict == index) {
      return;
    }
    DeclareGone(node, index);
  }));
}

void ClusterAgent::DeclareGone(NodeId node, uint64_t verdict) {
  Peer& peer = peers_[node];
  peer.known = false;
  peer.gone = true;
  DropHeld(peer, false);
  ResetGroupQueueLinks(node, true);
  // Its shared-group routes go now (the groups pick live members; replayed
  // group messages are sent to the group again), its plain routes after
  // replay_grace_ms (forwards on them are replayed to the sessions taken
  // from it): its MemberGone drops them from the node's route set
  // everywhere, and ApplyRemoteRoutes applies that so.
  std::vector<core::RouteUpdate> shared_now;
  if (auto routes = remote_routes_.find(node); routes != remote_routes_.end()) {
    for (const auto& [filter, key] : routes->second) {
      if (!key.empty()) shared_now.push_back(core::RouteUpdate{false, filter, key, core::NodeDestination(node)});
    }
  }
  for (uint16_t shard = 0; shard < config_.shard_count && !shared_now.empty(); ++shard) {
    PostToShard(shard, [shared_now](core::ShardBroker& broker) {
      for (const auto& update : shared_now) broker.ApplyRouteUpdate(update);
    });
  }
  UnchargeHeldTo(node);
  spdlog::info("cluster: node {} gone; its routes are forgotten in {} ms, forwards it did not confirm replayed",
               node, config_.replay_grace_ms);
  // The takeover starts before the replays, so the ones this node sends
  // itself wait for it too.
  takeovers_[node].declared = true;
  takeovers_[node].back = false;
  takeovers_[node].verdict = verdict;
  if (partitions_) TakeOverSessionsOf(node, verdict);
  ReplayEverythingFor(node);
  RedirectReplaysWaitingOn(node);
  ReleaseHeldReplays(node);
}

void ClusterAgent::OnRefusedBy(const std::string& address, const std::string& reason) {
  if (membership_owned_) membership_owned_->OnLinkRefused(address, reason);
}

void ClusterAgent::HandleFrames(FrameRange range, FrameHandler handler) {
  for (unsigned type = range.first; type <= range.last; ++type) frame_handlers_[type] = handler;
}

void ClusterAgent::OnFrame(NodeId from, uint8_t type, std::string_view body) {
  if (const FrameHandler& handler = frame_handlers_[type]) {
    handler(from, type, body);
  } else {
    spdlog::debug("cluster: node {} sent frame type {:#x}, which nothing here takes", from, type);
  }
}

void ClusterAgent::OnClusterFrame(NodeId from, uint8_t type, std::string_view body) {
  switch (type) {
    case kForward:
      DeliverForward(from, body);
      return;
    case kForwardSafe: {
      auto ids = DecodeForwardSafe(body);
      if (!ids) break;
      for (uint64_t id : *ids) ReleaseForward(from, id);
      return;
    }
    case kForwardReplay: {
      auto replay = DecodeReplay(body);
      if (!replay) break;
      OnReplay(from, std::move(*replay));
      return;
    }
    case kRetiredRetained:  // an older binary's broadcast: the partitions have the message
      return;
    case kGroupConsumers: {
      auto keys = DecodeClientIds(body);  // the same shape: a list of strings
      if (!keys) break;
      group_ready_remote_[from] = std::set<std::string>(keys->begin(), keys->end());
      return;
    }
    case kClientAttached: {
      auto ids = DecodeClientIds(body);
      if (!ids) break;
      for (const std::string& id : *ids) {
        ++counters_.takeovers_in;
        claims_.erase(id);  // another node's claim replaced this node's
        // What the session here holds that its writes have not put on the
        // partition yet goes to its new node (cluster_handoff.cc).
        LeaveBehind(id, nullptr, [id, cluster = &port()](core::ShardBroker& broker) {
          cluster->SessionLeftBehind(id, broker.TakenOverElsewhere(id));
        });
      }
      return;
    }
    case kSessionHandOff: {
      auto frame = DecodeSessionHandOff(body);
      if (!frame) break;
      OnSessionHandOff(from, std::move(*frame));
      return;
    }
    case kSessionHandOffDone: {
      auto done = DecodeSessionHandOffDone(body);
      if (!done) break;
      OnHandOffDone(done->id, done->taken);
      return;
    }
    default:
      spdlog::debug("cluster: node {} sent unknown frame type {:#x}", from, type);
      return;
  }
  bad_frames_->fetch_add(1, std::memory_order_relaxed);
  spdlog::warn("cluster: malformed frame {:#x} from node {}", type, from);
}

}  // namespace estuary::cluster
