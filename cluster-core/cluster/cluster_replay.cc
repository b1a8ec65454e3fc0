// ClusterAgent's answer to the takeover gap (docs/partitions.md, "The
// takeover gap"): a QoS 1/2 forward its node never confirmed is neither
// acknowledged nor dropped while that node is unreachable.
//
// On the publisher's node: the forward stays pending with its message; past
// forward_timeout_ms with its node unreachable it is parked (park_timeout_ms
// at most). If the node comes back the parked forwards go to it again; once
// it is declared gone every one is replayed: sent (kForwardReplay) to every
// live node and to this one, and its publisher is acknowledged when all of
// them have confirmed: never because a deadline passed (issue 29). A target
// that has not confirmed gets it again on a new link and every
// replay_timeout_ms while linked; a target the cluster declares gone before
// confirming hands its share on: the replay is made again for it, to the
// nodes that take its sessions over. For replay_grace_ms the
// gone node's routes stay, so publishes made before the survivors' own
// routes arrive are replayed too.
//
// On a receiving node: a replay waits until this node's own takeover of the
// gone node's sessions has finished (every listing, claim and read,
// TakeoverProgress; replay_hold_ms at most), then goes to every shard,
// which offers it only to the sessions taken from the gone node
// (ShardBroker::DeliverReplayed), once each; then it is confirmed.
#include <spdlog/spdlog.h>

#include <atomic>
#include <memory>
#include <vector>

#include "cluster-core/broker/shared_strategy.h"
#include "cluster-core/cluster/cluster_agent.h"

