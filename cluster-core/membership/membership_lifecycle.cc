// Membership: the failure detector, gossip timers, leave and remove.
#include <spdlog/spdlog.h>

#include "cluster-core/membership/membership.h"

namespace estuary::cluster {

// ---- failure detection ------------------------------------------------------

void Membership::Tick() {
  const int64_t now = loop_.NowMs();
  // TickEpisode may end episodes (a member turning left) and runs the
  // on_change callback: walk a copy of the keys, never a live iterator.
  std::vector<NodeId> nodes;
  for (const auto& [node, episode] : unreachable_) nodes.push_back(node);
  for (NodeId node : nodes) {
    auto it = unreachable_.find(node);
    if (it == unreachable_.end()) continue;
    if (transport_.connected(node) || !Find(node) || Find(node)->state == MemberState::kLeft) {
      unreachable_.erase(it);
      continue;
    }
    TickEpisode(node, it->second, now);
  }
  tick_timer_ = loop_.AddTimer(config_.tick_ms, scope_.Guard([this] { Tick(); }));
}

// One member whose link is down. After suspect_after_ms: suspect it and ask
// the others, every suspect_after_ms, whether they still reach it. It is
// declared down once the suspicion held down_after_ms - suspect_after_ms
// (so down_after_ms after the loss) with no refutation and no recent "I
// reach it"; sooner if its address refused a redial (GoneForSure). A
// refuted suspicion is raised again only when nobody vouches for the node
// any more, so a node cut off from us alone does not flap.
void Membership::TickEpisode(NodeId node, Episode& episode, int64_t now) {
  Member& member = table_.at(node);
  const int64_t lost_for = now - episode.lost_at_ms;
  if (lost_for < config_.suspect_after_ms) return;
  if (member.state == MemberState::kLeaving) {
    SetState(member, MemberState::kLeft);  // it went away while leaving
    AfterChange(member);                   // ends `episode`: do not touch it below
    Notify(member);
    SchedulePush();
    return;
  }
  if (member.state == MemberState::kDown) return;
  if (episode.last_probe_ms < 0 || now - episode.last_probe_ms >= config_.suspect_after_ms) {
    Probe(node, episode, now);
  }
  const bool refuted = episode.suspected && member.incarnation != episode.suspected_incarnation;
  // Refusals seen so far were about the process that has since refuted.
  if (refuted) episode.refused = false;
  if (member.state == MemberState::kSuspect && (!episode.suspected || refuted)) {
    episode.suspected = true;  // suspected by someone else first
    episode.suspected_at_ms = now;
    episode.suspected_incarnation = member.incarnation;
    return;
  }
  if (!episode.suspected || (refuted && !RecentlyVouched(episode, now))) {
    return Suspect(member, episode, now);
  }
  const int64_t grace = int64_t{config_.down_after_ms} - config_.suspect_after_ms;
  if (member.state != MemberState::kSuspect || refuted || RecentlyVouched(episode, now)) return;
  const bool grace_over = now - episode.suspected_at_ms >= grace;
  if (!grace_over && !GoneForSure(episode)) return;
  spdlog::warn("membership: node {} unreachable for {} ms{} and by nobody else: down", node, lost_for,
               grace_over ? "" : ", its address refusing connections,");
  SetState(member, MemberState::kDown);
  Notify(member);
  SchedulePush();
}

// A vouch covers two probe rounds (answers take a round trip).
bool Membership::RecentlyVouched(const Episode& episode, int64_t now) const {
  return episode.last_vouched_ms >= 0 && now - episode.last_vouched_ms < 2 * int64_t{config_.suspect_after_ms};
}

// down_on_refused: a refused redial says nothing listens at the member's
// address any more, unlike a silent link (a cut cable, a stalled process),
// where only time tells. Still down only once this probe round is over
// (every member asked has answered, none reaching it, or has lost its own
// link to us), so a member cut off from us alone stays up.
bool Membership::GoneForSure(const Episode& episode) const {
  if (!config_.down_on_refused || !episode.refused || episode.last_probe_ms < 0) return false;
  for (NodeId asked : episode.unanswered) {
    if (transport_.connected(asked)) return false;
  }
  return true;
}

void Membership::Probe(NodeId node, Episode& episode, int64_t now) {
  episode.last_probe_ms = now;
  episode.unanswered.clear();
  for (const PeerInfo& peer : transport_.peers()) {
    if (peer.node != node && IsLive(peer.node) && !refused_links_.count(peer.node)) {
      const SendResult sent =
          transport_.Send(peer.node, static_cast<uint8_t>(MembershipFrame::kProbe), EncodeProbe({.target = node}));
      if (sent == SendResult::kQueued) episode.unanswered.insert(peer.node);
    }
  }
}

void Membership::Suspect(Member& member, Episode& episode, int64_t now) {
  episode.suspected = true;
  episode.suspected_at_ms = now;
  episode.suspected_incarnation = member.incarnation;
  if (member.state != MemberState::kJoining && member.state != MemberState::kUp) return;
  spdlog::warn("membership: node {} unreachable for {} ms: suspect", member.node, now - episode.lost_at_ms);
  SetState(member, MemberState::kSuspect);
  Notify(member);
  SchedulePush();
}

// ---- gossip -----------------------------------------------------------------

void Membership::GossipTick() {
  if (!removed_ && refused_reason_.empty()) Broadcast(MembershipFrame::kGossip, EncodeTable(0, Table()));
  gossip_timer_ = loop_.AddTimer(config_.gossip_interval_ms, scope_.Guard([this] { GossipTick(); }));
}

// Changes go out at once (coalesced per loop turn), not at the next tick.
void Membership::SchedulePush() {
  if (push_scheduled_ || !started_) return;
  push_scheduled_ = true;
  loop_.Post(scope_.Guard([this] {
    push_scheduled_ = false;
    if (!refused_reason_.empty()) return;
    if (removed_ && !rejoin_pending_) return;
    Broadcast(MembershipFrame::kGossip, EncodeTable(0, Table()));
  }));
}

void Membership::Broadcast(MembershipFrame type, const std::string& body) {
  for (const PeerInfo& peer : transport_.peers()) {
    if (refused_links_.count(peer.node)) continue;
    transport_.Send(peer.node, static_cast<uint8_t>(type), body);
  }
}

void Membership::SendTable(NodeId to, MembershipFrame type) {
  transport_.Send(to, static_cast<uint8_t>(type), EncodeTable(0, Table()));
}

void Membership::SendJoin(NodeId to) {
  transport_.Send(to, static_cast<uint8_t>(MembershipFrame::kJoin),
                  EncodeTable(rejoin_pending_ ? 0x01 : 0x00, Table()));
}

// RemovePeer drops frames not yet written, so a link we still have
// something to say on (a tombstone, a refusal) is closed a little later.
void Membership::DropLinkSoon(NodeId node) {
  if (!transport_.connected(node)) {
    transport_.RemovePeer(node);
    return;
  }
  const uint32_t linger_ms = std::max<uint32_t>(100, config_.tick_ms * 2);
  auto id = std::make_shared<io::TimerId>(0);
  *id = loop_.AddTimer(linger_ms, scope_.Guard([this, node, id] {
    linger_timers_.erase(*id);
    const Member* member = Find(node);
    const bool still_unwanted = refused_links_.count(node) || member == nullptr ||
                                member->state == MemberState::kLeft || removed_ ||
                                !refused_reason_.empty() || node == config_.self;
    if (still_unwanted) transport_.RemovePeer(node);
  }));
  linger_timers_.insert(*id);
}

void Membership::DropAllLinks() {
  for (const PeerInfo& peer : transport_.peers()) DropLinkSoon(peer.node);
  for (const auto& [node, member] : table_) {
    if (node != config_.self && !transport_.connected(node)) transport_.RemovePeer(node);
  }
}

// ---- operator actions -------------------------------------------------------

Expected<void, std::string> Membership::Remove(NodeId node) {
  if (node == config_.self) return MakeError(std::string("cannot remove this node itself; use leave"));
  auto it = table_.find(node);
  if (it == table_.end()) return MakeError(fmt::format("unknown node {}", node));
  Member& member = it->second;
  if (member.state == MemberState::kLeft && member.removed) return {};
  spdlog::warn("membership: operator removes node {} ({})", node, member.cluster_address);
  member.removed = true;  // also turns a graceful leave into a removal: no rejoin on restart
  SetState(member, MemberState::kLeft);
  AfterChange(member);
  Notify(member);
  SchedulePush();
  return {};
}

void Membership::Leave(std::function<void()> done) {
  Member& self = SelfRecord();
  if (done) leave_done_.push_back(std::move(done));
  if (self.state == MemberState::kLeft) return FinishLeave();
  if (self.state == MemberState::kLeaving) return;
  spdlog::info("membership: node {} leaving", config_.self);
  SetState(self, MemberState::kLeaving);
  Notify(self);
  leave_waiting_.clear();
  const std::string body = EncodeTable(0, Table());
  for (const PeerInfo& peer : transport_.peers()) {
    if (!IsLive(peer.node) || refused_links_.count(peer.node)) continue;
    leave_waiting_.insert(peer.node);
    transport_.Send(peer.node, static_cast<uint8_t>(MembershipFrame::kLeave), body);
  }
  if (leave_waiting_.empty()) return FinishLeave();
  leave_timer_ = loop_.AddTimer(config_.leave_timeout_ms, scope_.Guard([this] {
    leave_timer_ = 0;
    if (!leave_waiting_.empty()) {
      spdlog::warn("membership: leave timed out waiting for {} member(s)", leave_waiting_.size());
    }
    FinishLeave();
  }));
}

void Membership::FinishLeave() {
  Member& self = SelfRecord();
  leave_waiting_.clear();
  if (leave_timer_ != 0) loop_.CancelTimer(leave_timer_);
  leave_timer_ = 0;
  if (self.state != MemberState::kLeft) {
    SetState(self, MemberState::kLeft);
    Notify(self);
    Broadcast(MembershipFrame::kGossip, EncodeTable(0, Table()));
    spdlog::info("membership: node {} left the cluster", config_.self);
  }
  removed_ = true;  // this process stays out until a deliberate Join; a new process rejoins
  DropAllLinks();
  auto callbacks = std::move(leave_done_);
  leave_done_.clear();
  for (auto& fn : callbacks) loop_.Post(std::move(fn));
}

}  // namespace estuary::cluster
