#pragma once
// ShardBroker: the broker as one shard sees it. Owns the sessions whose
// client ids hash to this shard, the shard's Router and a replica of the
// retained messages; publishes arriving on this shard are routed here.
//
// Shards talk only through a ShardLink (batched message passing, never
// shared state): route updates and retained messages are broadcast to every
// shard, a publish is forwarded once to each shard with matching routes.
// Broadcasts are acknowledged, so a SUBSCRIBE is answered, and a retained
// PUBLISH acknowledged, only once every shard has applied the change.
//
// Durability (optional, AttachStore): the shard's persistent sessions,
// their queues and in-flight state, and the retained messages whose topic
// hashes to this shard are written to its ShardStore, and a publish's
// on_safe waits until every shard it reached has made its writes durable
// (docs/storage.md). Without a store nothing is written.
//
// Cluster (optional, set_cluster): other nodes are Destinations in the same
// Router (kNodeDestinationBase + node id); a publish is forwarded once per
// node with matching routes through the ClusterPort, and a forward received
// from a node is delivered on this node only (DeliverFromNode), never sent
// on to other nodes. The publisher's on_safe then also waits for every node
// it reached (docs/cluster.md).
//
// Everything here runs on the shard's own thread.
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/expected.h"
#include "cluster-core/broker/cluster_port.h"
#include "cluster-core/broker/flow_control.h"
#include "cluster-core/broker/limits.h"
#include "cluster-core/broker/metrics.h"
#include "cluster-core/broker/retained_store.h"
#include "cluster-core/broker/session.h"
#include "cluster-core/broker/shared_strategy.h"
#include "cluster-core/router/router.h"
#include "io/loop.h"
#include "io/scope.h"
#include "model/hlc.h"

namespace estuary::persistence {
class StorageEngine;
}

namespace estuary::core {

namespace store {
class ShardStore;
struct RecoveredShard;
struct RecoveredSession;
}  // namespace store

class ShardBroker;

// Runs work on another shard's thread, in the order posted per pair.
class ShardLink {
 public:
  virtual ~ShardLink() = default;
  virtual void Post(uint16_t shard, std::function<void(ShardBroker&)> work) = 0;
};

// How long a session taken from another node is sent the forwards that
// node never confirmed, and checks each message it is offered against the
// ones it had (ShardBroker::AdoptSession, Session::MarkTakenFrom): longer
// than a takeover, the grace for replays and their hold on the receiver.
inline constexpr int64_t kTakenFromWindowMs = 60'000;

// Which shard owns a client id's session (an AMQP durable subscription's:
// the shard of its container-id, where its connection lives).
uint16_t ShardForClientId(std::string_view client_id, uint16_t shard_count);
// Topics that describe one node ($SYS/...): never forwarded to other nodes
// nor replicated to them, so each node's $SYS shows that node.
bool IsNodeLocalTopic(std::string_view topic);
// Which shard stores a retained topic.
uint16_t ShardForTopic(std::string_view topic, uint16_t shard_count);

struct ShardConfig {
  uint16_t node_id = 1;
  uint16_t shard_id = 0;
  uint16_t shard_count = 1;
  BrokerLimits limits;
  SharedGroupConfig shared;  // shared subscriptions: strategy, redelivery delay
  // replication.ack = "leader" (--replication-ack): a QoS 1/2 publish into a
  // persistent session, or a retained one, is acknowledged once this node's
  // store has it; the partition gets it after, so a node lost in between
  // loses it for its sessions and the topic (docs/partitions.md). false:
  // once both have it.
  bool replication_ack_leader = false;
};

class ShardBroker {
 public:
  ShardBroker(ShardConfig config, io::Loop& loop, ShardLink& link, ShardMetrics& metrics);
  ~ShardBroker();
  ShardBroker(const ShardBroker&) = delete;
  ShardBroker& operator=(const ShardBroker&) = delete;

