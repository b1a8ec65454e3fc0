#pragma once
// ClusterAgent: a node's half of cross-node publish/subscribe. Pure logic
// on an io::Loop and a Transport (no sockets), so it runs in estuaryd on
// shard 0's loop and in tests on a SimLoop with an in-memory Transport.
//
// What it does (docs/cluster.md):
//  - routes: aggregates the route sets of this node's shards into one
//    node-level set (a filter held by any shard is one route) and proposes
//    the changes to the metadata group, batched per loop iteration; the
//    routes the group applies for other nodes are applied to every shard's
//    Router as Destination NodeDestination(node) (ApplyRemoteRoutes).
//  - forwards: a shard's NodeForward becomes one kForward frame; the
//    receiving agent hands it to the shard its publisher's client id hashes
//    to (DeliverFromNode), and returns kForwardSafe once it is enqueued
//    (and durable); only then does the origin shard's safe step complete.
//    Frames a peer cannot take now are held in a bounded queue per peer.
//  - retained messages are written to their topics' partitions and read
//    from them (cluster_retained.cc); a client id is claimed in the
//    registry, whose committed claim names the one connection it replaced,
//    and only that node is told (kClientAttached, cluster_registry.cc).
//  - a peer the metadata group declares gone (its MemberGone; a graceful
//    leave at once) is gone: every shard forgets its routes (after
//    replay_grace_ms). A QoS 1/2 forward
//    it never confirmed is not given up: once the peer is gone it is sent
//    again (kForwardReplay) to every live node, which delivers it only to
//    the sessions it took from that peer, once its own takeover of them is
//    done; its publisher's acknowledgement waits for all of them
//    (docs/partitions.md, "The takeover gap"; cluster_replay.cc).
//
// estuaryd enables all three of membership (EnableMembership), the
// metadata group (EnableMetadata) and partitions (EnablePartitions). Unit
// tests of the forwarding paths may run without them: routes then go
// through a double (UseRouteProposer) and a test declares a node gone
// itself (DeclareGone); nothing else decides it.
//
// Threading: everything runs on the agent's loop. Shards reach it only
// through port() (posts to that loop), and it reaches shards only through
// the ShardLink.
#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cluster-core/broker/cluster_port.h"
#include "cluster-core/broker/shard_broker.h"
#include "cluster-core/cluster/cluster_frames.h"
#include "cluster-core/cluster/forward_dedup.h"
#include "cluster-core/cluster/moved_stubs.h"
#include "cluster-core/cluster/pending_forwards.h"
#include "cluster-core/links/transport.h"
#include "cluster-core/membership/membership.h"
#include "cluster-core/meta/meta_group.h"
#include "cluster-core/partition/partition_host.h"
#include "cluster-core/partition/queue_flow.h"
#include "cluster-core/partition/queue_frames.h"
#include "cluster-core/partition/session_machine.h"
#include "cluster-core/services/retained/retained_service.h"
#include "io/loop.h"
#include "io/scope.h"
#include "persistence/storage_engine.h"

