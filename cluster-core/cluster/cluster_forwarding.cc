// ClusterAgent's forwarding half: forwards out and in, their confirmations
// and deadlines, and the bounded queue of frames held per peer.
#include <algorithm>
#include <cstring>

#include "cluster-core/cluster/cluster_agent.h"
#include <spdlog/spdlog.h>

#include "cluster-core/store/record_codec.h"

namespace estuary::cluster {

constexpr uint64_t kPackedIdLimit = uint64_t{1} << 48;

namespace {

// The recycler of the shard thread this runs on: the forwards a shard
// receives are decoded there, each shard thread with its own (the agent
// cannot hold them: a shard's posted jobs may outlive it).
core::store::MessageRecycler& ThisShardsRecycler() {
  thread_local core::store::MessageRecycler recycler;
  return recycler;
}

}  // namespace

// --- forwards -------------------------------------------------------------------

void ClusterAgent::OnForward(NodeId node, core::NodeForward forward) {
  uint64_t forward_id = 0;
  const bool unreachable = PeerUnreachable(node);
  if (forward.message->qos != QoS::kAtMostOnce && IsGone(node)) {
    // A route of a gone node, kept for replay_grace_ms: the sessions
    // behind it are being taken over by the survivors (cluster_replay.cc).
    Held charged;
    charged.publisher = forward.publisher;
    Credit(charged);
    PendingForwards::Entry entry{node, forward.origin_shard, forward.safe_token, 0, std::move(forward.message),
                                 forward.plain, std::move(forward.shared_keys)};
    Replay(node, std::move(entry));
    return;
  }
  if (forward.safe_token != 0 && forward.message->qos == QoS::kAtMostOnce) {
    // Nothing to confirm at QoS 0: the publisher's step is done once sent.
    QueueSafe(forward.origin_shard, forward.safe_token);
  } else if (forward.safe_token != 0) {
    // Kept with its message until confirmed: if the node turns out gone,
    // the forward is replayed to the sessions taken from it. (To a suspect
    // node the frame still goes, or is held, in case it comes back.)
    forward_id = pending_forwards_.Add(node, forward.origin_shard, forward.safe_token,
                                       loop_.NowMs() + config_.forward_timeout_ms, forward.message, forward.plain,
                                       forward.shared_keys);
  }
  ++counters_.forwards_out;
  Held frame;
  frame.type = kForward;
  frame.forward = true;
  frame.qos = forward.message->qos;
  frame.origin_shard = forward.origin_shard;
  frame.publisher = forward.publisher;
  frame.forward_id = forward_id;
  if (unreachable) {
    // As UnchargeHeldTo does for the frames held when the peer became
    // unreachable: a frame to a suspect, down or departed peer does not
    // count against its publisher's forward window. Otherwise a fast
    // publisher fills the window with frames held for a node that left
    // (its routes linger until the metadata group drops them) and is paused
    // until they expire (forward_timeout_ms), longer than a client waits
    // for a PUBACK.
    Credit(frame);
    frame.publisher = core::FlowRef{};
  }
  Peer& peer = peers_[node];
  if (!peer.held.empty()) {  // behind frames already held: in order, through Send
    frame.body = EncodeForward(forward_id, forward.plain, forward.shared_keys, *forward.message);
    Send(node, std::move(frame));
    return;
  }
  // The usual case: encoded into a reused buffer and copied once, into the
  // link's output; only a frame that has to wait gets a body of its own.
  forward_scratch_.clear();
  AppendForward(forward_scratch_, forward_id, forward.plain, forward.shared_keys, *forward.message);
  switch (transport_.Send(node, kForward, forward_scratch_)) {
    case SendResult::kQueued:
      Credit(frame);
      return;
    case SendResult::kNoLink:
      if (frame.qos == QoS::kAtMostOnce) {  // as TrySend: QoS 0 never waits for a link
        ++counters_.forwards_dropped;
        Credit(frame);
        return;
      }
      break;
    case SendResult::kFull:
      break;
  }
  frame.body = forward_scratch_;
  Hold(peer, std::move(frame));
}

void ClusterAgent::DeliverForward(NodeId from, std::string_view body) {
  // A QoS 2 forward sent again after a lost link (ResendUnconfirmed) may
  // be one that came already: answered, not delivered twice.
  if (auto identity = PeekForwardIdentity(body);
      identity && identity->qos == QoS::kExactlyOnce && identity->forward_id != 0) {
    switch (forward_dedup_.Arrive(from, identity->id, identity->forward_id, loop_.NowMs())) {
      case ForwardDedup::Verdict::kNew:
        break;
      case ForwardDedup::Verdict::kSafe:
        ++counters_.forward_copies_in;
        pending_safe_[from].push_back(identity->forward_id);
        ScheduleFlush();
        return;
      case ForwardDedup::Verdict::kWaiting:
        ++counters_.forward_copies_in;
        return;
    }
  }
  // One shard per publisher: its forwards stay in order on this node.
  uint16_t shard = 0;
  if (config_.shard_count > 1) {
    auto client_id = PeekForwardClientId(body);
    if (!client_id) {
      bad_frames_->fetch_add(1, std::memory_order_relaxed);
      return;
    }
    shard = core::ShardForClientId(*client_id, config_.shard_count);
  }
  ++counters_.forwards_in;
  // The body is copied into the shard's queue as it is and decoded there,
  // next to its delivery; the queue goes over in one post per loop
  // iteration (FlushShardItems).
  std::string& queue = shard_items_[shard];
  const auto length = static_cast<uint32_t>(body.size());
  char head[1 + sizeof from + sizeof length];
  head[0] = 'F';
  std::memcpy(head + 1, &from, sizeof from);
  std::memcpy(head + 1 + sizeof from, &length, sizeof length);
  queue.append(head, sizeof head);
  queue.append(body);
  ScheduleFlush();
}

void ClusterAgent::QueueSafe(uint16_t shard, uint64_t safe_token) {
  std::string& queue = shard_items_[shard];
  const char kind = 'S';
  queue.append(&kind, 1);
  queue.append(reinterpret_cast<const char*>(&safe_token), sizeof safe_token);
  ScheduleFlush();
}

void ClusterAgent::FlushShardItems(uint16_t shard) {
  std::string& queued = shard_items_[shard];
  if (queued.empty()) return;
  std::string items;
  items.swap(queued);
  // The next batch starts at this one's size: appending to an empty string
  // would reallocate and copy it several times over.
  queued.reserve(items.size());
  core::ClusterPort* port = &this->port();
  shards_.Post(shard, [items = std::move(items), port, bad = bad_frames_](core::ShardBroker& broker) {
    std::string_view in = items;
    auto take = [&in](void* to, size_t n) {
      std::memcpy(to, in.data(), n);
      in.remove_prefix(n);
    };
    while (!in.empty()) {
      const char kind = in.front();
      in.remove_prefix(1);
      if (kind == 'S') {
        uint64_t token = 0;
        take(&token, sizeof token);
        broker.OnForwardSafe(token);
        continue;
      }
      NodeId from = 0;
      uint32_t length = 0;
      take(&from, sizeof from);
      take(&length, sizeof length);
      const std::string_view body = in.substr(0, length);
      in.remove_prefix(length);
      auto frame = DecodeForward(body, ThisShardsRecycler());
      if (!frame) {
        bad->fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      std::function<void()> on_safe;
      if (frame->forward_id != 0 && frame->forward_id < kPackedIdLimit) {
        // Sender and id in one word: the closure fits inside the
        // std::function, which then allocates nothing.
        const uint64_t packed = (uint64_t{from} << 48) | frame->forward_id;
        on_safe = [port, packed] { port->ForwardSafe(static_cast<NodeId>(packed >> 48), packed % kPackedIdLimit); };
      } else if (frame->forward_id != 0) {
        on_safe = [port, from, id = frame->forward_id] { port->ForwardSafe(from, id); };
      }
      broker.DeliverFromNode(frame->message, frame->plain, frame->shared_keys, std::move(on_safe));
    }
  });
}

void ClusterAgent::OnForwardSafe(NodeId origin, uint64_t forward_id) {
  auto& safe = pending_safe_[origin];
  safe.push_back(forward_id);
  for (uint64_t copy : forward_dedup_.Safe(origin, forward_id)) safe.push_back(copy);
  ScheduleFlush();
}

void ClusterAgent::ReleaseForward(NodeId from, uint64_t forward_id) {
  if ((forward_id & kReplayIdBit) != 0) return ReleaseReplay(from, forward_id);
  if (auto pending = pending_forwards_.Take(forward_id)) return QueueSafe(pending->shard, pending->token);
  // A late confirmation of a forward parked at its deadline.
  auto parked = parked_.find(from);
  if (parked == parked_.end()) return;
  auto& entries = parked->second;
  auto it = std::find_if(entries.begin(), entries.end(),
                         [forward_id](const PendingForwards::Entry& entry) { return entry.id == forward_id; });
  if (it == entries.end()) return;
  --counters_.forwards_parked;
  QueueSafe(it->shard, it->token);
  entries.erase(it);
  if (entries.empty()) parked_.erase(parked);
}

void ClusterAgent::UnchargeHeldTo(NodeId node) {
  // Held frames stay (sent if the peer comes back) but no longer count
  // against their publishers' forward windows; their publishers still
  // wait (the forwards are pending, replayed if the peer is declared gone).
  auto it = peers_.find(node);
  if (it == peers_.end()) return;
  for (Held& frame : it->second.held) {
    if (!frame.forward) continue;
    Credit(frame);
    frame.publisher = core::FlowRef{};
  }
}

// Frames queued on a link that goes down are dropped by the links layer
// (docs/internode.md): a forward that went out on a lost link may never
// have arrived, or its confirmation may not have come back. Either way it
// is still pending here; without this, a cut that heals before the node is
// declared down let those forwards reach their timeout while the node was
// reachable again, and their publishers were acknowledged for messages no
// session got (issue 29: 2-7 lost in a 2 s cut). The receiver delivers a
// QoS 2 copy once (ForwardDedup); a QoS 1 copy may arrive twice, as QoS 1
// allows. Held copies of pending forwards are dropped first, so each goes
// once, and all go in their original (publish) order.
void ClusterAgent::ResendUnconfirmed(NodeId node) {
  Peer& peer = peers_[node];
  std::deque<Held> kept;
  for (Held& frame : peer.held) {
    const bool pending = frame.forward && frame.forward_id != 0 && (frame.forward_id & kReplayIdBit) == 0;
    const bool replay = (frame.forward_id & kReplayIdBit) != 0 && replays_out_.contains(frame.forward_id);
    if (pending || replay) {
      peer.held_bytes -= frame.body.size();
      if (frame.forward) --counters_.forwards_held;
      Credit(frame);
      continue;
    }
    kept.push_back(std::move(frame));
  }
  peer.held.swap(kept);
  // Replays it has not confirmed: sent again too (a replay is a control
  // frame, dropped while there is no link).
  for (const auto& [replay_id, replay] : replays_out_) {
    if (!replay.waiting.contains(node)) continue;
    ++counters_.replays_sent_again;
    SendReplayTo(node, replay_id);
  }
  // Parked forwards (past their deadline on the lost link) are older than
  // the pending ones: they go first, so all keep their publish order, and
  // their publishers do not wait for the park deadline after a heal.
  std::deque<PendingForwards::Entry> entries = TakeParked(node);
  for (auto& entry : pending_forwards_.TakeForNode(node)) entries.push_back(std::move(entry));
  if (entries.empty()) return;
  counters_.forwards_resent += entries.size();
  spdlog::info("cluster: a new link to node {}: {} forward(s) it did not confirm are sent again", node,
               entries.size());
  for (auto& entry : entries) SendPendingAgain(node, entry);
}

// A forward not confirmed, pending again under a new id and deadline, sent
// again (not counted against its publisher's window: it was once).
void ClusterAgent::SendPendingAgain(NodeId node, const PendingForwards::Entry& entry) {
  Held frame;
  frame.type = kForward;
  frame.forward = true;
  frame.qos = entry.message->qos;
  frame.origin_shard = entry.shard;
  frame.forward_id = pending_forwards_.Add(node, entry.shard, entry.token, loop_.NowMs() + config_.forward_timeout_ms,
                                           entry.message, entry.plain, entry.shared_keys);
  frame.body = EncodeForward(frame.forward_id, entry.plain, entry.shared_keys, *entry.message);
  Send(node, std::move(frame));
}

bool ClusterAgent::PeerUnreachable(NodeId node) const {
  if (!membership_owned_) return false;
  const Member* member = membership_owned_->Find(node);
  if (member == nullptr) return false;
  return member->state == MemberState::kSuspect || member->state == MemberState::kDown ||
         member->state == MemberState::kLeft;
}

// --- sending, holding ------------------------------------------------------------

void ClusterAgent::Send(NodeId node, Held frame) {
  Peer& peer = peers_[node];
  if (frame.forward && frame.qos == QoS::kAtMostOnce && !peer.held.empty() && !transport_.connected(node)) {
    ++counters_.forwards_dropped;  // QoS 0 never waits for a link
    Credit(frame);
    return;
  }
  if (!peer.held.empty() || !TrySend(node, frame)) Hold(peer, std::move(frame));
}

// True once the frame is dealt with (queued, or dropped for good).
bool ClusterAgent::TrySend(NodeId node, Held& frame) {
  switch (transport_.Send(node, frame.type, frame.body)) {
    case SendResult::kQueued:
      if (frame.forward) Credit(frame);
      return true;
    case SendResult::kFull:
      return false;
    case SendResult::kNoLink:
      if (frame.forward && frame.qos != QoS::kAtMostOnce) return false;  // until the deadline
      if (frame.forward) {
        ++counters_.forwards_dropped;
        Credit(frame);
      }
      return true;  // control frames: the snapshot at link up replaces them
  }
  return true;
}

void ClusterAgent::Hold(Peer& peer, Held frame) {
  if (frame.forward && peer.held_bytes + frame.body.size() > config_.max_held_bytes) {
    // Over the bound: dropped. A QoS 1/2 publisher is released by the deadline.
    ++counters_.forwards_dropped;
    Credit(frame);
    return;
  }
  frame.since_ms = loop_.NowMs();
  peer.held_bytes += frame.body.size();
  if (frame.forward) ++counters_.forwards_held;
  peer.held.push_back(std::move(frame));
}

void ClusterAgent::DrainHeld(NodeId node) {
  Peer& peer = peers_[node];
  while (!peer.held.empty()) {
    Held& frame = peer.held.front();
    if (!TrySend(node, frame)) return;
    peer.held_bytes -= frame.body.size();
    if (frame.forward) --counters_.forwards_held;
    peer.held.pop_front();
  }
}

void ClusterAgent::DropHeld(Peer& peer, bool keep_reliable_forwards) {
  std::deque<Held> kept;
  for (Held& frame : peer.held) {
    if (frame.forward && keep_reliable_forwards && frame.qos != QoS::kAtMostOnce) {
      kept.push_back(std::move(frame));
      continue;
    }
    peer.held_bytes -= frame.body.size();
    if (frame.forward) {
      --counters_.forwards_held;
      ++counters_.forwards_dropped;
      Credit(frame);
    }
  }
  peer.held.swap(kept);
}

void ClusterAgent::Credit(const Held& frame) {
  if (frame.publisher.id == 0) return;
  auto& credits = pending_credits_[frame.publisher.shard];
  if (!credits.empty() && credits.back().first == frame.publisher.id) {
    ++credits.back().second;
  } else {
    credits.emplace_back(frame.publisher.id, 1);
  }
  ScheduleFlush();
}

// --- time --------------------------------------------------------------------------

void ClusterAgent::Tick() {
  tick_timer_ = loop_.AddTimer(config_.tick_ms, [this] { Tick(); });
  const int64_t now = loop_.NowMs();
  for (auto& [node, peer] : peers_) {
    // Held forwards past the deadline are dropped (their publishers released below).
    while (!peer.held.empty() && peer.held.front().forward &&
           now - peer.held.front().since_ms >= config_.forward_timeout_ms) {
      Held& frame = peer.held.front();
      peer.held_bytes -= frame.body.size();
      --counters_.forwards_held;
      ++counters_.forwards_dropped;
      Credit(frame);
      peer.held.pop_front();
    }
  }
  forward_dedup_.Expire(now);
  auto expired = pending_forwards_.TakeExpired(now);  // in publish order
  for (auto& pending : expired) {
    if (IsGone(pending.node)) {
      Replay(pending.node, std::move(pending));
    } else {
      // Not confirmed in time. A deadline never acknowledges a forward: the
      // peer may be cut off from this node only (still up for the others),
      // and the publisher's acknowledgement would then cover a message no
      // one holds. Parked until confirmed late, sent again at the park
      // deadline, or replayed when its node is gone.
      if (!PeerUnreachable(pending.node)) ++counters_.forwards_expired;
      pending.deadline_ms = now + config_.park_timeout_ms;
      ++counters_.forwards_parked;
      parked_[pending.node].push_back(std::move(pending));
    }
  }
  ExpireParkedAndReplays(now);
  if (!config_.partitioned_groups.empty()) TickGroupQueues();
  TickGroupPushers();
}

}  // namespace estuary::cluster