  // --- sessions -----------------------------------------------------------
  struct AttachResult {
    Session* session = nullptr;
    bool session_present = false;
  };
  // Attaches `sink` to the client's session, creating it, or discarding the
  // old one when clean_start. A connection already attached is detached
  // first (OnDetached(kTakenOver)); its will is handled by the caller of
  // Disconnect, which the old connection makes as it closes.
  AttachResult Attach(const std::string& client_id, bool clean_start, SessionSink* sink);
  // The connection is gone. `publish_will` is false after a normal
  // DISCONNECT. The session then lives for its expiry interval.
  void Disconnect(Session* session, SessionSink* sink, bool publish_will);
  Session* FindSession(const std::string& client_id);
  // Sessions on partitions: the client's session as its partition holds it
  // (ShardStore's keys and values, read after this node's claim on the id
  // committed), served here from now on. A copy held here is replaced
  // (it is older: the session was served elsewhere since), without telling
  // the partition; the previous connection's will is left to its node.
  // The keys are written to this node's store too. Call before Attach.
  // `taken_over` (task transfer: the node that served it is gone): the
  // session waits here for its client, its will (the connection went with
  // its node) is published after its delay and its expiry runs.
  // `taken_from` (0: none): the node that served it before; the forwards
  // that node never confirmed come to it again (DeliverReplayed).
  void AdoptSession(const std::string& client_id, const std::vector<std::pair<std::string, std::string>>& keys,
                    bool taken_over = false, uint16_t taken_from = 0);
  // The copy of `client_id` served from now on is the one its claim `fence`
  // made (adopted above, or started anew by the CONNECT): tells the cluster,
  // behind every change of the copy it replaces (ClusterPort).
  void SessionCopyReplaced(const std::string& client_id, uint64_t fence);
  // A cluster node's recovered persistent sessions may have been taken
  // over or resumed elsewhere while it was down: until the registry says
  // this node still owns each, its will is held (not published). The
  // client ids recovered and not confirmed yet (taken once).
  std::vector<std::string> TakeUnconfirmed() { return std::exchange(unconfirmed_, {}); }
  // The partition refused this node's changes to the client's session: it
  // is another node's now (taken over while this node was cut off, or
  // resumed elsewhere). The copy here goes (a connection to it is closed
  // as taken over, no will: the will is the new owner's), and its shared
  // deliveries not yet acknowledged go to other members of their groups:
  // the refused ones are in no one else's copy. (Some may be there too:
  // QoS 1's at-least-once.)
  // Returns the plain QoS 1/2 deliveries the copy held (StaleDeliveries):
  // the ones whose writes were refused are in no copy but this one, and
  // go to the new owner (ClusterAgent's hand-off, docs/partitions.md
  // "Deliveries left behind by a move").
  std::vector<Delivery> LostToAnotherNode(const std::string& client_id);
  // The session's new node handed it deliveries its previous node held
  // (AcceptHandedOff's caller: the agent, from a kSessionHandOff): offered
  // to it as if published now, each message once (a session taken from
  // another node remembers what it was offered: Session::OfferedBefore);
  // `done` once they are durable. False (and `done` not called) when no
  // session of the client id is here.
  bool AcceptHandedOff(const std::string& client_id, std::vector<Delivery> deliveries, std::function<void()> done);
  // The plain (not shared) QoS 1/2 deliveries `session` holds that still
  // carry their message: queued, and in flight unacknowledged (a QoS 2 one
  // the client received, PUBREC'd, is the client's already).
  static std::vector<Delivery> StaleDeliveries(Session& session);
  // The registry's answer: `ours`, the will waits out the rest of its
  // delay; otherwise the copy here is stale and dropped (nothing published,
  // the partition untouched). Only for the session as recovered: one its
  // client attached to since (or replaced) is left as it is.
  void ConfirmRecovered(const std::string& client_id, bool ours);
  size_t session_count() const { return sessions_.size(); }
  // Every session held here, online and offline (the admin API's sessions,
  // subscriptions and shared groups; docs/admin-api.md). Read only.
  template <typename Visit>
  void ForEachSession(Visit&& visit) const {
    for (const auto& [client_id, session] : sessions_) visit(*session);
  }
  // The route gap of a move (docs/partitions.md "Deliveries left behind by
  // a move"): a copy dropped because its session moved (LostToAnotherNode,
  // TakenOverElsewhere) stays as a stub, out of the sessions, whose plain
  // subscriptions keep matching here until the new node's routes for them
  // are seen on this node (ClusterPort::MovedStubOpened). What it matches
  // (QoS 1/2) is handed on (ClusterPort::MovedStubDeliveries), the
  // publishers' acknowledgements held until the new node has it. Ends stub
  // `stub` of the client id (0: whichever it has): its subscriptions go,
  // and its routes with them. A CONNECT or adoption of the id here ends it
  // too.
  void EndMovedStub(const std::string& client_id, uint64_t stub = 0);
  size_t moved_stub_count() const { return moved_stubs_.size(); }

