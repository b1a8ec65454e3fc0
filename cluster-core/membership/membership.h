#pragma once
// Membership: who is in the cluster, in what state, at which addresses
// (docs/membership.md). Nodes join through seeds, gossip their member
// tables over the Transport (frames 0x10-0x1F), keep a full mesh of links
// (every member dials every other member's cluster address), detect
// failures from link loss (up -> suspect -> down, with indirect probes),
// refute false suspicion by raising their incarnation, leave gracefully,
// and are removed by an operator (a tombstone gossip cannot undo; a removed
// node rejoins only through a deliberate Join).
//
// Ownership and threading: the ClusterAgent owns one Membership on shard
// 0's loop and forwards it the Transport's OnPeerUp/OnPeerDown and frames
// 0x10-0x1F. Every method must be called on that loop. The Membership does
// not own the Transport or the Loop; both must outlive it.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/expected.h"
#include "cluster-core/links/transport.h"
#include "cluster-core/membership/membership_codec.h"
#include "io/loop.h"
#include "io/scope.h"

namespace estuary::cluster {

struct Member {
  NodeId node = 0;
  std::string cluster_address{};
  std::string admin_address{};
  MemberState state = MemberState::kJoining;
  uint64_t incarnation = 0;
  int64_t since_ms = 0;  // the local loop time this node saw `state` begin
  uint32_t epoch = 0;    // readmissions after a removal
  bool removed = false;  // kLeft by an operator's remove, not a graceful leave
};

struct MembershipConfig {
  NodeId self = 1;
  std::string cluster_address{};
  std::string admin_address{};
  uint32_t suspect_after_ms = 500;   // link lost this long -> suspect
  uint32_t down_after_ms = 3000;     // link lost this long (and nobody reaches it) -> down
  // A member whose link is down, whose address refused a redial since
  // (nothing listens there: its process is gone) and whom no other member
  // reaches is down once the suspicion's probes are answered, without
  // waiting for down_after_ms. Off where refusals can be spurious (a
  // firewall that rejects with a reset).
  bool down_on_refused = true;
  uint32_t leave_timeout_ms = 2000;  // Leave() waits this long for acks
  uint32_t gossip_interval_ms = 500;
  uint32_t tick_ms = 50;             // resolution of the failure detector
  // This process's first incarnation (BootIncarnation). Unset: the loop
  // clock's wall time in ms, so a restart comes back higher than before.
  std::optional<uint64_t> incarnation{};
};

// The incarnation a starting process takes: above the last one it persisted
// (`stored`, from its data dir) and at least the wall clock in ms, so a
// restarted node comes back higher than before if either its disk or its
// clock is right (and refutes whatever the cluster still holds if neither is).
uint64_t BootIncarnation(std::optional<uint64_t> stored, const io::Clock& clock);

class Membership {
 public:
  Membership(io::Loop& loop, Transport& transport, MembershipConfig config);
  ~Membership();
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

  // Called when a member appears or its state or addresses change
  // (including self), after the table changed.
  void set_on_change(std::function<void(const Member&)> fn) { on_change_ = std::move(fn); }
  // Called with this node's new incarnation whenever it rises (a
  // refutation), so the owner can persist it before a restart reuses it.
  void set_on_incarnation(std::function<void(uint64_t)> fn) { on_incarnation_ = std::move(fn); }
  // --bootstrap-expect (docs/cluster.md "Forming a cluster from one
  // configuration"): `formed` answers a member's BootstrapAsk (whether this
  // node's metadata group holds any state); `on_state` hears the answers to
  // AskBootstrapState. `formed` unset: asks are answered "not formed", so
  // an owner with a metadata group must set it (estuaryd does on every node).
  void set_bootstrap_hooks(std::function<bool()> formed, std::function<void(NodeId, bool)> on_state) {
    bootstrap_formed_ = std::move(formed);
    on_bootstrap_state_ = std::move(on_state);
  }
  void AskBootstrapState(NodeId node);
  // This node's addresses, when they are known only after listening (port 0).
  // Call before Start().
  void set_addresses(const std::string& cluster_address, const std::string& admin_address);
  // Adds the seeds to the transport and starts the timers. With no seed
  // (other than its own address) the node is the first member and is Up at
  // once; otherwise it is Joining until a member answers its join.
  void Start(const std::vector<std::string>& seeds);
  void OnPeerUp(const PeerInfo& peer);
  void OnPeerDown(NodeId node);
  void OnFrame(NodeId from, uint8_t type, std::string_view body);  // types 0x10-0x1F only
  // The links layer was refused by `address` before membership could talk
  // (its node id is held by a live link there, a wrong cluster secret, ...).
  // While this node is not yet admitted this is a refusal (last_refusal(),
  // /healthz); the transport keeps redialling and a later admission clears
  // it. Ignored once this node is up (one peer's refusal is not the cluster's).
  void OnLinkRefused(const std::string& address, const std::string& reason);
  // The transport's dial to `failure.address` failed (Transport's dial
  // observer). A refusal from a member whose link is down is the evidence
  // down_on_refused acts on; other failures say nothing and are ignored.
  void OnDialFailed(const DialFailure& failure);