namespace estuary::cluster {
namespace {

// This node's own share of a replay, handled as if it had come in a frame.
ReplayFrame OwnShare(NodeId gone, uint64_t replay_id, bool plain, std::vector<std::string> shared_keys,
                     MessagePtr message) {
  ReplayFrame own;
  own.gone = gone;
  own.forward.forward_id = replay_id;
  own.forward.plain = plain;
  own.forward.shared_keys = std::move(shared_keys);
  own.forward.message = std::move(message);
  return own;
}

}  // namespace

bool ClusterAgent::IsGone(NodeId node) const {
  auto it = peers_.find(node);
  return it != peers_.end() && it->second.gone;
}

// --- the publisher's node ---------------------------------------------------------

std::set<NodeId> ClusterAgent::LiveNodesBut(NodeId gone) const {
  std::set<NodeId> nodes{config_.self};
  if (membership_owned_) {
    for (const Member& member : membership_owned_->members()) {
      if (member.node != gone && member.state == MemberState::kUp) nodes.insert(member.node);
    }
  } else {
    for (const auto& [node, peer] : peers_) {
      if (node != gone && peer.up) nodes.insert(node);
    }
  }
  return nodes;
}

void ClusterAgent::Replay(NodeId gone, PendingForwards::Entry entry) {
  ++counters_.forwards_replayed;
  // The plain part goes to every live node (for the sessions each took
  // over); a shared group's part is this node's alone: sent to the group
  // again, to whichever member it picks now (DeliverReplay).
  std::set<NodeId> targets = entry.plain ? LiveNodesBut(gone) : std::set<NodeId>{config_.self};
  uint64_t replay_id = 0;
  if (entry.token != 0) {
    replay_id = kReplayIdBit | next_replay_id_++;
    replays_out_[replay_id] = ReplayOut{entry.shard,
                                        entry.token,
                                        targets,
                                        loop_.NowMs() + static_cast<int64_t>(config_.replay_timeout_ms),
                                        gone,
                                        entry.message,
                                        entry.plain};
  }
  if (targets.size() > 1) {
    // (A QoS 0 replay is not kept: sent once, as QoS 0 allows.)
    const std::string body = EncodeReplay(gone, replay_id, true, {}, *entry.message);
    for (NodeId node : targets) {
      if (node == config_.self) continue;
      Held frame = Control(kForwardReplay, body);
      frame.forward_id = replay_id;
      Send(node, std::move(frame));
    }
  }
  // This node's own share last: it may confirm at once (nothing taken over
  // here), and the others are in the map already.
  OnReplay(config_.self,
           OwnShare(gone, replay_id, entry.plain, std::move(entry.shared_keys), std::move(entry.message)));
}

void ClusterAgent::SendReplayTo(NodeId node, uint64_t replay_id) {
  auto it = replays_out_.find(replay_id);
  if (it == replays_out_.end() || node == config_.self) return;
  const ReplayOut& replay = it->second;
  Held frame;
  if (node == replay.gone) {
    // The gone node itself, back: the sessions it kept get the message as
    // a forward under the replay's id (ResendParked).
    frame.type = kForward;
    frame.forward = true;
    frame.qos = replay.message->qos;
    frame.origin_shard = replay.shard;
    frame.body = EncodeForward(replay_id, true, {}, *replay.message);
  } else {
    frame = Control(kForwardReplay, EncodeReplay(replay.gone, replay_id, true, {}, *replay.message));
  }
  frame.forward_id = replay_id;
  Send(node, std::move(frame));
}

std::deque<PendingForwards::Entry> ClusterAgent::TakeParked(NodeId node) {
  auto parked = parked_.find(node);
  if (parked == parked_.end()) return {};
  std::deque<PendingForwards::Entry> entries = std::move(parked->second);
  parked_.erase(parked);
  counters_.forwards_parked -= entries.size();
  return entries;
}

void ClusterAgent::ReplayEverythingFor(NodeId gone) {
  auto pending = pending_forwards_.TakeForNode(gone);  // in publish order
  // Parked ones are older than any still pending.
  for (auto& entry : TakeParked(gone)) Replay(gone, std::move(entry));
  if (!pending.empty()) {
    spdlog::info("cluster: {} forward(s) node {} did not confirm are replayed to the nodes that took its sessions",
                 pending.size(), gone);
  }
  for (auto& entry : pending) Replay(gone, std::move(entry));
}

void ClusterAgent::ResendParked(NodeId node) {
  peers_[node].gone = false;
  // Replays held here for it: its sessions that were not taken over are
  // its own again (a takeover stops once it is back), nothing to wait for.
  if (auto takeover = takeovers_.find(node); takeover != takeovers_.end() && takeover->second.declared) {
    takeover->second.back = true;
    ReleaseHeldReplays(node);
  }
  // Replays for it still unconfirmed: the sessions it kept (a takeover that
  // could not finish before it came back, e.g. no partition majority) are
  // served by it again, so it gets the message too, as a forward under the
  // replay's id. (A session it lost to a survivor is stale there and
  // dropped, with what it got.)
  for (auto& [replay_id, replay] : replays_out_) {
    if (replay.gone != node || !replay.plain || replay.waiting.contains(node)) continue;
    replay.waiting.insert(node);
    SendReplayTo(node, replay_id);
  }
  std::deque<PendingForwards::Entry> entries = TakeParked(node);
  if (entries.empty()) return;
  spdlog::info("cluster: node {} is back: {} forward(s) it did not confirm are sent to it again", node, entries.size());
  for (auto& entry : entries) SendPendingAgain(node, entry);
}

void ClusterAgent::ReleaseReplay(NodeId from, uint64_t replay_id) {
  auto it = replays_out_.find(replay_id);
  if (it == replays_out_.end()) return;
  it->second.waiting.erase(from);
  FinishReplayIfDone(replay_id);
}

void ClusterAgent::FinishReplayIfDone(uint64_t replay_id) {
  for (;;) {
    auto it = replays_out_.find(replay_id);
    if (it == replays_out_.end() || !it->second.waiting.empty() || it->second.children != 0) return;
    const uint64_t parent = it->second.parent;
    if (parent == 0) QueueSafe(it->second.shard, it->second.token);
    replays_out_.erase(it);
    auto up = replays_out_.find(parent);
    if (parent == 0 || up == replays_out_.end()) return;
    --up->second.children;
    replay_id = parent;
  }
}

// `node` is gone (the cluster's verdict, DeclareGone) and has not confirmed
// some replays. Not confirmed means not known to be durable there; the
// sessions it had (those it took from the replay's gone node among them)
// are taken over from it now, so its share is made again as a replay for
// `node` to the nodes live now, and the replay waits for that instead. (A
// node that only looks unreachable from here is still waited for: it may
// hold the sessions and be cut off from this node alone, issue 29.)
void ClusterAgent::RedirectReplaysWaitingOn(NodeId node) {
  std::vector<uint64_t> ids;
  for (const auto& [replay_id, replay] : replays_out_) {
    if (replay.waiting.contains(node)) ids.push_back(replay_id);
  }
  for (uint64_t replay_id : ids) {
    auto found = replays_out_.find(replay_id);
    if (found == replays_out_.end()) continue;  // finished by an earlier one's own share
    ReplayOut& replay = found->second;
    replay.waiting.erase(node);
    if (replay.plain) {
      ++counters_.replays_redirected;
      const uint64_t child_id = kReplayIdBit | next_replay_id_++;
      ReplayOut child;
      child.waiting = LiveNodesBut(node);
      child.deadline_ms = loop_.NowMs() + static_cast<int64_t>(config_.replay_timeout_ms);
      child.gone = node;
      child.message = replay.message;
      child.plain = true;
      child.parent = replay_id;
      ++replay.children;
      const std::set<NodeId> targets = child.waiting;
      MessagePtr message = child.message;
      replays_out_[child_id] = std::move(child);
      for (NodeId target : targets) SendReplayTo(target, child_id);
      OnReplay(config_.self, OwnShare(node, child_id, true, {}, std::move(message)));
    }
    FinishReplayIfDone(replay_id);
  }
}

void ClusterAgent::ExpireParkedAndReplays(int64_t now) {
  for (auto it = parked_.begin(); it != parked_.end();) {
    // Past the park deadline: sent again (under a new id) if the link is
    // up, else parked once more. Never acknowledged without a confirmation.
    const NodeId node = it->first;
    auto& entries = it->second;
    std::deque<PendingForwards::Entry> again;
    while (!entries.empty() && entries.front().deadline_ms <= now) {
      again.push_back(std::move(entries.front()));
      entries.pop_front();
    }
    for (auto& entry : again) {
      ++counters_.forwards_parked_again;
      if (transport_.connected(node)) {
        --counters_.forwards_parked;
        SendPendingAgain(node, entry);
      } else {
        entry.deadline_ms = now + config_.park_timeout_ms;
        entries.push_back(std::move(entry));
      }
    }
    it = entries.empty() ? parked_.erase(it) : std::next(it);
  }
  // A replay still unconfirmed: sent again to the targets linked now (the
  // frame may have gone out on a link that died silently); the others get
  // it on their next link, or hand it on if declared gone.
  for (auto& [replay_id, replay] : replays_out_) {
    if (replay.deadline_ms > now) continue;
    replay.deadline_ms = now + static_cast<int64_t>(config_.replay_timeout_ms);
    for (NodeId node : replay.waiting) {
      if (node == config_.self || !transport_.connected(node)) continue;
      ++counters_.replays_sent_again;
      SendReplayTo(node, replay_id);
    }
  }
  for (auto& [gone, held] : held_replays_) {
    while (!held.empty() && now - held.front().since_ms >= config_.replay_hold_ms) {
      HeldReplay replay = std::move(held.front());
      held.pop_front();
      --counters_.replays_held;
      DeliverReplay(replay.origin, std::move(replay.frame));
    }
  }
}

void ClusterAgent::DeferRouteRemoval(NodeId node, std::vector<core::RouteUpdate> removals) {
  if (removals.empty()) return;
  loop_.AddTimer(config_.replay_grace_ms, scope_.Guard([this, node, removals = std::move(removals)]() mutable {
    // The node may be back with some of them by now: those stay.
    auto held = remote_routes_.find(node);
    if (held != remote_routes_.end()) {
      std::erase_if(removals, [&](const core::RouteUpdate& update) {
        return held->second.contains({update.filter, update.shared_key});
      });
    }
    for (uint16_t shard = 0; shard < config_.shard_count; ++shard) {
      PostToShard(shard, [removals](core::ShardBroker& broker) {
        for (const auto& update : removals) broker.ApplyRouteUpdate(update);
      });
    }
  }));
}

// --- a receiving node ----------------------------------------------------------------

void ClusterAgent::TakeoverStep(NodeId gone) { ++takeovers_[gone].outstanding; }

void ClusterAgent::TakeoverDone(NodeId gone) {
  auto it = takeovers_.find(gone);
  if (it == takeovers_.end() || it->second.outstanding == 0) return;
  if (--it->second.outstanding == 0) ReleaseHeldReplays(gone);
}

// A replay for `gone` may be delivered here once this node declared it gone
// and its takeover of it is done. A node that has not
// declared it gone yet (membership views differ by a few hundred ms; or it
// still reaches the node) holds the replay, replay_hold_ms at most.
// Its coming back does not release them before the takeover is done: a
// claim proposed before it came back may still commit (the metadata group's
// verdict stands), and the session it adopts must get them too (issue 29).
bool ClusterAgent::ReplayMayGo(NodeId gone) const {
  auto it = takeovers_.find(gone);
  if (it == takeovers_.end()) return false;
  return it->second.declared && it->second.outstanding == 0;
}

void ClusterAgent::ReleaseHeldReplays(NodeId gone) {
  if (!ReplayMayGo(gone)) return;
  auto it = held_replays_.find(gone);
  if (it == held_replays_.end()) return;
  std::deque<HeldReplay> held = std::move(it->second);
  held_replays_.erase(it);
  counters_.replays_held -= held.size();
  for (HeldReplay& replay : held) DeliverReplay(replay.origin, std::move(replay.frame));
}

void ClusterAgent::OnReplay(NodeId origin, ReplayFrame frame) {
  ++counters_.replays_in;
  // (About this node itself, back from a cut: nothing here was taken from
  // it, so nothing is delivered and it is confirmed.)
  if (frame.gone != config_.self && !ReplayMayGo(frame.gone)) {
    ++counters_.replays_held;
    held_replays_[frame.gone].push_back(HeldReplay{origin, std::move(frame), loop_.NowMs()});
    return;
  }
  DeliverReplay(origin, std::move(frame));
}

void ClusterAgent::DeliverReplay(NodeId origin, ReplayFrame frame) {
  const uint64_t replay_id = frame.forward.forward_id;
  core::ClusterPort* port = &this->port();
  // A shared group's part, on the publisher's node only: as a forward that
  // found its group gone from here, it goes to a member the group picks
  // now (on this node, or once to another node holding the group).
  const bool to_groups = origin == config_.self && !frame.forward.shared_keys.empty();
  const uint32_t parts = (frame.forward.plain ? config_.shard_count : 0) + (to_groups ? 1 : 0);
  if (parts == 0) {
    if (replay_id != 0) port->ForwardSafe(origin, replay_id);
    return;
  }
  auto left = std::make_shared<std::atomic<uint32_t>>(parts);
  auto done = [port, origin, replay_id, left] {
    if (left->fetch_sub(1) == 1 && replay_id != 0) port->ForwardSafe(origin, replay_id);
  };
  const MessagePtr& message = frame.forward.message;
  if (frame.forward.plain) {
    for (uint16_t shard = 0; shard < config_.shard_count; ++shard) {
      PostToShard(shard, [message, gone = frame.gone, done](core::ShardBroker& broker) {
        broker.DeliverReplayed(message, gone, done);
      });
    }
  }
  if (to_groups) {
    std::vector<std::string> keys = std::move(frame.forward.shared_keys);
    for (std::string& key : keys) core::StripRerouted(key);
    PostToShard(core::ShardForClientId(message->origin.client_id, config_.shard_count),
                [message, keys = std::move(keys), done](core::ShardBroker& broker) {
                  broker.DeliverFromNode(message, false, keys, done);
                });
  }
}

}  // namespace estuary::cluster