  // --- publish ------------------------------------------------------------
  // Builds a message id for a message published on this shard.
  MessageId NextMessageId();
  // Routes a message. `on_safe` (may be empty) runs once the message may
  // be acknowledged to its publisher. `flow` (0 = none) is the publisher to
  // pause if the message lands in a congested subscriber's queue.
  // `on_full` (may be empty; for --queue-overflow reject) runs instead of
  // on_safe if the full queue of a session on this node (any shard), matched
  // by a plain subscription or picked for a shared group, refused the
  // message; the sessions with room have it. Full sessions on other nodes drop it unreported. With on_full
  // the acknowledgement waits for the other shards the message reached.
  void Publish(MessagePtr message, std::function<void()> on_safe = {}, FlowId flow = 0,
               std::function<void()> on_full = {});

  // --- ingress flow control (flow_control.h) --------------------------------
  FlowId RegisterFlow(std::weak_ptr<PublisherFlow> flow);
  void UnregisterFlow(FlowId id);
  // A connection took a delivery from the session's queue: metrics, and
  // the release of paused publishers once the queue has drained.
  void OnDequeued(Session& session);

  // --- subscribe ----------------------------------------------------------
  // Adds or replaces one subscription.
  SubscribeOutcome Subscribe(Session* session, const std::string& filter, const SubscriptionOptions& options);
  // Queues the retained messages for a subscription Subscribe just made,
  // by its options (retain handling 1 sends them only when it was added).
  void DeliverRetained(Session* session, const std::string& filter, const SubscriptionOptions& options,
                       SubscribeOutcome outcome);
  UnsubscribeOutcome Unsubscribe(Session* session, const std::string& filter);
  // Runs `done` once every route change made so far is visible on every
  // shard (at once when nothing is pending).
  void WhenRoutesVisible(std::function<void()> done);

  // --- cross-shard (called through ShardLink) -----------------------------
  void ApplyRouteUpdate(const RouteUpdate& update);
  void ApplyRetained(const MessagePtr& message);
  // `safe_token` (0 = none): reported back to the publisher's shard once
  // the deliveries made here are durable.
  void DeliverForwarded(const MessagePtr& message, bool match_plain,
                        const std::vector<std::string>& shared_keys, FlowRef publisher,
                        uint64_t safe_token = 0);
  void PauseLocalFlow(FlowId id);
  void ResumeLocalFlow(FlowId id);
  // Credit back for forwards delivered on another shard: (flow, count).
  void OnForwardsDelivered(const std::vector<std::pair<FlowId, uint32_t>>& credits);
  void OnBroadcastApplied(uint16_t from_shard, uint64_t sequence);

  // --- cluster (called by the ClusterAgent through ShardLink) ---------------
  // Hands forwards, route changes, retained messages and attaches to the
  // node's cluster agent from now on (null: none). Set before any client.
  void set_cluster(ClusterPort* port) { cluster_ = port; }
  // A publish another node forwarded here: delivered to this node's local
  // routes (plain routes if `plain`, and the shared groups named), on this
  // shard and on the other shards of this node, never to other nodes.
  // `on_safe` runs on this shard once every delivery is enqueued, and
  // durable where a store is attached.
  void DeliverFromNode(const MessagePtr& message, bool plain, const std::vector<std::string>& shared_keys,
                       std::function<void()> on_safe);
  // A forward once meant for node `gone`, which never confirmed it, sent
  // again by its publisher's node once `gone` was declared gone
  // (docs/partitions.md, "The takeover gap"): delivered on this shard only,
  // and only to the sessions taken from `gone` (AdoptSession) whose plain
  // subscriptions match; a message such a session was offered before is
  // not offered again. (A shared group's part is sent to the group again
  // by the publisher's node.) `done` once those deliveries are durable.
  void DeliverReplayed(const MessagePtr& message, uint16_t gone, std::function<void()> done);
  // A message the agent took out of one of the partitioned group `key`'s
  // queues (docs/cluster.md "Partitioned shared groups"): given to a
  // connected member of the group on this shard with fewer than
  // kGroupQueueHandoffDepth messages queued, in turn; the queue keeps what no
  // member can take now (the backlog stays replicated, not in sessions).
  // Answers through the cluster port's GroupQueueHandoff(handoff, taken),
  // once the member's session holds the delivery durably.
  // An exactly-once delivery to a durable member is not offered at once:
  // the port is told which session (GroupQueueHand) and the agent, once the
  // queue records the hand, calls PutFromGroupQueue.
  void TakeFromGroupQueue(const MessagePtr& message, const std::string& key, uint64_t handoff);
  static constexpr size_t kGroupQueueHandoffDepth = 32;
  // The second half of a hand: the message goes into `client_id`'s session
  // if it is still here and still a member of the group (connected or not:
  // the session is durable); answered through GroupQueueHandoff, taken
  // false if it could not.
  void PutFromGroupQueue(const MessagePtr& message, const std::string& key, const std::string& client_id,
                         uint64_t handoff);
  // Its hand's Ack committed: the delivery of `id` in `client_id`'s session
  // may go to the client.
  void ReleaseHanded(const std::string& client_id, const MessageId& id);
  // The partitioned groups (their keys) with a connected member on this
  // shard: the agent consumes a group's queues only on nodes that have one.
  std::vector<std::string> PartitionedGroupsWithConnectedMembers() const;
  // Replaces every route held for `destination` (a node's snapshot; empty:
  // the node is gone).
  void ReplaceRoutesOf(Destination destination, const std::vector<std::pair<std::string, std::string>>& routes);
  // The client attached on another node: a live connection here is closed
  // as taken over (MQTT 5: 0x8E) and the session here ends (its will goes).
  // A session on partitions moves: returns its StaleDeliveries (for the
  // new owner, as LostToAnotherNode's); a session that ends here, none.
  std::vector<Delivery> TakenOverElsewhere(const std::string& client_id);

