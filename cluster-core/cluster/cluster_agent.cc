#include "cluster-core/cluster/cluster_agent.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <tuple>

namespace estuary::cluster {

constexpr size_t kRetainedChunkBytes = 1 << 20;

// The shards' side: every call hops to the agent's loop.
class ClusterAgent::Port final : public core::ClusterPort {
 public:
  Port(ClusterAgent& agent, Poster post) : agent_(agent), post_(std::move(post)) {}
  void RouteChanged(const core::RouteUpdate& update) override {
    Run([update](ClusterAgent& agent) { agent.OnRouteChanged(update); });
  }
  void Forward(uint16_t node, core::NodeForward forward) override {
    Run([node, forward = std::move(forward)](ClusterAgent& agent) mutable { agent.OnForward(node, std::move(forward)); });
  }
  void RetainedPublished(const MessagePtr& message) override {
    Run([message](ClusterAgent& agent) { agent.OnRetainedPublished(message); });
  }
  void ClientAttached(const std::string& client_id) override {
    Run([client_id](ClusterAgent& agent) { agent.OnClientAttached(client_id); });
  }
  void ForwardSafe(uint16_t origin, uint64_t forward_id) override {
    Run([origin, forward_id](ClusterAgent& agent) { agent.OnForwardSafe(origin, forward_id); });
  }

 private:
  template <typename Fn>
  void Run(Fn fn) {
    std::weak_ptr<int> alive = agent_.lifetime_;  // checked on the agent's own thread
    ClusterAgent* agent = &agent_;
    post_([alive, agent, fn = std::move(fn)]() mutable {
      if (alive.lock()) fn(*agent);
    });
  }
  ClusterAgent& agent_;
  Poster post_;
};

ClusterAgent::ClusterAgent(ClusterAgentConfig config, io::Loop& loop, Transport& transport,
                           core::ShardLink& shards, Poster post_here)
    : config_(config),
      loop_(loop),
      transport_(transport),
      shards_(shards),
      port_(std::make_unique<Port>(*this, std::move(post_here))),
      pending_credits_(config.shard_count),
      shard_items_(config.shard_count) {
  transport_.set_handler(this);
  tick_timer_ = loop_.AddTimer(config_.tick_ms, [this] { Tick(); });
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
  membership->set_on_change([this](const Member& member) {
    if (member.node == config_.self) return;
    if (member.state == MemberState::kDown || member.state == MemberState::kLeft) DeclareGone(member.node);
  });
  membership_ = [membership](NodeId from, uint8_t type, std::string_view body) {
    membership->OnFrame(from, type, body);
  };
  grace_timer_ = false;
  return *membership;
}

ClusterAgent::~ClusterAgent() {
  membership_ = nullptr;
  membership_owned_.reset();  // before the handler goes: it may still use the transport
  loop_.CancelTimer(tick_timer_);
  transport_.set_handler(nullptr);
}

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
  pending_routes_.push_back(RouteEntry{update.add, update.filter, update.shared_key});
  ScheduleFlush();
}

