#pragma once
// Placement of P partitions, R replicas each, over N nodes: consistent hashing
// with virtual nodes and bounded loads (Mirrokni, Thorup, Zadimoghaddam 2018).
//
// Contract:
// - Pure: no IO, no clock, no randomness. A Ring is an immutable value; build
//   a new one when membership changes and compare them with Diff.
// - Deterministic: the placement depends only on the set of node ids and the
//   options, never on the order the ids are given in.
// - Bounded: no node holds more than Capacity() = ceil((1 + epsilon) * mean)
//   partition replicas, mean = P * min(R, N) / N; leaders (first replicas)
//   are bounded the same way against P / N unless bound_leaders is false.
//   Build fails (kUnplaceable) rather than exceed a bound.
// - Replicas of one partition are on distinct nodes; Replicas(p)[0] is the
//   preferred leader.
// Thread safety: a const Ring may be read from any number of threads.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/expected.h"

namespace estuary::ring {

struct RingOptions {
  // P, fixed at cluster creation. 4096 with epsilon 0.1 keeps max/mean
  // <= 1.10 and a join or leave within 1.2x the ideal movement up to N = 64
  // (docs/placement.md); a partition becomes a raft group only once it
  // holds data, so a large P costs table entries, not live groups.
  std::uint32_t partitions = 4096;
  std::uint32_t replicas = 3;         // R, capped at the node count
  std::uint32_t virtual_nodes = 160;  // points per node on the hash circle
  double epsilon = 0.1;               // load bound slack; < 0 disables the bound
  bool bound_leaders = true;          // also bound first replicas by (1 + epsilon) * P / N
};

enum class RingErrc {
  kNoNodes,
  kDuplicateNode,
  kBadOptions,
  kUnplaceable,  // the bound left no eligible node (only with tiny epsilon)
};

const char* ToString(RingErrc errc);

// One replica of one partition changing node. `from` is empty when the
// partition gains a replica, `to` is empty when it loses one.
struct Move {
  std::uint32_t partition = 0;
  std::string from;
  std::string to;
  bool operator==(const Move&) const = default;
};

struct RingDiff {
  std::vector<Move> moves;           // one per replica that must be copied or dropped
  std::uint32_t replicas_copied = 0;  // moves with a non-empty `to`
  std::uint32_t leaders_changed = 0;  // partitions whose first replica differs
};

class Ring {
 public:
  using NodeIndex = std::uint32_t;

  static Expected<Ring, RingErrc> Build(std::vector<std::string> nodes,
                                        const RingOptions& options = {});

  // hash(key) mod P; keys look like `session/<client-id>`, `retained/<topic>`.
  static std::uint32_t PartitionOf(std::string_view key, std::uint32_t partitions);
  std::uint32_t PartitionOf(std::string_view key) const {
    return PartitionOf(key, options_.partitions);
  }

  // Node ids holding `partition`, preferred leader first. partition < P.
  std::vector<std::string> Replicas(std::uint32_t partition) const;
  const std::string& Leader(std::uint32_t partition) const;

  const std::vector<std::string>& Nodes() const { return nodes_; }  // sorted
  const RingOptions& Options() const { return options_; }
  std::uint32_t ReplicaCount() const { return replica_count_; }  // min(R, N)
  std::uint32_t Capacity() const { return capacity_; }
  std::uint32_t LeaderCapacity() const { return leader_capacity_; }
  // Replicas held by each node, in Nodes() order.
  std::vector<std::uint32_t> Loads() const;
  std::vector<std::uint32_t> LeaderLoads() const;

 private:
  struct Point {
    std::uint64_t hash;
    NodeIndex node;
  };

  Ring() = default;
  void BuildCircle();
  bool PlaceRank(std::uint32_t rank, std::vector<std::uint32_t>& loads);
  std::size_t FirstPointAtOrAfter(std::uint64_t hash) const;
  NodeIndex At(std::uint32_t partition, std::uint32_t rank) const {
    return assignment_[partition * replica_count_ + rank];
  }

  RingOptions options_;
  std::vector<std::string> nodes_;
  std::vector<Point> circle_;
  std::vector<NodeIndex> assignment_;  // P x replica_count_, row-major
  std::uint32_t replica_count_ = 0;
  std::uint32_t capacity_ = 0;
  std::uint32_t leader_capacity_ = 0;
};

// The replica moves that take `from` to `to` (same P). Partitions are listed in
// order; within a partition, dropped and gained replicas are paired up.
RingDiff Diff(const Ring& from, const Ring& to);

}  // namespace estuary::ring