  // --- shared subscriptions (shared_redelivery.cc) ---------------------------
  // A session restored from a store or a partition: its deliveries made
  // through a shared subscription keep their stored group key (older
  // records: tagged from its subscriptions); with `disconnected_member`, a session served
  // here without its client (taken over from a gone node, or recovered on
  // a lone node) has its shared deliveries moved to another member after
  // the redelivery delay, unless its client is back by then.
  void SharedSessionRestored(Session& session, bool disconnected_member);

  // Periodic upkeep: expires retained messages (wall clock).
  void Housekeeping();

  // --- durability (durable_recovery.cc) ------------------------------------
  // Writes durable state to `engine` from now on (it must outlive the broker).
  void AttachStore(persistence::StorageEngine& engine);
  struct RecoveryCounts {
    size_t sessions = 0;
    size_t subscriptions = 0;
    size_t queued = 0;
    size_t inflight = 0;
    size_t inbound_qos2 = 0;
    size_t wills = 0;
    size_t retained = 0;
    size_t skipped = 0;
  };
  // Reads the store back (sessions, routes, queues, in-flight, retained,
  // will and expiry timers counted from the stored disconnect time). Call
  // once after AttachStore, before any client. Route and retained updates
  // reach the other shards through the ShardLink.
  Expected<RecoveryCounts, std::string> Recover();
  // Writes what is pending now (shutdown).
  void FlushStore();
  store::ShardStore* durable_store() { return store_.get(); }
  // Runs `fn` once every write made so far is durable (at once without a store).
  void AfterDurable(std::function<void()> fn);
  // `full`: a session's full queue there refused the message (Offer).
  void OnForwardSafe(uint64_t token, bool full = false);

  const ShardConfig& config() const { return config_; }
  // A configuration reload (server/reload.h): the limits every later read
  // of config().limits sees. This shard's thread only; the node decides
  // which limits may change under connected clients.
  void SetLimits(const BrokerLimits& limits) { config_.limits = limits; }
  const SessionLimits& session_limits() const { return config_.limits.session; }
  ShardMetrics& metrics() { return metrics_; }
  io::Loop& loop() { return loop_; }
  const RetainedStore& retained() const { return retained_; }
  const Router& router() const { return router_; }

