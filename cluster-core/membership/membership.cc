// Membership: table, merge, joins and frames. The failure detector, leave
// and remove are in membership_lifecycle.cc.
#include "cluster-core/membership/membership.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace estuary::cluster {

uint64_t BootIncarnation(std::optional<uint64_t> stored, const io::Clock& clock) {
  const int64_t wall_ms = clock.WallMs();
  const uint64_t from_clock = wall_ms > 0 ? static_cast<uint64_t>(wall_ms) : 0;
  if (!stored) return from_clock;
  return std::max(*stored + 1, from_clock);
}

Membership::Membership(io::Loop& loop, Transport& transport, MembershipConfig config)
    : loop_(loop), transport_(transport), config_(std::move(config)) {
  Member self;
  self.node = config_.self;
  self.cluster_address = config_.cluster_address;
  self.admin_address = config_.admin_address;
  self.since_ms = loop_.NowMs();
  self.incarnation = config_.incarnation ? *config_.incarnation : BootIncarnation(std::nullopt, loop_.clock());
  table_.emplace(config_.self, std::move(self));
}

Membership::~Membership() {
  for (io::TimerId id : {tick_timer_, gossip_timer_, leave_timer_, rejoin_timer_}) {
    if (id != 0) loop_.CancelTimer(id);
  }
  for (io::TimerId id : linger_timers_) loop_.CancelTimer(id);
}

void Membership::set_addresses(const std::string& cluster_address, const std::string& admin_address) {
  config_.cluster_address = cluster_address;
  config_.admin_address = admin_address;
  Member& self = SelfRecord();
  self.cluster_address = cluster_address;
  self.admin_address = admin_address;
}

void Membership::Start(const std::vector<std::string>& seeds) {
  if (started_) return;
  started_ = true;
  seeds_ = seeds;
  bool has_seed = false;
  for (const std::string& seed : seeds) {
    if (seed.empty() || seed == config_.cluster_address) continue;
    has_seed = true;
    transport_.AddPeerAddress(seed);
  }
  Member& self = SelfRecord();
  SetState(self, has_seed ? MemberState::kJoining : MemberState::kUp);
  Notify(self);
  spdlog::info("membership: node {} at {} starting {}", config_.self, config_.cluster_address,
               has_seed ? "(joining through seeds)" : "as the first member");
  Tick();
  GossipTick();
}

MemberEntry Membership::EntryOf(const Member& member) const {
  return {member.node,          member.epoch,         member.incarnation, member.state,
          member.cluster_address, member.admin_address, member.removed};
}

std::vector<MemberEntry> Membership::Table() const {
  std::vector<MemberEntry> table;
  table.reserve(table_.size());
  for (const auto& [node, member] : table_) table.push_back(EntryOf(member));
  return table;
}

std::vector<Member> Membership::members() const {
  std::vector<Member> out;
  out.reserve(table_.size());
  for (const auto& [node, member] : table_) out.push_back(member);
  return out;
}

const Member* Membership::Find(NodeId node) const {
  auto it = table_.find(node);
  return it == table_.end() ? nullptr : &it->second;
}

bool Membership::IsLive(NodeId node) const {
  const Member* member = Find(node);
  if (member == nullptr) return false;
  return member->state == MemberState::kJoining || member->state == MemberState::kUp ||
         member->state == MemberState::kSuspect;
}

void Membership::SetState(Member& member, MemberState state) {
  if (member.state == state) return;
  member.state = state;
  member.since_ms = loop_.NowMs();
}

void Membership::Notify(const Member& member) {
  if (on_change_) on_change_(member);
}

// ---- links ----------------------------------------------------------------

void Membership::OnPeerUp(const PeerInfo& peer) {
  unreachable_.erase(peer.node);
  if (removed_ && !rejoin_pending_) return;  // isolated: only an invite brings us back
  if (ConflictsWith(peer.node, peer.cluster_address)) {
    Refuse(peer.node, peer.cluster_address);
    return;
  }
  const Member* known = Find(peer.node);
  if (known != nullptr && known->state == MemberState::kLeft && invited_.count(peer.cluster_address)) {
    invited_.erase(peer.cluster_address);
    spdlog::info("membership: inviting removed node {} at {} back", peer.node, peer.cluster_address);
    transport_.Send(peer.node, static_cast<uint8_t>(MembershipFrame::kInvite), EncodeEmpty());
    return;
  }
  invited_.erase(peer.cluster_address);
  SendJoin(peer.node);
  // A removed node that dialled in learns of its tombstone from our answer.
  if (known != nullptr && known->state == MemberState::kLeft) DropLinkSoon(peer.node);
}