namespace estuary::cluster {

// Replay ids (kForwardReplay, confirmed by kForwardSafe) have this bit set;
// forward ids never reach it.
inline constexpr uint64_t kReplayIdBit = uint64_t{1} << 62;

struct ClusterAgentConfig {
  NodeId self = 1;
  uint16_t shard_count = 1;
  // A QoS 1/2 forward not confirmed by then no longer holds its publisher's
  // acknowledgement (counted in forwards_expired).
  uint32_t forward_timeout_ms = 5000;
  // The takeover gap (docs/partitions.md): a forward to an unreachable
  // node waits this long for the node to come back or be declared gone.
  uint32_t park_timeout_ms = 60000;
  // A gone node's routes stay this long (forwards on them are replayed),
  // so publishes made before the survivors' routes for the sessions they
  // took over arrive are not lost.
  uint32_t replay_grace_ms = 15000;
  // A replay waits on its receiver this long at most for that node's
  // takeover of the gone node's sessions to finish.
  uint32_t replay_hold_ms = 20000;
  // A replay not confirmed by every live node by then is sent again to the
  // connected ones (never acknowledged unconfirmed), every time this passes.
  uint32_t replay_timeout_ms = 30000;
  // Forward frames held per peer while its link is down or full, in bytes.
  size_t max_held_bytes = 8u << 20;
  uint32_t tick_ms = 100;
  // Partitioned shared groups by group name (--partitioned-group; the
  // shards have the same map): docs/cluster.md "Partitioned shared groups".
  std::map<std::string, core::PartitionedGroup, std::less<>> partitioned_groups;
  // A message not appended to a partitioned group's queue by then releases
  // its publisher (counted, logged).
  uint32_t group_append_deadline_ms = 30000;
  // Tells this process's queue hands from an earlier one's of the same
  // node (partition::QueueHand); 0: the loop's wall clock at start.
  uint64_t incarnation = 0;
};

struct ClusterCounters {
  uint64_t forwards_out = 0;
  uint64_t forwards_in = 0;
  uint64_t forwards_dropped = 0;  // QoS 0 to a peer without a link, or over the held bound
  uint64_t forwards_expired = 0;  // released by the deadline
  // Parked forwards past park_timeout_ms: sent again if the link was up,
  // else parked once more (a deadline never acknowledges a forward).
  uint64_t forwards_parked_again = 0;
  uint64_t forwards_parked = 0;    // waited past forward_timeout_ms for an unreachable node (now)
  uint64_t forwards_replayed = 0;  // sent again to the live nodes: their node was gone
  uint64_t forwards_resent = 0;    // sent again on a new link: the one they went out on was lost
  uint64_t forward_copies_in = 0;  // QoS 2 forwards received again, answered without a second delivery
  uint64_t replays_sent_again = 0;  // replays sent again: on a new link, or unconfirmed at replay_timeout_ms
  uint64_t replays_redirected = 0;  // replays whose target went gone unconfirmed, made again for it
  uint64_t replays_in = 0;         // replays received (own ones included)
  uint64_t replays_held = 0;       // waiting here for this node's takeover of their node (now)
  uint64_t forwards_held = 0;     // held now (all peers)
  uint64_t route_changes_out = 0;
  uint64_t route_changes_in = 0;
  uint64_t takeovers_in = 0;  // attaches elsewhere that ended a session here
  uint64_t client_claims = 0;          // client-id claims proposed to the registry
  uint64_t client_claims_failed = 0;   // not committed in time: the CONNECT was refused
  uint64_t client_takeovers_out = 0;   // claims that told another node to close its connection
  uint64_t session_writes = 0;           // session write entries proposed to partitions
  uint64_t session_write_retries = 0;    // attempts that failed and were made again
  uint64_t session_batches_pending = 0;  // shard batches not replicated yet (their publishers wait)
  uint64_t session_writes_refused = 0;   // client changes refused: the session is another node's now
  uint64_t session_writes_stale = 0;     // fenced changes of a replaced copy here, dropped by the partition
  uint64_t session_loads = 0;            // sessions read from partitions for a CONNECT
  uint64_t session_loads_failed = 0;     // not read in time: the CONNECT was refused
  uint64_t sessions_taken_over = 0;      // a gone node's sessions claimed and served here
  uint64_t session_takeovers_failed = 0; // listings, claims or reads that did not succeed
  uint64_t recovered_sessions_stale = 0; // recovered here, owned by another node by then
  uint64_t session_handoffs = 0;            // hand-offs of deliveries left behind by a move, sent (chunks)
  uint64_t session_handoff_deliveries = 0;  // deliveries in them
  uint64_t session_handoffs_unowned = 0;    // not sent: no node serves the session any more (it ended)
  uint64_t session_handoffs_failed = 0;     // given up (no answer, or no node took them, in every attempt)
  uint64_t session_handoffs_in = 0;         // hand-offs received and taken by a session here
  uint64_t moved_stub_handoffs = 0;         // of the hand-offs, made of what a moved session's stub matched
  uint64_t group_appends = 0;            // partitioned groups: messages appended to their queues
  uint64_t group_append_retries = 0;     // attempts not committed (or the queue full), made again
  uint64_t group_appends_dropped = 0;    // not appended by the deadline (their publishers released)
  uint64_t group_pulls = 0;              // credit grants sent to queues' leaders (pull frames)
  uint64_t group_pushed = 0;             // messages this node pushed as a queue's leader
  uint64_t group_repushed = 0;           // of which pushed again (a reset, a new consumer, a timeout)
  uint64_t group_push_duplicates = 0;    // pushed messages this node held or had acked already
  uint64_t group_assigns = 0;            // queues this node recorded itself as the consumer of
  uint64_t group_push_in_flight = 0;     // pushed by this node as leaders, their Acks not applied (now)
  uint64_t older_binary_peers = 0;       // linked nodes whose link minor is below this one's features (now)
  uint64_t group_handed_off = 0;         // queue messages given to members here
  uint64_t group_acked = 0;              // offsets removed from queues once members' sessions held them
  uint64_t group_queues_consumed = 0;    // queues this node consumes (now)
  uint64_t group_hands = 0;              // QoS 2 queue messages recorded as handed to a member session here
  uint64_t group_hands_refused = 0;      // not recorded: another consumer's member holds it, or it is gone
  uint64_t group_unhands = 0;            // handed back: the put failed (the member session went)
  uint64_t group_settles = 0;            // Settle commands committed for sessions that arrived here
  uint64_t group_settled_removed = 0;    // handed elsewhere, held by the arrived session: removed
  uint64_t group_settled_handed_back = 0;  // handed elsewhere, not held: back in the queue
  uint64_t group_hand_releases_forced = 0;  // deliveries released to their client before their Ack committed
  uint64_t bad_frames = 0;
};

class ClusterAgent final : public LinkHandler {
 public:
  // Runs `fn` on the agent's loop; callable from any thread.
  using Poster = std::function<void(std::function<void()>)>;
  ClusterAgent(ClusterAgentConfig config, io::Loop& loop, Transport& transport, core::ShardLink& shards,
               Poster post_here);
  ~ClusterAgent() override;
  ClusterAgent(const ClusterAgent&) = delete;
  ClusterAgent& operator=(const ClusterAgent&) = delete;

