#pragma once
// Which consumer node gets each of a shared group's K queues (docs/
// partitions.md "Partitioned queues", assignment). Pure and deterministic:
// the same inputs give the same assignment on every node and build, in
// whatever order the inputs were listed, so nodes that read the same route
// table agree without talking to each other. Nothing here reads a clock.
//
// Properties (each tested in queue_assign_test.cc):
// - Complete: with at least one node every queue has exactly one consumer;
//   with none, every queue has consumer 0 (nobody).
// - Balanced: a node of weight w (its member count) out of a total W gets
//   floor(K*w/W) or ceil(K*w/W) queues; with equal weights floor(K/N) or
//   ceil(K/N).
// - Sticky: among all balanced assignments, the result moves the fewest
//   queues away from the previous assignment (a queue of a node that left,
//   or that had nobody, always moves).
//
// The previous assignment is an input: stickiness is only shared if every node
// passes the same previous assignment (for example the one recorded by the
// queues' Assign commands, or the group's last assignment kept with the
// route table). Wiring that is a later step.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "cluster-core/partition/partition_host.h"

namespace estuary::partition {

// queue name -> consumer node (0: nobody).
using QueueAssignment = std::map<std::string, NodeId, std::less<>>;

// A node holding members of the group; `members` is its weight. A node may
// be listed more than once (one row per member, say): the weights add up.
// Node 0 and weight 0 are ignored.
struct GroupNode {
  NodeId node = 0;
  uint32_t members = 1;
};

// The K queue names of a group: "<group>/0" ... "<group>/<K-1>" (the
// `group` string is whatever names the group and its filter).
std::vector<std::string> GroupQueueNames(std::string_view group, uint32_t count);

// The new assignment of `queues` (duplicates count once) over `nodes`,
// moving as few queues away from `previous` as balance allows. Entries of
// `previous` for other queues are ignored.
QueueAssignment AssignQueues(const std::vector<std::string>& queues, const std::vector<GroupNode>& nodes,
                             const QueueAssignment& previous);

// How many queues of `next` have another consumer in `previous` (a queue
// missing from `previous` had nobody).
size_t CountMoved(const QueueAssignment& previous, const QueueAssignment& next);

// A queue's consumer as QueueMachine records it (its Stats).
struct QueueConsumer {
  NodeId node = 0;
  uint64_t epoch = 0;
  friend bool operator==(const QueueConsumer&, const QueueConsumer&) = default;
};

// An Assign command to propose: EncodeQueueAssign(queue, node, epoch).
struct QueueAssignWrite {
  std::string queue;
  NodeId node = 0;
  uint64_t epoch = 0;
  friend bool operator==(const QueueAssignWrite&, const QueueAssignWrite&) = default;
};

// The Assigns that take the queues from `recorded` to `next`, in queue
// order: one per queue whose consumer changes, at the recorded epoch + 1
// (a queue not in `recorded` is at nobody, epoch 0). Unchanged queues keep
// their epoch and get no write. Because the machine takes an Assign only
// above its epoch and every write raises it, a write made from a recorded
// state that has since changed is refused: the epoch works as a compare-
// and-set, and two nodes computing the same change from the same state
// write the same Assign, of which one applies.
std::vector<QueueAssignWrite> AssignWrites(const std::map<std::string, QueueConsumer, std::less<>>& recorded,
                                           const QueueAssignment& next);

}  // namespace estuary::partition
