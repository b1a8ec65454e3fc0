// SimCluster's invariant checks and its description of node states.
#include <algorithm>
#include <sstream>
#include <vector>

#include "cluster-core/sim/sim_cluster.h"

namespace estuary::sim {

std::string SimCluster::Describe() const {
  std::ostringstream out;
  for (const auto& [id, node] : nodes_) {
    out << "  node " << id;
    if (!node.up) {
      out << " down\n";
      continue;
    }
    const raft::Raft& r = *node.raft;
    out << " role " << static_cast<int>(r.role()) << " term " << r.term() << " leader "
        << r.leader() << " last " << r.log().LastIndex() << "/" << r.log().LastTerm()
        << " snap " << r.log().snapshot()->index << " commit " << r.commit() << " applied "
        << node.applied << " voters";
    for (NodeId v : r.config().voters) out << " " << v;
    out << " learners";
    for (NodeId v : r.config().learners) out << " " << v;
    out << " cfg@" << r.log().config_index() << "\n";
  }
  return out.str();
}

void SimCluster::Violation(const std::string& what) {
  std::ostringstream out;
  out << "seed " << options_.seed << " t=" << now_ << "ms: " << what;
  violations_.push_back(out.str());
}

// Cheap checks after every event.
void SimCluster::CheckStep() {
  const Index max_committed = committed_.empty() ? 0 : committed_.rbegin()->first;
  size_t leases = 0;
  for (const auto& [id, node] : nodes_) {
    if (!node.up) continue;
    const raft::Raft& r = *node.raft;
    if (r.role() == raft::Role::kLeader) {
      auto [it, inserted] = leader_of_term_.try_emplace(r.term(), id);
      if (!inserted && it->second != id) {
        Violation("two leaders in term " + std::to_string(r.term()) + ": " +
                  std::to_string(it->second) + " and " + std::to_string(id));
      }
      // Leader completeness: a leader of a term after an entry was
      // committed holds it (older, cut-off leaders need not).
      const raft::RaftLog& log = r.log();
      if (max_committed > log.snapshot()->index &&
          r.term() > committed_.at(max_committed).known_by) {
        auto term = log.TermAt(max_committed);
        if (!term || *term != committed_.at(max_committed).term) {
          Violation("leader " + std::to_string(id) + " lacks committed entry " +
                    std::to_string(max_committed));
        }
      }
    }
    if (r.HasLease(LocalNow(id))) ++leases;
  }
  if (leases > 1) Violation("two leaders hold a lease at once");
  CheckDurableQuorum();
}

// No quorum of the latest committed config lacks the newest committed entry on
// disk (crashed nodes count by what their disks hold), so no leader can be
// elected without it.
void SimCluster::CheckDurableQuorum() {
  if (committed_.empty()) return;
  const raft::Config& config = committed_config_;
  const auto& [index, entry] = *committed_.rbegin();
  size_t holders = 0;
  std::string detail;
  for (NodeId voter : config.voters) {
    const Node& node = nodes_.at(voter);
    detail += " node " + std::to_string(voter) + " disk snap " +
              std::to_string(node.snapshot.index) + " log " + std::to_string(node.log.size());
    if (node.snapshot.index >= index) {
      ++holders;
    } else if (index - node.snapshot.index <= node.log.size() &&
               node.log[index - node.snapshot.index - 1].term == entry.term) {
      ++holders;
    }
  }
  if (config.voters.size() - holders >= config.Quorum()) {
    Violation("committed entry " + std::to_string(index) + " durable on only " +
              std::to_string(holders) + " of " + std::to_string(config.voters.size()) +
              " voters:" + detail);
  }
}

void SimCluster::CheckLogs() {
  for (const auto& [id, node] : nodes_) {
    if (!node.up) continue;
    const raft::Raft& r = *node.raft;
    const raft::RaftLog& log = r.log();
    const bool leader = r.role() == raft::Role::kLeader;
    for (Index i = log.FirstIndex(); i <= log.LastIndex(); ++i) {
      auto it = committed_.find(i);
      if (it == committed_.end()) continue;
      // Committed entries never change; a leader of a later term holds them all.
      const bool must_hold = i <= r.commit() || (leader && r.term() > it->second.known_by);
      if (must_hold && (log.At(i).term != it->second.term || log.At(i).data != it->second.data)) {
        Violation("committed entry " + std::to_string(i) + " differs on node " +
                  std::to_string(id));
        return;
      }
    }
  }
  CheckLogMatching();
}

// Log matching: if two logs hold an entry with the same index and term,
// they are identical up to it.
void SimCluster::CheckLogMatching() {
  std::vector<const raft::RaftLog*> logs;
  std::vector<NodeId> owners;
  for (const auto& [id, node] : nodes_) {
    if (node.up) {
      logs.push_back(&node.raft->log());
      owners.push_back(id);
    }
  }
  for (size_t a = 0; a < logs.size(); ++a) {
    for (size_t b = a + 1; b < logs.size(); ++b) {
      const raft::RaftLog& x = *logs[a];
      const raft::RaftLog& y = *logs[b];
      const Index first = std::max(x.FirstIndex(), y.FirstIndex());
      const Index last = std::min(x.LastIndex(), y.LastIndex());
      bool matched = false;  // walking down from a matching entry
      for (Index i = last; i >= first && i > 0; --i) {
        const bool same_term = x.At(i).term == y.At(i).term;
        if (matched && (!same_term || x.At(i).data != y.At(i).data)) {
          Violation("log matching broken between nodes " + std::to_string(owners[a]) + " and " +
                    std::to_string(owners[b]) + " at " + std::to_string(i));
          return;
        }
        matched = matched || same_term;
      }
    }
  }
}

// Counts only entries that took effect: a retry the de-duplication window
// suppressed is committed but not applied.
size_t SimCluster::AppliedCount(uint64_t value) const {
  size_t count = 0;
  for (const auto& [index, entry] : committed_) {
    if (!entry.duplicate && entry.data.size() == 8 && DecodeValue(entry.data) == value) ++count;
  }
  return count;
}

SimCluster::Outcome SimCluster::CheckOutcome() const {
  std::map<uint64_t, size_t> seen;
  for (const auto& [index, entry] : committed_) {
    if (!entry.duplicate && entry.data.size() == 8) ++seen[DecodeValue(entry.data)];
  }
  Outcome outcome;
  for (uint64_t value : acked_) {
    if (seen[value] == 0) ++outcome.lost;
  }
  for (const auto& [value, count] : seen) {
    if (count > 1) ++outcome.duplicated;
  }
  return outcome;
}

void SimCluster::CheckAcked() {
  std::map<uint64_t, size_t> seen;
  for (const auto& [index, entry] : committed_) {
    if (!entry.duplicate && entry.data.size() == 8) ++seen[DecodeValue(entry.data)];
  }
  for (uint64_t value : acked_) {
    if (seen[value] != 1) {
      Violation("acknowledged value " + std::to_string(value) + " took effect " +
                std::to_string(seen[value]) + " times");
      return;
    }
  }
}

}  // namespace estuary::sim