  // Give this to every ShardBroker::set_cluster; safe from any shard.
  core::ClusterPort& port();

  // --- membership -------------------------------------------------------------
  // Creates the node's Membership (call once, before Start of the links):
  // it is told of links up and down and gets frames 0x10-0x1F; a member it
  // reports left is gone, and with the metadata group its down verdicts
  // go to the group, whose MemberGone decides.
  Membership& EnableMembership(MembershipConfig config);
  Membership* membership() { return membership_owned_.get(); }
  // A graceful leave (estuaryd's SIGTERM): with the metadata group, this
  // node's MemberGone first (MetaGroup::Leave, within membership's leave
  // timeout), so its drain, pins and routes are cleared before it goes
  // whoever leads the group; then membership's Leave. `done` (posted) once
  // membership's leave is over (at once without EnableMembership).
  void Leave(std::function<void()> done);
  // Takeover claims name the exact owner they replace (every linked node
  // speaks link minor 3).
  bool claim_guard() const { return claim_guard_; }
  // Claims and session writes are fenced by copy (every linked node speaks
  // link minor 5; docs/partitions.md "Late writes of a copy that lost its
  // client id").
  bool copy_fence() const { return copy_fence_; }
  // The shard's copy of `client_id` is now the one made under the claim
  // whose serial is `fence` (0: an unfenced copy): its changes from here on
  // name it. Called from the shard (ClusterPort::SessionCopyReplaced), in
  // order with its session changes.
  void OnSessionCopyReplaced(const std::string& client_id, uint64_t fence);
  // The peer left or failed for good: forget its routes, release what waits
  // for it, take over its sessions. `verdict` names the decision acted on:
  // the metadata log index of its MemberGone (0: a local verdict, where no
  // metadata group decides, or a graceful leave); the takeover's retries
  // stop once a later verdict or a re-admission supersedes it.
  void DeclareGone(NodeId node, uint64_t verdict = 0);

  // --- metadata group (docs/cluster.md "Metadata group") --------------------
  // Routes go through the metadata raft group (cluster-core/meta/): each
  // loop iteration's route changes become the node's next proposal (one in
  // flight at a time), and routes the group applies for other nodes update
  // every shard's Router. Call once, after EnableMembership and before the
  // links start; `engine` holds the group's raft state and outlives the
  // agent.
  Expected<void, std::string> EnableMetadata(meta::MetaGroupConfig config, persistence::StorageEngine& engine);
  // Where this node's route changes go: the metadata group's UpdateRoutes
  // once EnableMetadata ran (until then they wait); unit tests without a
  // group give a double that calls ApplyRemoteRoutes on the other agents.
  using RouteChanges = std::vector<std::pair<meta::RouteKey, bool>>;  // (route, added)
  using RouteProposer = std::function<void(const RouteChanges&)>;
  void UseRouteProposer(RouteProposer proposer);
  // Routes of `node` added and removed (the metadata group applied them):
  // every shard's Router learns them as NodeDestination(node).
  void ApplyRemoteRoutes(NodeId node, const std::vector<meta::RouteKey>& added,
                         const std::vector<meta::RouteKey>& removed);
  meta::MetaGroup* metadata() { return meta_.get(); }
  const meta::MetaGroup* metadata() const { return meta_.get(); }