void Membership::OnPeerDown(NodeId node) {
  refused_links_.erase(node);
  if (leave_waiting_.erase(node) && leave_waiting_.empty()) FinishLeave();
  const Member* member = Find(node);
  if (member == nullptr || member->state == MemberState::kLeft || node == config_.self) return;
  unreachable_.try_emplace(node, Episode{.lost_at_ms = loop_.NowMs()});
}

bool Membership::ConflictsWith(NodeId node, const std::string& address) const {
  if (node == config_.self) return address != config_.cluster_address;
  const Member* known = Find(node);
  if (known == nullptr || !IsLive(node) || address.empty() || known->cluster_address.empty()) return false;
  return known->cluster_address != address;
}

void Membership::Refuse(NodeId node, const std::string& address) {
  const Member* known = Find(node);
  const std::string holder = known != nullptr ? known->cluster_address : config_.cluster_address;
  const std::string reason = fmt::format("node id {} is already a live member at {}; refused {}", node,
                                         holder, address);
  // Once at error per conflict: the newcomer retries every few seconds.
  if (refusals_logged_.insert(reason).second) {
    spdlog::error("membership: {}", reason);
  } else {
    spdlog::info("membership: {}", reason);
  }
  refused_links_.insert(node);
  transport_.Send(node, static_cast<uint8_t>(MembershipFrame::kRefuse), EncodeReason(reason));
  DropLinkSoon(node);
  // The link layer forgets the address on RemovePeer: keep dialling the
  // rightful holder's.
  if (known != nullptr && node != config_.self) transport_.AddPeerAddress(known->cluster_address);
}

// ---- frames ---------------------------------------------------------------

void Membership::OnFrame(NodeId from, uint8_t type, std::string_view body) {
  if (refused_links_.count(from) || !refused_reason_.empty()) return;
  const auto frame = static_cast<MembershipFrame>(type);
  if (removed_ && !rejoin_pending_ && frame != MembershipFrame::kInvite) return;
  switch (frame) {
    case MembershipFrame::kJoin: return HandleJoin(from, body);
    case MembershipFrame::kWelcome: return HandleWelcome(from, body);
    case MembershipFrame::kGossip:
      if (auto table = DecodeTable(body)) return Merge(table->table);
      break;
    case MembershipFrame::kLeave: return HandleLeave(from, body);
    case MembershipFrame::kLeaveAck:
      if (leave_waiting_.erase(from) && leave_waiting_.empty()) FinishLeave();
      return;
    case MembershipFrame::kProbe: return HandleProbe(from, body);
    case MembershipFrame::kProbeReply: return HandleProbeReply(from, body);
    case MembershipFrame::kRefuse: return HandleRefuse(from, body);
    case MembershipFrame::kInvite: return HandleInvite(from);
    case MembershipFrame::kBootstrapAsk:
      if (!DecodeEmpty(body)) break;
      transport_.Send(from, static_cast<uint8_t>(MembershipFrame::kBootstrapState),
                      EncodeFlag(bootstrap_formed_ && bootstrap_formed_()));
      return;
    case MembershipFrame::kBootstrapState: return HandleBootstrapState(from, body);
  }
  spdlog::warn("membership: dropped a malformed or unknown frame 0x{:02x} from node {}", type, from);
}

void Membership::HandleJoin(NodeId from, std::string_view body) {
  auto join = DecodeTable(body);
  if (!join) {
    spdlog::warn("membership: malformed join from node {}", from);
    return;
  }
  for (const MemberEntry& entry : join->table) {
    if (entry.node == from && ConflictsWith(from, entry.cluster_address)) {
      return Refuse(from, entry.cluster_address);
    }
  }
  if (join->rejoin) spdlog::info("membership: node {} asks to be readmitted", from);
  Merge(join->table);
  SendTable(from, MembershipFrame::kWelcome);
}

void Membership::HandleWelcome(NodeId from, std::string_view body) {
  auto welcome = DecodeTable(body);
  if (!welcome) return;
  Merge(welcome->table);
  // Full mesh: dial every live member (a no-op for known addresses; needed
  // after a readmission, when the links were dropped).
  for (const auto& [node, member] : table_) {
    if (removed_) break;
    if (node != config_.self && IsLive(node) && !member.cluster_address.empty()) {
      transport_.AddPeerAddress(member.cluster_address);
    }
  }
  Member& self = SelfRecord();
  if (self.state == MemberState::kJoining && !removed_) {
    if (!last_refusal_.empty()) spdlog::info("membership: admitted after an earlier refusal");
    last_refusal_.clear();
    spdlog::info("membership: node {} joined through node {}", config_.self, from);
    SetState(self, MemberState::kUp);
    Notify(self);
    SchedulePush();
  }
}

