#pragma once
// ClusterPort: how a ShardBroker reaches the node's cluster agent (the
// ClusterAgent in cluster-core/cluster/, which lives on shard 0's loop).
//
// Every call is made on the calling shard's thread; an implementation hands
// the work to the agent's loop (a mailbox post) and never runs agent code
// on the caller's thread. Forwards from one shard arrive in the order made
// (so forwards from one publisher stay in order), and so do the other calls
// among themselves; an implementation may batch forwards (ClusterAgent's
// port posts once per batch per shard, and once per batch of ForwardSafe),
// so a forward may reach the agent ahead of a non-forward call made before
// it. Nothing relies on that order: route changes and retained messages
// are independent of forwards. Without a port (single-node
// estuaryd, unit tests of one node) the broker makes no such calls.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cluster-core/broker/flow_control.h"
#include "cluster-core/router/router.h"
#include "cluster-core/store/record_codec.h"
#include "model/message.h"

namespace estuary::core {

class ShardBroker;

// One publish forwarded to another node.
struct NodeForward {
  MessagePtr message;
  bool plain = false;                    // the node has plain routes matching the topic
  std::vector<std::string> shared_keys;  // shared groups whose member was picked on that node
  uint16_t origin_shard = 0;
  uint64_t safe_token = 0;  // 0: the publisher waits for nothing; else OnForwardSafe(token) on origin_shard
  FlowRef publisher;        // credit goes back with OnForwardsDelivered once the agent took it
};

class ClusterPort {
 public:
  virtual ~ClusterPort() = default;
  // This shard's route set changed (first local subscriber to a filter, or
  // the last one gone): `update.destination` is the shard id.
  virtual void RouteChanged(const RouteUpdate& update) = 0;
  virtual void Forward(uint16_t node, NodeForward forward) = 0;
  // --- retained messages on partitions (docs/partitions.md "Retained
  // messages on partitions"); off unless the agent runs partitions.
  // Any thread.
  virtual bool RetainedOnPartitions() const { return false; }
  // A retained message published by a client (or a will) on this node:
  // written to its topic's partition; once a majority of it has the write
  // the agent calls OnForwardSafe(safe_token) on origin_shard (0: nobody
  // waits).
  virtual void RetainedToPartition(const MessagePtr& /*message*/, uint16_t /*origin_shard*/,
                                   uint64_t /*safe_token*/) {}
  // The retained messages matching `filter`, read from the partitions that
  // hold them (linearizable); `done` runs on `shard` with them, or with
  // nullopt when they could not be read in time.
  using RetainedReadDone = std::function<void(ShardBroker&, std::optional<std::vector<MessagePtr>>)>;
  virtual void ReadRetained(uint16_t /*shard*/, const std::string& /*filter*/, RetainedReadDone /*done*/) {}
  // --- persistent sessions on partitions (docs/partitions.md "Sessions on
  // partitions"); off unless the agent runs partitions. Any thread.
  virtual bool SessionsOnPartitions() const { return false; }
  // Whether stored delivery records may carry their shared group's key:
  // not while the cluster has a node of an older binary, which rejects
  // them (docs/storage.md, "Older binaries and rolling upgrades"). Any
  // thread.
  virtual bool GroupKeysInRecords() const { return true; }
  // A batch of `shard`'s session changes (ShardStore's replication), in
  // the shard's order: `done` runs on `shard` once every partition they
  // touch has committed them (or refused a client's: its session is served
  // by another node now). Retried until then.
  virtual void ReplicateSessions(uint16_t /*shard*/, std::vector<store::SessionChange> /*changes*/,
                                 std::function<void()> done) {
    done();
  }
  // `shard`'s copy of the session is now the one made under the claim whose
  // serial is `fence` (0: unfenced): its old copy is gone, and its session
  // changes from here on are the new copy's (ShardBroker::SessionCopyReplaced;
  // docs/partitions.md "Late writes of a copy that lost its client id").
  // Posted in order with ReplicateSessions.
  virtual void SessionCopyReplaced(uint16_t /*shard*/, std::string /*client_id*/, uint64_t /*fence*/) {}
  // A session that moved to another node was dropped here holding these
  // deliveries (ShardBroker::LostToAnotherNode, TakenOverElsewhere; the
  // agent asked): the agent hands them to the session's new node.
  virtual void SessionLeftBehind(std::string /*client_id*/, std::vector<Delivery> /*deliveries*/) {}
  // The route gap of a move (docs/partitions.md): such a dropped copy
  // stays on `shard` as a stub whose plain subscriptions (`filters`) keep
  // matching until the agent has seen the new node's routes for them here;
  // then the agent ends it (ShardBroker::EndMovedStub with `stub`).
  virtual void MovedStubOpened(uint16_t /*shard*/, std::string /*client_id*/, uint64_t /*stub*/,
                               std::vector<std::string> /*filters*/) {}
  // Deliveries a stub matched: handed on as SessionLeftBehind's are;
  // `done` runs on `shard` once the new node has them (or they are given
  // up); their publishers' acknowledgements wait for it.
  virtual void MovedStubDeliveries(uint16_t /*shard*/, std::string /*client_id*/, std::vector<Delivery> /*deliveries*/,
                                   std::function<void()> done) {
    done();
  }
  // The answer to a hand-off the agent asked this shard to take
  // (ShardBroker::AcceptHandedOff): `taken` once durable here, or not (no
  // such session here).
  virtual void HandOffTaken(uint16_t /*from*/, uint64_t /*handoff*/, bool /*taken*/) {}
  // Recovered sessions of `shard` (ShardBroker::TakeUnconfirmed) to check
  // with the registry; the answers come back as ConfirmRecovered on it.
  virtual void ConfirmRecovered(uint16_t /*shard*/, std::vector<std::string> /*client_ids*/) {}
  // Deliveries for a forward received from `origin` (DeliverFromNode) are
  // enqueued, and durable with a store: the agent tells the origin node.
  virtual void ForwardSafe(uint16_t origin, uint64_t forward_id) = 0;
  // --- partitioned shared groups (docs/cluster.md "Partitioned shared
  // groups"); off unless the agent runs partitions. Any thread.
  virtual bool QueuesOnPartitions() const { return false; }
  // A message for the partitioned group `key` (a SharedKey), published on
  // this node: appended to one of the group's queues; once a majority of
  // that queue's partition has it the agent calls OnForwardSafe(safe_token)
  // on origin_shard (0: nobody waits).
  virtual void AppendToGroupQueue(const MessagePtr& /*message*/, const std::string& /*key*/, uint16_t /*origin_shard*/,
                                  uint64_t /*safe_token*/) {}
  // The answer to a ShardBroker::TakeFromGroupQueue the agent asked for:
  // `handoff` names it; `taken` false: no member here could take it now,
  // true: a member's session holds it, durably.
  virtual void GroupQueueHandoff(uint64_t /*handoff*/, bool /*taken*/) {}
  // Exactly once across a consumer node's death: an exactly-once delivery
  // to a durable member is first recorded in the queue as handed to that
  // member's session (then pushed to nobody else), and put into the session
  // only after (docs/cluster.md "Partitioned shared groups"). Off while a
  // node of an older binary is in the cluster. Any thread.
  virtual bool HandsOnGroupQueues() const { return false; }
  // TakeFromGroupQueue's member is `client_id`, to be handed the message:
  // the agent records the hand, then calls PutFromGroupQueue.
  virtual void GroupQueueHand(uint64_t /*handoff*/, std::string /*client_id*/) {}
  // A durable session that is a member of these partitioned groups arrived
  // on this node (taken over, moved here, or its restart confirmed) holding
  // the shared deliveries with these ids: the agent settles with the
  // groups' queues what other consumers had handed to it.
  virtual void GroupSessionArrived(std::string /*client_id*/, std::vector<std::string> /*keys*/,
                                   std::vector<MessageId> /*held*/) {}
  // `shard`'s answer to the agent's question which partitioned groups have
  // a connected member there (ShardBroker::PartitionedGroupsWithConnectedMembers).
  virtual void GroupConsumersOn(uint16_t /*shard*/, std::vector<std::string> /*keys*/) {}
};

}  // namespace estuary::core