  // --- partitions and the client-id registry (docs/partitions.md) ----------
  // Partitions become raft groups on first write (cluster-core/partition/),
  // on the metadata group's RaftHost; the first state in them is the
  // client-id registry (docs/cluster.md "One client id per cluster"). Call
  // once, after EnableMetadata; `engine` outlives the agent. From then on
  // a client attach no longer goes to every peer: ClaimClientId's committed
  // claim names the one connection it replaced, and only that node is told.
  Expected<void, std::string> EnablePartitions(partition::PartitionHostConfig config,
                                               persistence::StorageEngine& engine);
  partition::PartitionHost* partitions() { return partitions_.get(); }
  const partition::PartitionHost* partitions() const { return partitions_.get(); }
  // On the agent's loop. `done` with granted once this node's claim on the
  // client id is committed (the previous owner elsewhere has been told to
  // close); not granted if it could not be committed in time (no majority
  // of the id's partition reachable). Without partitions: granted at once.
  // Sessions on partitions: a claim with `clean_start` ends the replicated
  // session; one without it, that takes the id from another node (or from
  // an earlier run of this one), reads the session from the partition
  // after the claim commits and hands it over in `session` (the shard
  // adopts it: ShardBroker::AdoptSession); not read in time: not granted.
  struct ClaimAnswer {
    bool granted = false;
    std::optional<std::vector<std::pair<std::string, std::string>>> session;
    // The other node that held the id before (0: none, or this node): the
    // session is marked as taken from it (ShardBroker::AdoptSession), so
    // the forwards that node never confirmed reach it (kForwardReplay).
    NodeId taken_from = 0;
    // Set when the shard's copy is replaced (read back, or started anew):
    // the copy fence it serves under (0: unfenced), which the shard
    // announces once its old copy is gone (ClusterPort::SessionCopyReplaced).
    std::optional<uint64_t> copy_fence;
  };
  void ClaimClientId(const std::string& client_id, bool clean_start, std::function<void(ClaimAnswer)> done);
  // The client id's session ended here for good (clean disconnect): the id
  // is free, unless another connection claimed it meanwhile.
  void ReleaseClientId(const std::string& client_id);

  // --- retained messages on partitions: the node's RetainedService ---------
  // (cluster-core/services/retained/), once partitions run; null before.
  services::RetainedService* retained() { return retained_.get(); }
  const services::RetainedService* retained() const { return retained_.get(); }

  // --- persistent sessions on partitions (docs/partitions.md) -------------
  // A shard's batch of session changes, split by the partition of each
  // change's client id; per shard and partition one write entry is in
  // flight at a time (later batches wait and go together), so one shard's
  // changes to one session apply in order. `done` runs on the shard once
  // every part has committed; a part that fails is made again (after 50 ms,
  // doubling up to 1 s) until it commits.
  void OnReplicateSessions(uint16_t shard, std::vector<core::store::SessionChange> changes,
                           std::function<void()> done);

  // --- from the shards (through port(), on the agent's loop) ---------------
  void OnRouteChanged(const core::RouteUpdate& shard_update);
  void OnForward(NodeId node, core::NodeForward forward);
  void OnForwardSafe(NodeId origin, uint64_t forward_id);
  void OnRetainedToPartition(const MessagePtr& message, uint16_t origin_shard, uint64_t safe_token);
  void OnReadRetained(uint16_t shard, const std::string& filter, core::ClusterPort::RetainedReadDone done);
  void OnAppendToGroupQueue(const MessagePtr& message, const std::string& key, uint16_t origin_shard,
                            uint64_t safe_token);
  void OnGroupQueueHandoff(uint64_t handoff, bool taken);
  void OnGroupQueueHand(uint64_t handoff, std::string client_id);
  void OnGroupSessionArrived(const std::string& client_id, const std::vector<std::string>& keys,
                             const std::vector<MessageId>& held);
  void OnGroupConsumersOn(uint16_t shard, std::vector<std::string> keys);

  // --- LinkHandler ------------------------------------------------------------
  void OnPeerUp(const PeerInfo& peer) override;
  void OnPeerDown(NodeId node) override;
  void OnFrame(NodeId from, uint8_t type, std::string_view body) override;
  void OnWritable(NodeId node) override;
  void OnRefusedBy(const std::string& address, const std::string& reason) override;
  // Frames go by type to the owner of their range (links/transport.h): the
  // membership, the raft host, the partitions, this agent's own cluster
  // and queue frames; each owner is entered as it is enabled.
  using FrameHandler = std::function<void(NodeId from, uint8_t type, std::string_view body)>;

  // --- observation --------------------------------------------------------------
  const ClusterCounters& counters() const {
    counters_.bad_frames = bad_frames_->load(std::memory_order_relaxed);
    return counters_;
  }
  size_t local_route_count() const { return local_routes_.size(); }
  size_t remote_route_count() const;
  // GET /api/cluster/routes, and the estuary_cluster_* part of /metrics.
  std::string RoutesJson() const;
  std::string MetricsText() const;

 private:
  using RouteKey = std::pair<std::string, std::string>;  // (filter, shared key)
  struct Held {
    uint8_t type = 0;
    std::string body;
    bool forward = false;  // a kForward frame (the others are control frames)
    QoS qos = QoS::kAtMostOnce;
    uint16_t origin_shard = 0;
    core::FlowRef publisher;
    int64_t since_ms = 0;
    uint64_t forward_id = 0;  // a pending forward's id (pending_forwards_), else 0
  };
  struct Peer {
    bool up = false;
    bool gone = false;         // declared gone and not back since
    bool known = false;        // seen up at least once and not gone since
    uint8_t minor = 0;         // its hello's link minor (transport.h), once linked
    bool minor_known = false;  // linked at least once and not left since
    std::deque<Held> held;
    size_t held_bytes = 0;
  };
  class Port;
  static Held Control(uint8_t type, std::string body);