void Membership::HandleLeave(NodeId from, std::string_view body) {
  if (auto table = DecodeTable(body)) Merge(table->table);
  transport_.Send(from, static_cast<uint8_t>(MembershipFrame::kLeaveAck), EncodeEmpty());
}

void Membership::HandleProbe(NodeId from, std::string_view body) {
  auto probe = DecodeProbe(body);
  if (!probe) return;
  probe->reachable = probe->target != from && transport_.connected(probe->target);
  transport_.Send(from, static_cast<uint8_t>(MembershipFrame::kProbeReply), EncodeProbe(*probe));
}

void Membership::HandleProbeReply(NodeId from, std::string_view body) {
  auto probe = DecodeProbe(body);
  if (!probe) return;
  auto it = unreachable_.find(probe->target);
  if (it == unreachable_.end()) return;
  it->second.unanswered.erase(from);
  if (probe->reachable) it->second.last_vouched_ms = loop_.NowMs();
}

void Membership::HandleRefuse(NodeId from, std::string_view body) {
  auto reason = DecodeReason(body);
  if (SelfRecord().state != MemberState::kJoining) {
    spdlog::warn("membership: node {} refused us while we are a member; ignored", from);
    return;
  }
  refused_reason_ = reason ? *reason : std::string("refused");
  // Logged at error once per reason; the retries below repeat it quietly.
  if (refused_reason_ != last_refusal_) {
    spdlog::error("membership: node {} refused this node: {}; it serves its own clients only until "
                  "admitted (/healthz answers 503)",
                  from, refused_reason_);
  } else {
    spdlog::info("membership: node {} refused this node again: {}", from, refused_reason_);
  }
  last_refusal_ = refused_reason_;
  DropAllLinks();
  // A node restarted quickly on another address is refused while its old
  // incarnation still counts as live; once the members have marked that one
  // down, the same join succeeds. Retry through the seeds after that long
  // (an explicit Join() clears the refusal sooner).
  if (rejoin_timer_ != 0) return;
  const int64_t delay = int64_t{config_.suspect_after_ms} + config_.down_after_ms;
  rejoin_timer_ = loop_.AddTimer(delay, scope_.Guard([this] {
    rejoin_timer_ = 0;
    if (refused_reason_.empty() || SelfRecord().state != MemberState::kJoining) return;
    spdlog::info("membership: retrying the join through the seeds after a refusal");
    for (const std::string& seed : seeds_) {
      if (!seed.empty() && seed != config_.cluster_address) Join(seed);
    }
  }));
}

void Membership::OnLinkRefused(const std::string& address, const std::string& reason) {
  if (SelfRecord().state != MemberState::kJoining || removed_) return;
  const std::string refusal = fmt::format("{} refused this node: {}", address, reason);
  if (refusal == last_refusal_) return;  // every redial is refused alike
  spdlog::error("membership: {}; it serves its own clients only until admitted (/healthz answers 503)",
                refusal);
  last_refusal_ = refusal;
}

void Membership::OnDialFailed(const DialFailure& failure) {
  if (failure.error != DialError::kRefused) return;
  // Matched by address, not failure.node: the table says who lives there now.
  for (auto& [node, episode] : unreachable_) {
    const Member* member = Find(node);
    if (member == nullptr || member->cluster_address != failure.address || episode.refused) continue;
    episode.refused = true;
    spdlog::info("membership: node {} lost {} ms ago, and {} refused a redial: {}", node,
                 loop_.NowMs() - episode.lost_at_ms, failure.address, failure.detail);
  }
}

void Membership::AskBootstrapState(NodeId node) {
  transport_.Send(node, static_cast<uint8_t>(MembershipFrame::kBootstrapAsk), EncodeEmpty());
}

void Membership::HandleBootstrapState(NodeId from, std::string_view body) {
  const std::optional<bool> formed = DecodeFlag(body);
  if (!formed) {
    spdlog::warn("membership: dropped a malformed bootstrap state from node {}", from);
    return;
  }
  if (on_bootstrap_state_) on_bootstrap_state_(from, *formed);
}

void Membership::HandleInvite(NodeId from) {
  if (!removed_) return;
  spdlog::info("membership: node {} invites this removed node back", from);
  rejoin_pending_ = true;
  SendJoin(from);
}

void Membership::Join(const std::string& cluster_address) {
  if (removed_) rejoin_pending_ = true;
  refused_reason_.clear();
  invited_.insert(cluster_address);
  transport_.AddPeerAddress(cluster_address);
  for (const PeerInfo& peer : transport_.peers()) {
    if (peer.cluster_address == cluster_address) OnPeerUp(peer);
  }
}

// ---- merge ----------------------------------------------------------------