 private:
  // Which routes a publish may take: all of them for a publish made here;
  // this node's only (and the named groups) for a forward from a node.
  struct RouteScope {
    bool from_node = false;
    bool plain = true;
    const std::vector<std::string>* shared_keys = nullptr;  // from_node only
  };
  // A publisher waiting for its acknowledgement: the steps left (durable
  // writes, shards, nodes, partitions), and whether a full queue refused
  // the message (on_full runs then, if set, instead of on_safe).
  struct SafeWaiter {
    uint32_t steps = 1;
    bool full = false;
    std::function<void()> on_safe;
    std::function<void()> on_full;
  };
  void Route(const MessagePtr& message, SafeWaiter safe, FlowId flow, const RouteScope& scope);
  // The shared groups a publish reaches: those picked on other shards or
  // nodes (forwarded by Route), and whether a member's full queue here
  // refused it (Offer).
  struct SharedRouting {
    std::vector<std::pair<Destination, std::string>> elsewhere;
    bool full = false;
  };
  SharedRouting DeliverShared(const MessagePtr& message, const MatchResult& match,
                                                                 const RouteScope& scope);
  // Whether `key`'s group keeps its messages in queues on partitions.
  bool IsPartitionedGroup(std::string_view key) const;
  void SendForward(Destination destination, const MessagePtr& message, bool plain,
                   std::vector<std::string> keys, FlowId flow, uint64_t safe_token);
  // `only_taken_from` (0: every session): only sessions taken from that node.
  // True if a session's full queue refused the message (Offer).
  bool DeliverLocal(const MessagePtr& message, const MatchResult& match, uint16_t only_taken_from = 0);
  // True if the member picked had a full queue that refused it (Offer).
  bool DeliverToShared(SharedGroup& group, const MessagePtr& message, const Session* exclude = nullptr);
  // Shared subscriptions (shared_redelivery.cc): a departed member's
  // deliveries to other members of their groups.
  void TagSharedDeliveries(Session& session);
  std::vector<Destination> SharedDestinations(const std::string& key, std::string_view topic, const Session* departed);
  void RedeliverShared(std::vector<Delivery> taken, const Session* departed);
  // `sent_qos2` false: a QoS 2 delivery sent to the client and not yet
  // PUBREC'd stays (Session::TakeDeliveries).
  std::vector<Delivery> TakeShared(Session& session, bool inflight, const std::string* only_key,
                                   bool keep_without_member, bool sent_qos2 = true);
  void ScheduleSharedRedelivery(Session& session);
  void RerouteSharedToShard(const MessagePtr& message, const std::string& key);
  // Queues a delivery; true if the session's full queue refused it (by its
  // overflow rule; limits.h QueueOverflow).
  bool Offer(Session& session, Delivery delivery);
  std::vector<MessagePtr> LocalRetained(const std::string& filter) const;
  // A SUBSCRIBE's retained messages being read from the partitions.
  struct RetainedRead {
    uint64_t incarnation = 0;  // the session's that subscribed (not a newer one of its client id)
    std::string filter;
    SubscriptionOptions options;
    bool answered = false;
    std::optional<std::vector<MessagePtr>> messages;
  };
  void FlushRetainedReads(const std::string& client_id);
  void OfferRetained(Session& session, const std::vector<MessagePtr>& messages, const SubscriptionOptions& options);
  void Broadcast(std::function<void(ShardBroker&)> work);
  void PauseFlow(const FlowRef& flow);
  void ChargeForward(FlowId flow);
  void CreditForward(const FlowRef& publisher);
  void FlushForwardCredits();
  void ReleasePublishers(Session& session);
  // `session_ended`: the session ends here for good (not moved to another
  // node or replaced by an adopted copy): its shared deliveries go to
  // other members of their groups.
  // `orphans`: shared deliveries already taken out of it, sent to other
  // members once it has left its groups (as its own are when it ended).
  void RemoveSession(Session* session, bool session_ended = false, std::vector<Delivery> orphans = {});
  // A session that moved to another node leaves the sessions: removed, or
  // (with plain subscriptions, on a cluster) kept as a stub (EndMovedStub).
  // `orphans` as for RemoveSession.
  void RemoveMovedSession(Session* session, std::vector<Delivery> orphans);
  // Offer to a stub: kept for the next FlushMovedStubs (QoS 1/2 only).
  void OfferToMovedStub(Session& session, Delivery delivery);
  void FlushMovedStubs();
  void DetachTakenOver(Session& session);
  bool RemoveSubscription(Session* session, const std::string& filter);
  void PublishWill(Session& session);
  // --- deferred actions on sessions (session_timers.cc) ----------------------
  // Every timer or posted action on a session is made through this: it runs
  // `action` only on the session it was armed for, unchanged since (the
  // same generation: not resumed, taken over, replaced by a clean start or
  // an adopted copy, nor ended), and not once this broker is gone; else it
  // does nothing (issue 27).
  std::function<void()> BoundToGeneration(const Session& session, std::function<void(Session&)> action);
  // Generations (Session::generation) are unique on this shard.
  uint64_t NewGeneration() { return ++last_generation_; }
  void Renew(Session& session) { session.Renew(NewGeneration()); }
  void ScheduleExpiry(Session& session, std::optional<int64_t> delay_ms = std::nullopt);
  void ScheduleWill(Session& session, int64_t delay_ms);
  void PersistRetained(const Message& message);
  uint64_t BeginSafe(SafeWaiter waiter);
  void AddSafeStep(uint64_t token);
  void RestoreSession(store::RecoveredSession& recovered, RecoveryCounts& counts, bool hold_will = false);
  // AdoptSession: the queued deliveries of a message the session holds in
  // flight, past PUBREC or completed are taken out of `recovered`; their
  // store sequences are returned (their keys are deleted once restored).
  std::vector<uint64_t> DropQueuedAlreadyDelivered(store::RecoveredSession& recovered);
  // A partitioned group's queue message into a member's session; the port
  // is told once it is durable there.
  void DeliverGroupQueueMessage(Session& session, Delivery delivery, uint64_t handoff);
  // `session` is this node's now: what queues handed it elsewhere is settled.
  void ReportGroupSessionArrived(Session& session);
  void RemoveAllSubscriptions(Session& session);
  void ApplyLocalRouteChange(const std::optional<RouteUpdate>& update);
  Destination PickSharedDestination(const std::string& key, std::string_view topic,
                                    std::vector<Destination>& destinations);