  void Send(NodeId node, Held frame);
  bool TrySend(NodeId node, Held& frame);
  void Hold(Peer& peer, Held frame);
  void DrainHeld(NodeId node);
  void DropHeld(Peer& peer, bool keep_reliable_forwards);
  void Credit(const Held& frame);
  void Broadcast(uint8_t type, const std::string& body);
  // At link up: what the peer must know of this node before held frames
  // (the partitioned groups with a member here).
  void SendLinkUpState(NodeId node);
  void ScheduleFlush();
  void Flush();
  void Tick();
  void ReleaseForward(NodeId from, uint64_t forward_id);
  // Membership reports `node` suspect, down or left: frames held for it no
  // longer count against their publishers' forward windows.
  void UnchargeHeldTo(NodeId node);
  // A new link to `node`: every forward it has not confirmed is sent again,
  // in order (issue 29; docs/cluster.md "A link lost and found again").
  void ResendUnconfirmed(NodeId node);
  void SendPendingAgain(NodeId node, const PendingForwards::Entry& entry);
  // --- the takeover gap (cluster_replay.cc) ----------------------------------
  // Sends `entry` (a forward `gone` never confirmed) to every live node and
  // this one; its publisher is released once all of them confirm.
  void Replay(NodeId gone, PendingForwards::Entry entry);
  void ReplayEverythingFor(NodeId gone);
  // The forwards parked for `node`, oldest first, no longer parked.
  std::deque<PendingForwards::Entry> TakeParked(NodeId node);
  // `node` is back: forwards parked for it go to it again.
  void ResendParked(NodeId node);
  void ReleaseReplay(NodeId from, uint64_t replay_id);
  // A replay with nothing left to wait for: its publisher is released (or,
  // for a replay made for a target that went gone, its parent goes on).
  void FinishReplayIfDone(uint64_t replay_id);
  // `node`, declared gone, had not confirmed replays: they go on as replays
  // for `node`, to the nodes that take its sessions (issue 29).
  void RedirectReplaysWaitingOn(NodeId node);
  // Sends replay `replay_id` to `node` (as a forward if it is the gone node
  // itself, back). Replays are never acknowledged without a confirmation:
  // sent again on a new link and at each replay_timeout_ms.
  void SendReplayTo(NodeId node, uint64_t replay_id);
  std::set<NodeId> LiveNodesBut(NodeId gone) const;
  void OnReplay(NodeId origin, ReplayFrame frame);
  void DeliverReplay(NodeId origin, ReplayFrame frame);
  bool ReplayMayGo(NodeId gone) const;
  void ReleaseHeldReplays(NodeId gone);
  void ExpireParkedAndReplays(int64_t now);
  // This node's takeover of `gone`'s sessions: one more step started, or done.
  void TakeoverStep(NodeId gone);
  void TakeoverDone(NodeId gone);
  void DeferRouteRemoval(NodeId node, std::vector<core::RouteUpdate> removals);
  bool IsGone(NodeId node) const;
  bool PeerUnreachable(NodeId node) const;
  void TellMetadata(const Member& member);
  void DeliverForward(NodeId from, std::string_view body);
  void HandleFrames(FrameRange range, FrameHandler handler);
  void OnClusterFrame(NodeId from, uint8_t type, std::string_view body);
  void SetRetainedOnPartitions(bool on);  // what the port tells the shards
  void SetSessionsOnPartitions(bool on);
  void PumpSessionWrites(uint16_t shard, partition::PartitionId partition);
  void OnSessionWritten(uint16_t shard, partition::PartitionId partition, const partition::PartitionResult& result);
  void LoadSession(const std::string& client_id, std::function<void(ClaimAnswer)> done);
  // Deliveries left behind by a move (cluster_handoff.cc). `work` runs on
  // the client id's shard, drops the copy there and answers with its
  // deliveries (Port::SessionLeftBehind); `waiter` (may be null) runs once
  // they are safe on the session's new node (or there is none, or it was
  // given up).
  void LeaveBehind(const std::string& client_id, std::function<void()> waiter,
                   std::function<void(core::ShardBroker&)> work);
  void OnSessionLeftBehind(const std::string& client_id, std::vector<core::Delivery> deliveries);
  // Deliveries a moved session's stub matched on `shard` (the route gap of
  // a move; broker/moved_stubs.cc): handed on as the copy's were, `done`
  // run on the shard once they are safe on the new node.
  void OnMovedStubDeliveries(uint16_t shard, const std::string& client_id, std::vector<core::Delivery> deliveries,
                             std::function<void()> done);
  void StartHandOff(const std::string& client_id, std::vector<core::Delivery> deliveries,
                    std::function<void()> chunks_done = {});
  MovedStubs::Hooks MovedStubHooks();
  void SendHandOff(uint64_t id);
  void OnHandOffDone(uint64_t id, bool taken);
  void EndHandOffChunk(uint64_t id);
  void FinishBatchPart(uint64_t batch);
  // The receiving side: a hand-off from `from` (self: this node's own,
  // when the registry names this node) for a session here.
  using HandOffKey = std::pair<NodeId, uint64_t>;
  void OnSessionHandOff(NodeId from, SessionHandOffFrame frame);
  void OfferHandOff(HandOffKey key);
  void OnHandOffTaken(NodeId from, uint64_t id, bool taken);
  // Task transfer: the persistent sessions `gone` owned, in the partitions
  // this node is the first live placed replica of, claimed (only from
  // `gone`) and served here until their clients return.
  void TakeOverSessionsOf(NodeId gone, uint64_t verdict);
  void TakeOverPartition(NodeId gone, uint64_t verdict, partition::PartitionId id, uint32_t attempt);
  void TakeOverSession(const std::string& client_id, NodeId gone, uint64_t verdict, uint32_t attempt = 0);
  void ClaimTakenOver(const std::string& client_id, NodeId gone, uint64_t verdict, partition::ClientOwner expected,
                      uint32_t attempt);
  // `node` is still gone under `verdict`: no later verdict, not re-admitted
  // by the metadata group, and not reachable from here.
  bool StillGone(NodeId node, uint64_t verdict) const;
  // `copy_fence`: the claim's copy fence (0: unfenced; ClientRegistry).
  void AdoptTakenOver(const std::string& client_id, NodeId gone, uint64_t verdict, uint64_t serial,
                      uint64_t copy_fence, uint32_t attempt);
  // MemberGone / a member's first MemberUpsert applied by the metadata group.
  void OnMetaMember(NodeId node, bool present, uint64_t index);
  // A session this node recovered from its store: still this node's in the
  // registry? The answer goes to `shard` (ShardBroker::ConfirmRecovered).
  void ConfirmRecoveredSession(uint16_t shard, const std::string& client_id, uint32_t attempt);
  void CheckRecoveredSessions();
  void PostToShard(uint16_t shard, std::function<void(core::ShardBroker&)> work);
  void QueueSafe(uint16_t shard, uint64_t safe_token);
  void FlushShardItems(uint16_t shard);