void Membership::Merge(const std::vector<MemberEntry>& entries) {
  for (const MemberEntry& entry : entries) {
    if (entry.node == 0) continue;
    if (entry.node == config_.self) {
      MergeSelf(entry);
    } else {
      MergeOne(entry);
    }
  }
}

void Membership::MergeOne(const MemberEntry& entry) {
  auto [it, inserted] = table_.try_emplace(entry.node);
  Member& member = it->second;
  if (!inserted && !Supersedes(entry, EntryOf(member))) return;
  // A "down" verdict about a live member this node is linked to right now
  // is stale: it comes from a node that was cut off (and declared down
  // everyone it could not reach) or from before the member came back.
  // Taken, it would flap the member everywhere (its routes forgotten, its
  // sessions taken over) until the member refutes it. The member still
  // hears it from the sender and refutes it; suspicions spread as before.
  if (!inserted && entry.state == MemberState::kDown && entry.epoch == member.epoch && IsLive(entry.node) &&
      transport_.connected(entry.node)) {
    return;
  }
  // A new incarnation alone is news too (the metadata group records it),
  // except for a member already down or left.
  const bool gone = entry.state == MemberState::kDown || entry.state == MemberState::kLeft;
  const bool visible_change = inserted || member.state != entry.state ||
                              member.cluster_address != entry.cluster_address ||
                              member.admin_address != entry.admin_address ||
                              (member.incarnation != entry.incarnation && !gone);
  if (inserted || member.state != entry.state) member.since_ms = loop_.NowMs();
  member.node = entry.node;
  member.epoch = entry.epoch;
  member.incarnation = entry.incarnation;
  member.state = entry.state;
  member.cluster_address = entry.cluster_address;
  member.admin_address = entry.admin_address;
  member.removed = entry.removed;
  AfterChange(member);
  if (visible_change) {
    Notify(member);
    SchedulePush();
  }
}

void Membership::AfterChange(Member& member) {
  if (member.state == MemberState::kLeft) {
    unreachable_.erase(member.node);
    leave_waiting_.erase(member.node);
    DropLinkSoon(member.node);
    return;
  }
  if (member.cluster_address.empty()) return;
  transport_.AddPeerAddress(member.cluster_address);  // full mesh; a no-op when known
  if (IsLive(member.node) && !transport_.connected(member.node)) {
    unreachable_.try_emplace(member.node, Episode{.lost_at_ms = loop_.NowMs()});
  }
}

void Membership::MergeSelf(const MemberEntry& entry) {
  Member& self = SelfRecord();
  if (entry.epoch < self.epoch) return;  // from before our readmission
  if (entry.state == MemberState::kLeft) {
    if (rejoin_pending_) {
      rejoin_pending_ = false;
      removed_ = false;
      self.epoch = entry.epoch + 1;  // the incarnation stays: it only ever rises
      self.removed = false;
      SetState(self, MemberState::kUp);
      spdlog::info("membership: node {} readmitted (epoch {})", config_.self, self.epoch);
      Notify(self);
      SchedulePush();
      return;
    }
    if (self.state == MemberState::kLeaving || self.state == MemberState::kLeft) return;
    if (!entry.removed && !removed_) {
      // A graceful leave's tombstone, and this process never left: it is a
      // new process, started to join (maybe already up through a member
      // that had not heard of the leave).
      self.epoch = entry.epoch + 1;
      spdlog::info("membership: node {} left the cluster earlier; rejoining (epoch {})", config_.self,
                   self.epoch);
      SchedulePush();
      return;
    }
    return BecomeRemoved(entry);
  }
  if (Supersedes(entry, EntryOf(self))) {
    // Someone holds an older or wrong view of us (suspect, down, a previous
    // run): refute it with a higher incarnation.
    self.epoch = entry.epoch;
    spdlog::info("membership: refuting '{}' about node {} (incarnation {})", ToString(entry.state),
                 config_.self, entry.incarnation + 1);
    RaiseIncarnation(entry.incarnation + 1);
    SchedulePush();
  }
}

void Membership::RaiseIncarnation(uint64_t incarnation) {
  Member& self = SelfRecord();
  if (incarnation <= self.incarnation) return;
  self.incarnation = incarnation;
  if (on_incarnation_) on_incarnation_(incarnation);
  Notify(self);
}

void Membership::BecomeRemoved(const MemberEntry& tombstone) {
  Member& self = SelfRecord();
  spdlog::warn("membership: node {} was removed from the cluster; `estuaryctl join ADDR` readmits it",
               config_.self);
  removed_ = true;
  self.epoch = tombstone.epoch;
  self.removed = tombstone.removed;
  SetState(self, MemberState::kLeft);
  unreachable_.clear();
  Notify(self);
  DropAllLinks();
}

}  // namespace estuary::cluster