void ClusterAgent::ApplyRoutes(NodeId from, uint8_t type, std::string_view body) {
  auto entries = DecodeRoutes(body);
  if (!entries) {
    bad_frames_->fetch_add(1, std::memory_order_relaxed);
    return;
  }
  counters_.route_changes_in += entries->size();
  const core::Destination destination = core::NodeDestination(from);
  auto& held = remote_routes_[from];
  if (type == kRouteSnapshot) {
    held.clear();
    for (const RouteEntry& entry : *entries) held.emplace(entry.filter, entry.shared_key);
    std::vector<RouteKey> routes(held.begin(), held.end());
    for (uint16_t shard = 0; shard < config_.shard_count; ++shard) {
      PostToShard(shard, [destination, routes](core::ShardBroker& broker) { broker.ReplaceRoutesOf(destination, routes); });
    }
    return;
  }
  std::vector<core::RouteUpdate> updates;
  for (const RouteEntry& entry : *entries) {
    if (entry.add) {
      held.emplace(entry.filter, entry.shared_key);
    } else {
      held.erase({entry.filter, entry.shared_key});
    }
    updates.push_back(core::RouteUpdate{entry.add, entry.filter, entry.shared_key, destination});
  }
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

// Once per loop iteration: route changes, confirmations, attaches, credit.
void ClusterAgent::ScheduleFlush() {
  if (flush_scheduled_) return;
  flush_scheduled_ = true;
  std::weak_ptr<int> alive = lifetime_;
  loop_.Post([this, alive] {
    if (alive.lock()) Flush();
  });
}

void ClusterAgent::Flush() {
  flush_scheduled_ = false;
  for (uint16_t shard = 0; shard < config_.shard_count; ++shard) FlushShardItems(shard);
  if (!pending_routes_.empty()) {
    counters_.route_changes_out += pending_routes_.size();
    Broadcast(kRouteDelta, EncodeRoutes(pending_routes_));
    pending_routes_.clear();
  }
  if (!pending_attached_.empty()) {
    Broadcast(kClientAttached, EncodeClientIds(pending_attached_));
    pending_attached_.clear();
  }
  for (auto& [node, ids] : pending_safe_) {
    if (!ids.empty()) Send(node, Control(kForwardSafe, EncodeForwardSafe(ids)));
  }
  pending_safe_.clear();
  for (uint16_t shard = 0; shard < config_.shard_count; ++shard) {
    if (pending_credits_[shard].empty()) continue;
    std::vector<std::pair<core::FlowId, uint32_t>> credits;
    credits.swap(pending_credits_[shard]);
    PostToShard(shard, [credits = std::move(credits)](core::ShardBroker& broker) { broker.OnForwardsDelivered(credits); });
  }
}

// --- retained, attaches ---------------------------------------------------------------

void ClusterAgent::OnRetainedPublished(const MessagePtr& message) {
  ApplyRetained(message, false);
  Broadcast(kRetained, EncodeRetained({message}));
}

void ClusterAgent::ApplyRetained(const MessagePtr& message, bool from_peer) {
  auto it = retained_.find(message->topic);
  if (it != retained_.end()) {
    const MessageId& held = it->second->id;
    // The newest by hybrid logical clock wins (node id breaks ties): a late
    // snapshot never brings back an older message.
    if (std::tie(held.timestamp, held.node) >= std::tie(message->id.timestamp, message->id.node)) return;
    it->second = message;
  } else {
    retained_.emplace(message->topic, message);
  }
  if (!from_peer) return;  // the publishing shard told its node's shards itself
  ++counters_.retained_in;
  for (uint16_t shard = 0; shard < config_.shard_count; ++shard) {
    PostToShard(shard, [message](core::ShardBroker& broker) { broker.ApplyRetained(message); });
  }
}

void ClusterAgent::OnClientAttached(const std::string& client_id) {
  pending_attached_.push_back(client_id);
  ScheduleFlush();
}

// --- links -------------------------------------------------------------------------

void ClusterAgent::OnPeerUp(const PeerInfo& info) {
  if (membership_owned_) membership_owned_->OnPeerUp(info);
  Peer& peer = peers_[info.node];
  peer.up = true;
  peer.known = true;
  peer.down_since_ms = -1;
  spdlog::info("cluster: node {} ({}) up", info.node, info.cluster_address);
  // Snapshots first (they replace what the peer had from us), then what waited.
  SendSnapshots(info.node);
  DrainHeld(info.node);
}

void ClusterAgent::SendSnapshots(NodeId node) {
  std::vector<RouteEntry> routes;
  for (const auto& [key, shards] : local_routes_) routes.push_back(RouteEntry{true, key.first, key.second});
  Peer& peer = peers_[node];
  std::deque<Held> waiting;
  waiting.swap(peer.held);  // the snapshots go ahead of held forwards
  const size_t waiting_bytes = peer.held_bytes;
  peer.held_bytes = 0;
  Send(node, Control(kRouteSnapshot, EncodeRoutes(routes)));
  // Retained messages in frames of about kRetainedChunkBytes, far below
  // the links' frame limit however many there are.
  std::vector<MessagePtr> retained;
  size_t bytes = 0;
  for (const auto& [topic, message] : retained_) {
    if (message->PayloadSize() == 0) continue;
    retained.push_back(message);
    bytes += message->ApproximateBytes();
    if (bytes >= kRetainedChunkBytes) {
      Send(node, Control(kRetained, EncodeRetained(retained)));
      retained.clear();
      bytes = 0;
    }
  }
  if (!retained.empty()) Send(node, Control(kRetained, EncodeRetained(retained)));
  for (Held& frame : waiting) peer.held.push_back(std::move(frame));
  peer.held_bytes += waiting_bytes;
}

void ClusterAgent::OnPeerDown(NodeId node) {
  if (membership_owned_) membership_owned_->OnPeerDown(node);
  Peer& peer = peers_[node];
  if (!peer.up) return;
  peer.up = false;
  peer.down_since_ms = loop_.NowMs();
  DropHeld(peer, true);  // control frames are replaced by the next snapshot
  spdlog::info("cluster: node {} down", node);
}

void ClusterAgent::OnWritable(NodeId node) { DrainHeld(node); }

void ClusterAgent::DeclareGone(NodeId node) {
  Peer& peer = peers_[node];
  peer.down_since_ms = -1;
  peer.known = false;
  DropHeld(peer, false);
  remote_routes_.erase(node);
  const core::Destination destination = core::NodeDestination(node);
  for (uint16_t shard = 0; shard < config_.shard_count; ++shard) {
    PostToShard(shard, [destination](core::ShardBroker& broker) { broker.ReplaceRoutesOf(destination, {}); });
  }
  std::vector<uint64_t> released;
  for (const auto& [id, pending] : pending_forwards_) {
    if (pending.node == node) released.push_back(id);
  }
  std::sort(released.begin(), released.end());  // in publish order
  counters_.forwards_expired += released.size();
  for (uint64_t id : released) ReleaseForward(id);
  spdlog::info("cluster: node {} gone; its routes are forgotten", node);
}

void ClusterAgent::OnFrame(NodeId from, uint8_t type, std::string_view body) {
  if (IsMembershipFrame(type)) {
    if (membership_) membership_(from, type, body);
    return;
  }
  switch (type) {
    case kRouteSnapshot:
    case kRouteDelta:
      ApplyRoutes(from, type, body);
      return;
    case kForward:
      DeliverForward(from, body);
      return;
    case kForwardSafe: {
      auto ids = DecodeForwardSafe(body);
      if (!ids) break;
      for (uint64_t id : *ids) ReleaseForward(id);
      return;
    }
    case kRetained: {
      auto messages = DecodeRetained(body);
      if (!messages) break;
      for (const MessagePtr& message : *messages) ApplyRetained(message, true);
      return;
    }
    case kClientAttached: {
      auto ids = DecodeClientIds(body);
      if (!ids) break;
      for (const std::string& id : *ids) {
        ++counters_.takeovers_in;
        PostToShard(core::ShardForClientId(id, config_.shard_count),
                    [id](core::ShardBroker& broker) { broker.TakenOverElsewhere(id); });
      }
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