  ClusterAgentConfig config_;
  io::Loop& loop_;
  Transport& transport_;
  core::ShardLink& shards_;
  std::unique_ptr<Port> port_;
  std::unique_ptr<Membership> membership_owned_;
  // Destroyed after the host whose groups use its state machines.
  std::unique_ptr<partition::PartitionHost> partitions_;  // frames 0x50-0x5F
  std::unique_ptr<meta::RaftHost> meta_host_;             // frames 0x40-0x4F
  std::unique_ptr<meta::MetaGroup> meta_;
  std::unique_ptr<services::RetainedService> retained_;  // on partitions_ and meta_: goes before them
  uint64_t boot_id_ = 0;                                   // the metadata group's, for registry owners
  uint64_t next_claim_ = 1;
  // Takeover claims name the exact owner they replace (link minor 3):
  // false while a linked node speaks less (UpdateVersionGates).
  bool claim_guard_ = true;
  // Fenced claims and writes (link minor 5): false while a linked node
  // speaks less (UpdateVersionGates).
  bool copy_fence_ = true;
  // client id -> the claim serial the shard's copy was made under (absent:
  // an unfenced copy); its changes are tagged with it (cluster_sessions.cc).
  std::map<std::string, uint64_t, std::less<>> copy_fences_;
  // MemberGone verdicts that came while this node still reached the node
  // (by node: the verdict's index), acted on once membership here says down.
  std::map<NodeId, uint64_t> unacted_verdicts_;
  std::map<std::string, uint64_t> claims_;  // client id -> this node's live claim (its connection serial)
  // Session replication (cluster_sessions.cc): per (shard, partition) the
  // batches waiting and the one write in flight; per batch its parts left.
  struct SessionQueue {
    std::deque<std::pair<uint64_t, std::vector<partition::SessionOp>>> waiting;
    std::vector<uint64_t> in_flight_batches;
    std::string in_flight;  // the encoded write, kept for retries
    uint64_t claim_mark = 0;  // next_claim_ when it was made: later claims are newer than it
    uint32_t attempt = 0;
    bool outstanding = false;      // proposed, not answered
    bool retry_scheduled = false;  // failed, to be made again
  };
  struct SessionBatch {
    uint16_t shard = 0;
    uint32_t parts_left = 0;
    std::function<void()> done;
  };
  std::map<std::pair<uint16_t, partition::PartitionId>, SessionQueue> session_queues_;
  std::map<uint64_t, SessionBatch> session_batches_;
  // Hand-offs of deliveries left behind by a move, by client id: shard
  // answers awaited, chunks not yet taken by the new node, who waits.
  struct HandOff {
    uint32_t awaiting = 0;
    std::set<uint64_t> chunks;
    std::vector<std::function<void()>> waiters;
  };
  struct HandOffChunk {
    std::string client_id;
    std::vector<core::Delivery> deliveries;
    uint32_t attempt = 0;
    bool reading = false;  // the owner's read, or the local offer, is out
    std::function<void()> waiter;  // run when the chunk ends (a stub's publishers)
  };
  std::map<std::string, HandOff> handoffs_;
  std::map<uint64_t, HandOffChunk> handoff_chunks_;
  uint64_t next_handoff_ = 1;
  // Received hand-offs being offered to their session here (by sender and
  // id): kept while a claim of this node is still reading the session.
  struct HandOffIn {
    SessionHandOffFrame frame;
    uint32_t waits = 0;
  };
  std::map<HandOffKey, HandOffIn> handoffs_in_;
  uint64_t next_session_batch_ = 1;
  mutable ClusterCounters counters_;  // bad_frames: see bad_frames_
  // --- partitioned shared groups (cluster_queues.cc) ---
  // A queue this node consumes (the assignment gives it to this node): it
  // records itself as the consumer (Assign), grants the queue's leader
  // credit (pull frames) and hands what is pushed to its members.
  struct GroupQueueConsumer {
    std::string key;  // the group's SharedKey
    partition::PartitionId partition = 0;
    uint64_t generation = 0;  // tells this entry's handoffs from those of an earlier one for the queue
    bool wanted = true;       // still assigned to this node (each tick)
    uint64_t epoch = 0;       // this node's committed Assign (0: not yet)
    bool assigning = false;   // an Assign (or the read before it) outstanding
    int64_t next_assign_ms = 0;
    NodeId target = 0;        // the leader the pulls go to (0: none sent since the last reset)
    int64_t next_pull_ms = 0;
    std::optional<partition::QueuePuller> puller;  // once assigned
    std::map<uint64_t, MessagePtr> waiting;        // pushed, not yet taken by a member
    std::set<uint64_t> offered;                    // of those, offered to the shards now
    bool retry_armed = false;                      // members all busy: offered again later
  };
  struct GroupHandoff {
    std::string queue;
    uint64_t offset = 0;
    MessagePtr message;
    uint16_t first_shard = 0;
    uint16_t tried = 0;
    uint64_t generation = 0;  // the consumer entry's that offered it
    std::string hand_client;  // a QoS 2 message handed (or being handed) to this member session
    uint16_t shard = 0;       // the shard of that session
  };
  // A handed delivery waits in its session until its Ack commits (then its
  // client may complete it and the session forget it: a settlement after
  // that could not tell it was delivered).
  struct HandRelease {
    uint16_t shard = 0;
    std::string client_id;
    MessageId id;
    int64_t force_at_ms = 0;  // released then even without the Ack (TickGroupQueues)
  };
  partition::QueueHand HandTo(const std::string& client_id, uint64_t handoff = 0) const {
    return partition::QueueHand{client_id, config_.self, incarnation_, handoff};
  }
  // Hands the handoff's offset back, then goes on as if not taken.
  void UnhandGroupHandoff(uint64_t handoff);
  void SettleGroupQueue(const std::string& queue, const std::string& client_id, const std::vector<MessageId>& held);
  void ReleaseHanded(const std::string& queue, uint64_t offset, bool forced);
  // A queue whose partition this node leads, pushed to its consumer.
  struct GroupQueuePusher {
    partition::PartitionId partition = 0;
    partition::QueuePusher pusher;
  };
  void TickGroupQueues();
  void AppendToGroupQueue(const MessagePtr& message, const std::string& key, uint32_t queue_index,
                          uint16_t origin_shard, uint64_t safe_token, int64_t deadline_ms);
  void StepGroupConsumer(const std::string& queue);
  void AssignGroupQueue(const std::string& queue);
  void PullGroupQueue(const std::string& queue);
  void OfferGroupMessages(const std::string& queue);
  void TryGroupHandoff(uint64_t handoff);
  void FlushGroupAcks(const std::string& queue);
  void AckGroupQueue(const std::string& queue, std::vector<uint64_t> offsets);
  void DropGroupConsumer(std::map<std::string, GroupQueueConsumer>::iterator consumer);
  // The leader's side (frames 0x60-0x63).
  void OnQueueFrame(NodeId from, uint8_t type, std::string_view body);
  void OnQueuePull(NodeId from, partition::QueuePullFrame pull);
  void OnQueuePush(NodeId from, partition::QueuePushFrame push);
  void OnQueueReject(NodeId from, const partition::QueueRejectFrame& reject);
  void OnQueueApplied(std::string_view queue, std::optional<uint64_t> appended, const std::vector<uint64_t>* acked,
                      const std::vector<uint64_t>* released);
  void PumpGroupQueue(const std::string& queue);
  void PumpDueGroupQueues();
  void TickGroupPushers();
  void ResetGroupQueueLinks(NodeId node, bool gone);
  // Delivery records keep their group's key, and queues are handed, only
  // while every node this one has linked with (and that has not left)
  // reads them; the state is the port's (the shards read it).
  void UpdateVersionGates();
  bool SendQueueFrame(NodeId node, uint8_t type, std::string body);
  std::map<std::string, GroupQueueConsumer> group_consumers_;  // by queue name
  std::map<std::string, GroupQueuePusher, std::less<>> group_pushers_;  // by queue name
  std::set<std::string> group_pumps_due_;  // pushers with something new to read
  bool group_pump_posted_ = false;
  std::vector<std::set<std::string>> group_ready_local_;       // by shard: keys with a connected member
  std::set<std::string> group_ready_announced_;                // their union, as last sent to the peers
  std::map<NodeId, std::set<std::string>> group_ready_remote_;  // what each peer last sent
  std::map<uint64_t, GroupHandoff> group_handoffs_;
  std::map<std::pair<std::string, uint64_t>, HandRelease> group_hand_releases_;  // by (queue, offset)
  uint64_t incarnation_ = 0;
  std::map<std::string, uint32_t> group_turns_;  // round robin over a group's queues, by key
  uint64_t next_group_handoff_ = 1;
  uint64_t next_group_generation_ = 1;
  uint16_t next_handoff_shard_ = 0;
  std::map<RouteKey, uint32_t> local_routes_;  // node-level route -> shards holding it
  RouteChanges pending_routes_;
  RouteProposer route_proposer_;  // null: changes wait in pending_routes_
  std::map<NodeId, std::set<RouteKey>> remote_routes_;
  std::map<NodeId, Peer> peers_;
  PendingForwards pending_forwards_;
  // The takeover gap (cluster_replay.cc). Forwards past their deadline
  // whose node is unreachable, per node, oldest first:
  std::map<NodeId, std::deque<PendingForwards::Entry>> parked_;
  struct ReplayOut {
    uint16_t shard = 0;
    uint64_t token = 0;
    std::set<NodeId> waiting;  // nodes that have not confirmed yet
    int64_t deadline_ms = 0;   // sent again to the connected ones then
    NodeId gone = 0;
    MessagePtr message;  // sent to `gone` itself if it comes back meanwhile
    bool plain = false;
    uint64_t parent = 0;    // made for a target of `parent` that went gone
    uint32_t children = 0;  // such replays not finished yet
  };
  std::map<uint64_t, ReplayOut> replays_out_;  // by replay id (kReplayIdBit set)
  uint64_t next_replay_id_ = 1;
  struct TakeoverProgress {
    bool declared = false;     // this node declared the node gone and started its takeover
    uint32_t outstanding = 0;  // listings, claims and reads not finished
    bool back = false;         // the node came back since (its sessions stay or went back to it)
    uint64_t verdict = 0;      // the declaration acted on (DeclareGone's `verdict`)
  };
  std::map<NodeId, TakeoverProgress> takeovers_;
  struct HeldReplay {
    NodeId origin = 0;
    ReplayFrame frame;
    int64_t since_ms = 0;
  };
  std::map<NodeId, std::deque<HeldReplay>> held_replays_;  // by gone node
  std::map<NodeId, std::vector<uint64_t>> pending_safe_;
  std::vector<std::vector<std::pair<core::FlowId, uint32_t>>> pending_credits_;
  ForwardDedup forward_dedup_;
  std::unique_ptr<MovedStubs> moved_stubs_;  // when the shards' stubs of moved sessions end
  // Per shard, posted as one batch at Flush (or before any other post to
  // that shard): records 'F' (from u16, length u32, a kForward body to
  // decode and deliver there) and 'S' (a safe token u64 to complete).
  std::vector<std::string> shard_items_;
  // Malformed frames, counted here and by the shards (they decode the
  // forwards); counters() copies it into counters_.bad_frames.
  std::shared_ptr<std::atomic<uint64_t>> bad_frames_ = std::make_shared<std::atomic<uint64_t>>(0);
  std::string forward_scratch_;                       // OnForward's reused frame buffer
  bool flush_scheduled_ = false;
  io::TimerId tick_timer_ = 0;
  std::array<FrameHandler, 256> frame_handlers_;  // by frame type; empty: nothing here takes it
  io::Scope scope_;  // guards callbacks that capture this (io/scope.h)
};

}  // namespace estuary::cluster
