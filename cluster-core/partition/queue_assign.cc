#include "cluster-core/partition/queue_assign.h"

#include <algorithm>
#include <cstdint>
#include <tuple>

#include "base/hash.h"

namespace estuary::partition {
namespace {

struct NodeShare {
  NodeId node = 0;
  uint64_t weight = 0;
  uint32_t quota = 0;  // queues it gets
  uint32_t held = 0;   // queues it had in the previous assignment
  uint64_t fraction = 0;  // K*weight mod total weight: how far above its floor it deserves
};

// A stable score of (queue, node): which node's queues stay when it holds
// too many, and which node with room takes a freed queue. Rendezvous
// hashing, so the choice does not depend on which other nodes exist.
uint64_t Score(std::string_view queue, NodeId node) {
  return base::Mix64(base::StableHash(queue) ^ base::Mix64(uint64_t{node} + 1));
}

std::vector<NodeShare> Shares(const std::vector<GroupNode>& nodes) {
  std::map<NodeId, uint64_t> weights;
  for (const GroupNode& node : nodes) {
    if (node.node != 0 && node.members != 0) weights[node.node] += node.members;
  }
  std::vector<NodeShare> shares;
  // Capped so that K * weight (K < 2^32) cannot overflow 64 bits.
  for (const auto& [node, weight] : weights) shares.push_back({node, std::min<uint64_t>(weight, UINT32_MAX), 0, 0, 0});
  return shares;
}

// Gives each node floor(K*w/W), then the remaining queues one each to nodes
// with a fractional share: first to nodes that already held more than their
// floor (each such pick keeps a queue in place, which is what makes the
// moves minimal), then by the larger fraction, then by a score salted with
// the group so that different groups do not all favour the same node.
void SetQuotas(std::vector<NodeShare>& shares, uint32_t count, uint64_t salt) {
  uint64_t total = 0;
  for (const NodeShare& share : shares) total += share.weight;
  uint32_t given = 0;
  std::vector<NodeShare*> eligible;
  for (NodeShare& share : shares) {
    share.quota = static_cast<uint32_t>(uint64_t{count} * share.weight / total);
    share.fraction = uint64_t{count} * share.weight % total;
    given += share.quota;
    if (share.fraction > 0) eligible.push_back(&share);
  }
  auto rank = [salt](const NodeShare* share) {
    return std::make_tuple(share->held > share->quota, share->fraction, base::Mix64(salt ^ share->node), share->node);
  };
  std::sort(eligible.begin(), eligible.end(),
            [&](const NodeShare* a, const NodeShare* b) { return rank(a) > rank(b); });
  for (size_t i = 0; given < count && i < eligible.size(); ++i, ++given) ++eligible[i]->quota;
}

}  // namespace

std::vector<std::string> GroupQueueNames(std::string_view group, uint32_t count) {
  std::vector<std::string> names;
  names.reserve(count);
  for (uint32_t k = 0; k < count; ++k) names.push_back(std::string(group) + "/" + std::to_string(k));
  return names;
}

QueueAssignment AssignQueues(const std::vector<std::string>& queues, const std::vector<GroupNode>& nodes,
                             const QueueAssignment& previous) {
  QueueAssignment next;
  for (const std::string& queue : queues) next.emplace(queue, 0);
  std::vector<NodeShare> shares = Shares(nodes);
  if (shares.empty() || next.empty()) return next;

  std::map<NodeId, NodeShare*> by_node;
  for (NodeShare& share : shares) by_node[share.node] = &share;
  // Each present node's previous queues, in order of how strongly they
  // belong to it (highest score first): those beyond its quota move.
  std::map<NodeId, std::vector<std::string_view>> holding;
  for (const auto& [queue, node] : next) {
    auto it = previous.find(queue);
    if (it == previous.end() || !by_node.contains(it->second)) continue;
    holding[it->second].push_back(queue);
    ++by_node[it->second]->held;
  }
  SetQuotas(shares, static_cast<uint32_t>(next.size()), base::StableHash(next.begin()->first));

  std::map<NodeId, uint32_t> taken;
  for (auto& [node, held] : holding) {
    std::sort(held.begin(), held.end(), [node = node](std::string_view a, std::string_view b) {
      return std::make_pair(Score(a, node), a) > std::make_pair(Score(b, node), b);
    });
    const uint32_t keep = std::min<uint32_t>(by_node[node]->quota, static_cast<uint32_t>(held.size()));
    for (uint32_t i = 0; i < keep; ++i) next.find(held[i])->second = node;
    taken[node] = keep;
  }
  // The rest, in name order, each to the node with room that scores it highest.
  for (auto& [queue, node] : next) {
    if (node != 0) continue;
    NodeShare* best = nullptr;
    for (NodeShare& share : shares) {
      if (taken[share.node] >= share.quota) continue;
      if (best == nullptr || Score(queue, share.node) > Score(queue, best->node)) best = &share;
    }
    node = best->node;  // the quotas add up to the number of queues
    ++taken[node];
  }
  return next;
}

size_t CountMoved(const QueueAssignment& previous, const QueueAssignment& next) {
  size_t moved = 0;
  for (const auto& [queue, node] : next) {
    auto it = previous.find(queue);
    if ((it == previous.end() ? NodeId{0} : it->second) != node) ++moved;
  }
  return moved;
}

std::vector<QueueAssignWrite> AssignWrites(const std::map<std::string, QueueConsumer, std::less<>>& recorded,
                                           const QueueAssignment& next) {
  std::vector<QueueAssignWrite> writes;
  for (const auto& [queue, node] : next) {
    auto it = recorded.find(queue);
    const QueueConsumer now = it == recorded.end() ? QueueConsumer{} : it->second;
    if (now.node != node) writes.push_back({queue, node, now.epoch + 1});
  }
  return writes;
}

}  // namespace estuary::partition
