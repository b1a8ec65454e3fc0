#include "cluster-core/ring/ring.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "base/check.h"
#include "base/hash.h"

namespace estuary::ring {
namespace {

constexpr Ring::NodeIndex kUnassigned = std::numeric_limits<Ring::NodeIndex>::max();

// Where partition p starts its walk round the circle. Salted so that
// partition points and virtual-node points never share a formula.
std::uint64_t PartitionPoint(std::uint32_t partition) {
  return base::Mix64(0x9e3779b97f4a7c15ULL ^ (std::uint64_t{partition} << 1 | 1));
}

std::uint64_t VirtualNodePoint(const std::string& node, std::uint32_t replica) {
  return base::StableHash(node + "#" + std::to_string(replica));
}

// ceil((1 + epsilon) * mean), tolerant of 1.25 * 80 computing as 100.00000001.
std::uint32_t Bound(double epsilon, double mean) {
  if (epsilon < 0) return std::numeric_limits<std::uint32_t>::max();
  double bound = std::ceil((1.0 + epsilon) * mean - 1e-9);
  return static_cast<std::uint32_t>(std::max(bound, std::ceil(mean - 1e-9)));
}

}  // namespace

const char* ToString(RingErrc errc) {
  switch (errc) {
    case RingErrc::kNoNodes: return "no nodes";
    case RingErrc::kDuplicateNode: return "duplicate node id";
    case RingErrc::kBadOptions: return "partitions, replicas and virtual_nodes must be positive";
    case RingErrc::kUnplaceable: return "load bound leaves a replica with no eligible node";
  }
  return "unknown";
}

Expected<Ring, RingErrc> Ring::Build(std::vector<std::string> nodes, const RingOptions& options) {
  if (nodes.empty()) return MakeError(RingErrc::kNoNodes);
  if (options.partitions == 0 || options.replicas == 0 || options.virtual_nodes == 0) {
    return MakeError(RingErrc::kBadOptions);
  }
  // Sorting is what makes the placement independent of insertion order.
  std::sort(nodes.begin(), nodes.end());
  if (std::adjacent_find(nodes.begin(), nodes.end()) != nodes.end()) {
    return MakeError(RingErrc::kDuplicateNode);
  }
  Ring ring;
  ring.options_ = options;
  ring.nodes_ = std::move(nodes);
  const auto node_count = static_cast<std::uint32_t>(ring.nodes_.size());
  ring.replica_count_ = std::min(options.replicas, node_count);
  const double partitions = options.partitions;
  ring.capacity_ = Bound(options.epsilon, partitions * ring.replica_count_ / node_count);
  ring.leader_capacity_ = Bound(options.bound_leaders ? options.epsilon : -1.0, partitions / node_count);
  ring.BuildCircle();
  ring.assignment_.assign(std::size_t{options.partitions} * ring.replica_count_, kUnassigned);
  std::vector<std::uint32_t> loads(node_count, 0);
  for (std::uint32_t rank = 0; rank < ring.replica_count_; ++rank) {
    if (!ring.PlaceRank(rank, loads)) return MakeError(RingErrc::kUnplaceable);
  }
  return ring;
}

void Ring::BuildCircle() {
  circle_.clear();
  circle_.reserve(nodes_.size() * options_.virtual_nodes);
  for (NodeIndex node = 0; node < nodes_.size(); ++node) {
    for (std::uint32_t v = 0; v < options_.virtual_nodes; ++v) {
      circle_.push_back(Point{VirtualNodePoint(nodes_[node], v), node});
    }
  }
  // Ties (vanishingly rare) break by node index, itself fixed by the sort.
  std::sort(circle_.begin(), circle_.end(), [](const Point& a, const Point& b) {
    return a.hash != b.hash ? a.hash < b.hash : a.node < b.node;
  });
}

std::size_t Ring::FirstPointAtOrAfter(std::uint64_t hash) const {
  auto it = std::lower_bound(circle_.begin(), circle_.end(), hash,
                             [](const Point& point, std::uint64_t h) { return point.hash < h; });
  return it == circle_.end() ? 0 : static_cast<std::size_t>(it - circle_.begin());
}

// Places replica `rank` of every partition. Ranks are placed one after the
// other so that leaders (rank 0) are spread first and bounded on their own;
// each walk starts at the partition's point and takes the first node that is
// not already a replica and still under its bound.
bool Ring::PlaceRank(std::uint32_t rank, std::vector<std::uint32_t>& loads) {
  std::vector<std::uint32_t> leader_loads(nodes_.size(), 0);
  for (std::uint32_t partition = 0; partition < options_.partitions; ++partition) {
    const std::size_t start = FirstPointAtOrAfter(PartitionPoint(partition));
    NodeIndex chosen = kUnassigned;
    for (std::size_t step = 0; step < circle_.size() && chosen == kUnassigned; ++step) {
      const NodeIndex node = circle_[(start + step) % circle_.size()].node;
      bool eligible = loads[node] < capacity_ && (rank != 0 || leader_loads[node] < leader_capacity_);
      for (std::uint32_t earlier = 0; eligible && earlier < rank; ++earlier) {
        eligible = At(partition, earlier) != node;
      }
      if (eligible) chosen = node;
    }
    if (chosen == kUnassigned) return false;
    assignment_[partition * replica_count_ + rank] = chosen;
    ++loads[chosen];
    ++leader_loads[chosen];
  }
  return true;
}

std::uint32_t Ring::PartitionOf(std::string_view key, std::uint32_t partitions) {
  ESTUARY_CHECK(partitions > 0);
  return static_cast<std::uint32_t>(base::StableHash(key) % partitions);
}

std::vector<std::string> Ring::Replicas(std::uint32_t partition) const {
  ESTUARY_CHECK(partition < options_.partitions);
  std::vector<std::string> replicas;
  replicas.reserve(replica_count_);
  for (std::uint32_t rank = 0; rank < replica_count_; ++rank) {
    replicas.push_back(nodes_[At(partition, rank)]);
  }
  return replicas;
}

const std::string& Ring::Leader(std::uint32_t partition) const {
  ESTUARY_CHECK(partition < options_.partitions);
  return nodes_[At(partition, 0)];
}

std::vector<std::uint32_t> Ring::Loads() const {
  std::vector<std::uint32_t> loads(nodes_.size(), 0);
  for (NodeIndex node : assignment_) ++loads[node];
  return loads;
}

std::vector<std::uint32_t> Ring::LeaderLoads() const {
  std::vector<std::uint32_t> loads(nodes_.size(), 0);
  for (std::uint32_t partition = 0; partition < options_.partitions; ++partition) {
    ++loads[At(partition, 0)];
  }
  return loads;
}

namespace {

std::vector<std::string> Missing(const std::vector<std::string>& from,
                                 const std::vector<std::string>& in) {
  std::vector<std::string> missing;
  for (const std::string& node : from) {
    if (std::find(in.begin(), in.end(), node) == in.end()) missing.push_back(node);
  }
  return missing;
}

}  // namespace

RingDiff Diff(const Ring& from, const Ring& to) {
  ESTUARY_CHECK(from.Options().partitions == to.Options().partitions);
  RingDiff diff;
  for (std::uint32_t partition = 0; partition < from.Options().partitions; ++partition) {
    const std::vector<std::string> before = from.Replicas(partition);
    const std::vector<std::string> after = to.Replicas(partition);
    const std::vector<std::string> dropped = Missing(before, after);
    const std::vector<std::string> gained = Missing(after, before);
    for (std::size_t i = 0; i < std::max(dropped.size(), gained.size()); ++i) {
      Move move{partition, i < dropped.size() ? dropped[i] : "", i < gained.size() ? gained[i] : ""};
      if (!move.to.empty()) ++diff.replicas_copied;
      diff.moves.push_back(std::move(move));
    }
    if (before.front() != after.front()) ++diff.leaders_changed;
  }
  return diff;
}

}  // namespace estuary::ring