  ShardConfig config_;
  io::Loop& loop_;
  ShardLink& link_;
  ShardMetrics& metrics_;
  ClusterPort* cluster_ = nullptr;
  HybridLogicalClock hlc_;
  uint32_t next_sequence_ = 0;
  Router router_;
  RetainedStore retained_;
  std::unordered_map<std::string, std::unique_ptr<Session>> sessions_;
  struct MovedStub {
    uint64_t id = 0;
    std::unique_ptr<Session> session;
    std::vector<Delivery> pending;  // matched since the last flush
    std::vector<uint64_t> tokens;   // their publishers' safe steps
  };
  std::unordered_map<std::string, MovedStub> moved_stubs_;
  uint64_t next_moved_stub_ = 1;
  bool moved_flush_scheduled_ = false;
  // Stubs Route's DeliverLocal offered to: Route adds its safe step to each.
  std::vector<MovedStub*> stubs_offered_;
  // The stub's pending deliveries and safe steps to the agent.
  void HandOnMovedStub(const std::string& client_id, MovedStub& stub);
  // Per client id, in the order asked: answered reads wait for earlier ones.
  std::unordered_map<std::string, std::deque<std::shared_ptr<RetainedRead>>> retained_reads_;
  MatchResult match_scratch_;
  std::vector<SubscriberRef> refs_scratch_;
  std::vector<Destination> destinations_scratch_;  // Route's, lent out for one call
  std::vector<std::string> to_queues_;  // DeliverShared's partitioned groups, taken by Route at once
  std::unordered_map<std::string, uint32_t> shared_round_robin_;
  std::unordered_map<FlowId, std::weak_ptr<PublisherFlow>> flows_;
  FlowId next_flow_ = 1;
  FlowRef current_publisher_;  // the flow whose message is being delivered (id 0: none)
  struct ForwardWindow {
    uint32_t outstanding = 0;
    bool paused = false;
  };
  std::unordered_map<FlowId, ForwardWindow> forward_windows_;
  // Credits to return, per origin shard, flushed once per loop iteration.
  std::vector<std::vector<std::pair<FlowId, uint32_t>>> pending_credits_;
  bool credit_flush_scheduled_ = false;
  io::Scope scope_;  // guards callbacks that capture this (io/scope.h)
  uint64_t last_generation_ = 0;
  // Broadcast acknowledgement: the last sequence sent and acknowledged per shard.
  uint64_t broadcast_sequence_ = 0;
  std::vector<uint64_t> acknowledged_;
  std::deque<std::pair<uint64_t, std::function<void()>>> waiting_for_routes_;
  // Durability: the store, and publishes waiting for durable writes here and
  // on the shards they were forwarded to (token -> steps left, on_safe).
  std::unique_ptr<store::ShardStore> store_;
  std::vector<std::string> unconfirmed_;  // recovered, held until ConfirmRecovered
  // Per unconfirmed session: the store sequence its recovered deliveries
  // end at, and its generation then (the registry's answer acts only on it).
  struct Unconfirmed {
    uint64_t seq_end = 0;
    uint64_t generation = 0;
  };
  std::unordered_map<std::string, Unconfirmed> recovered_seq_end_;
  std::unordered_map<uint64_t, SafeWaiter> safe_waiters_;
  uint64_t next_safe_token_ = 1;
};

}  // namespace estuary::core