  // estuaryctl join: dial `cluster_address` and exchange tables. On a node
  // that was removed, this is the deliberate rejoin; on a member, pointed at
  // a removed node's address, it invites that node back.
  void Join(const std::string& cluster_address);
  // estuaryctl remove: mark kLeft cluster-wide (a tombstone), drop its link.
  // Refuses self (use Leave) and unknown nodes.
  Expected<void, std::string> Remove(NodeId node);
  // Graceful leave: kLeaving is announced to every connected member, then
  // kLeft once all acked or after leave_timeout_ms; `done` runs (posted)
  // after kLeft was sent.
  void Leave(std::function<void()> done);
  uint32_t leave_timeout_ms() const { return config_.leave_timeout_ms; }

  std::vector<Member> members() const;  // sorted by node id, self included
  const Member* Find(NodeId node) const;
  bool IsLive(NodeId node) const;  // kJoining/kUp/kSuspect
  NodeId self() const { return config_.self; }
  int64_t NowMs() const { return loop_.NowMs(); }
  // Set when a member refused this node (node-id conflict), empty otherwise.
  // Cleared while a retried join is in flight; see last_refusal().
  const std::string& refused_reason() const { return refused_reason_; }
  // The latest refusal, kept across retried joins until a member admits
  // this node (for /healthz); empty once admitted or if never refused.
  const std::string& last_refusal() const { return last_refusal_; }
  uint64_t incarnation() const { return Find(config_.self)->incarnation; }
  // True once this node learnt it was removed (until a deliberate Join).
  bool removed() const { return removed_; }

 private:
  // The failure detector's view of one member whose link is down.
  struct Episode {
    int64_t lost_at_ms = 0;
    int64_t last_probe_ms = -1;    // when we last asked the others about it
    int64_t last_vouched_ms = -1;  // the latest "I still reach it" answer
    bool suspected = false;        // we hold a suspicion at suspected_incarnation
    int64_t suspected_at_ms = 0;
    uint64_t suspected_incarnation = 0;
    bool refused = false;          // a dial to it was refused since the loss
    std::set<NodeId> unanswered{};  // members asked in the latest probe round, yet to answer
  };
  bool RecentlyVouched(const Episode& episode, int64_t now) const;
  bool GoneForSure(const Episode& episode) const;
  void Probe(NodeId node, Episode& episode, int64_t now);
  void Suspect(Member& member, Episode& episode, int64_t now);

  Member& SelfRecord() { return table_.at(config_.self); }
  MemberEntry EntryOf(const Member& member) const;
  std::vector<MemberEntry> Table() const;
  void SetState(Member& member, MemberState state);
  void Notify(const Member& member);

  void HandleJoin(NodeId from, std::string_view body);
  void HandleWelcome(NodeId from, std::string_view body);
  void HandleLeave(NodeId from, std::string_view body);
  void HandleProbe(NodeId from, std::string_view body);
  void HandleProbeReply(NodeId from, std::string_view body);
  void HandleRefuse(NodeId from, std::string_view body);
  void HandleInvite(NodeId from);
  void HandleBootstrapState(NodeId from, std::string_view body);

  void Merge(const std::vector<MemberEntry>& entries);
  void MergeOne(const MemberEntry& entry);
  void MergeSelf(const MemberEntry& entry);
  void AfterChange(Member& member);
  void RaiseIncarnation(uint64_t incarnation);
  void BecomeRemoved(const MemberEntry& tombstone);
  bool ConflictsWith(NodeId node, const std::string& address) const;
  void Refuse(NodeId node, const std::string& address);

  void Tick();
  void TickEpisode(NodeId node, Episode& episode, int64_t now);
  void GossipTick();
  void SchedulePush();
  void Broadcast(MembershipFrame type, const std::string& body);
  void SendTable(NodeId to, MembershipFrame type);
  void SendJoin(NodeId to);
  void DropLinkSoon(NodeId node);
  void DropAllLinks();
  void FinishLeave();

  io::Loop& loop_;
  Transport& transport_;
  MembershipConfig config_;
  std::function<void(const Member&)> on_change_;
  std::function<void(uint64_t)> on_incarnation_;
  std::function<bool()> bootstrap_formed_;
  std::function<void(NodeId, bool)> on_bootstrap_state_;
  std::map<NodeId, Member> table_;
  std::map<NodeId, Episode> unreachable_;
  std::set<NodeId> refused_links_;       // links we refused (id conflict)
  std::set<std::string> refusals_logged_;  // conflicts already logged at error
  std::set<std::string> invited_;        // addresses an operator asked us to (re)admit
  std::set<NodeId> leave_waiting_;       // members yet to ack our kLeave
  std::vector<std::function<void()>> leave_done_;
  bool started_ = false;
  std::vector<std::string> seeds_;  // from Start(), redialled when a refused join retries
  io::TimerId rejoin_timer_ = 0;
  bool removed_ = false;
  bool rejoin_pending_ = false;
  bool push_scheduled_ = false;
  std::string refused_reason_;
  std::string last_refusal_;
  io::TimerId tick_timer_ = 0;
  io::TimerId gossip_timer_ = 0;
  io::TimerId leave_timer_ = 0;
  std::set<io::TimerId> linger_timers_;
  io::Scope scope_;  // guards the timers and posts that capture this (io/scope.h); last, so first to go
};

}  // namespace estuary::cluster
