#pragma once
// SimCluster: N raft nodes in one process on simulated time, with a
// simulated network (seeded delay, loss, duplication, reordering, one- and
// two-way partitions), simulated disks (writes complete after a delay and
// in order; a crash loses what was not yet written), per-node clocks with
// bounded drift, and invariant checks after every event. Everything is
// driven by one seed, so a run replays exactly. Single-threaded.
#include <cstdint>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <set>
#include <string>
#include <vector>

#include "cluster-core/raft/raft.h"

namespace estuary::sim {

using raft::Index;
using raft::NodeId;
using raft::Term;

struct SimOptions {
  uint64_t seed = 1;
  size_t voters = 3;  // ids 1..voters form the bootstrap config
  size_t spares = 0;  // ids after that run but start outside the config
  raft::Mode mode = raft::Mode::kPlain;
  uint64_t tick_ms = 10;
  uint64_t min_delay_ms = 1;
  uint64_t max_delay_ms = 20;
  uint32_t drop_per_mille = 0;
  uint32_t duplicate_per_mille = 0;
  uint64_t max_disk_delay_ms = 3;
  uint32_t slow_disk_per_mille = 0;  // writes that stall for up to slow_disk_ms
  uint64_t slow_disk_ms = 100;
  uint32_t max_drift_ppm = 20000;  // clock rate within +-2%
  raft::Options raft;  // id and seed are filled per node
};

class SimCluster {
 public:
  explicit SimCluster(SimOptions options);

  uint64_t now() const { return now_; }
  // Processes events up to now() + ms, checking invariants after each.
  void RunFor(uint64_t ms);
  // Runs until pred() holds or `ms` pass; returns pred().
  template <typename Pred>
  bool RunUntil(Pred pred, uint64_t ms) {
    const uint64_t deadline = now_ + ms;
    while (!pred() && now_ < deadline && ok()) RunFor(options_.tick_ms);
    return pred();
  }

  // Faults.
  void Isolate(const std::set<NodeId>& side);  // two-way: side vs the rest
  void Cut(NodeId from, NodeId to);            // one-way
  void Heal();
  // Writes issued on node `id` from now on complete no sooner than ms from now.
  void StallDisk(NodeId id, uint64_t ms);
  void Crash(NodeId id);
  void Restart(NodeId id);
  bool up(NodeId id) const { return nodes_.at(id).up; }

  // Clients. Propose returns the value proposed if the node accepted it;
  // the value is acknowledged once that node applies it at (index, term).
  std::optional<uint64_t> Propose(NodeId id);
  Expected<raft::Proposed, raft::Errc> ChangeConfig(NodeId id, raft::ConfigChange change);
  Expected<raft::Ready, raft::Errc> Transfer(NodeId id, NodeId target);
  void Compact(NodeId id);

  // The live leader with the highest term, if any.
  std::optional<NodeId> Leader() const;
  std::vector<NodeId> LiveLeaders() const;
  const raft::Raft& raft(NodeId id) const { return *nodes_.at(id).raft; }
  std::vector<NodeId> ids() const;
  Index applied(NodeId id) const { return nodes_.at(id).applied; }
  uint64_t LocalNow(NodeId id) const;

  const std::set<uint64_t>& acked() const { return acked_; }
  size_t committed_count() const { return committed_.size(); }
  bool IsCommittedValue(uint64_t value) const;
  // Full checks: every log against the committed record (and every
  // leader holding it), log matching between every pair of live logs;
  // every acknowledged value committed exactly once.
  void CheckLogs();
  void CheckAcked();
  bool ok() const { return violations_.empty(); }
  // One line per node: role, term, log, commit, applied, config.
  std::string Describe() const;
  // Logs every delivered message to `out` (nullptr stops).
  void TraceMessages(std::FILE* out) { message_trace_ = out; }
  const std::vector<std::string>& violations() const { return violations_; }

  struct Stats {
    uint64_t crashes = 0;
    uint64_t snapshots_installed = 0;  // from a leader
    uint64_t messages_sent = 0;
    uint64_t messages_dropped = 0;
    uint64_t writes_held = 0;       // timestamp mode, during transfers
    uint64_t held_forward_failed = 0;  // held writes the new leader did not take
    size_t leader_terms = 0;  // terms that had a leader
  };
  Stats stats() const {
    Stats out = stats_;
    out.leader_terms = leader_of_term_.size();
    return out;
  }

  uint64_t Random() { return NextRandom(); }
  const SimOptions& options() const { return options_; }

 private:
  struct Node {
    NodeId id = 0;
    bool up = true;
    uint64_t epoch = 0;
    uint64_t starts = 0;
    std::unique_ptr<raft::Raft> raft{};
    // Durable state, as the disk holds it.
    raft::HardState hard_state{};
    raft::Snapshot snapshot{};
    std::vector<raft::Entry> log{};  // after snapshot.index
    std::deque<raft::Ready> disk_queue{};
    uint64_t disk_free_at = 0;
    // The replicated state machine: a hash chain of applied entries.
    Index applied = 0;
    uint64_t state = 0;
    std::map<Index, std::pair<Term, uint64_t>> pending;  // proposals: index -> (term, value)
    std::deque<uint64_t> held;  // values raft holds during a transfer
    int64_t drift_ppm = 0;
    uint64_t clock_offset = 0;
  };
  struct Committed {
    Term term = 0;
    std::vector<uint8_t> data{};
    uint64_t state = 0;  // state machine hash after applying
    Term known_by = 0;   // highest term any node had when first applied
  };
  struct Event {
    uint64_t time = 0;
    uint64_t seq = 0;
    enum class Kind { kDeliver, kDiskDone, kForward } kind = Kind::kDeliver;
    NodeId node = 0;
    uint64_t epoch = 0;
    raft::Message message{};
    uint64_t value = 0;     // kForward: a held client write on its way
    uint32_t attempts = 0;  // kForward: tries so far
    bool operator>(const Event& other) const {
      return time != other.time ? time > other.time : seq > other.seq;
    }
  };

  uint64_t NextRandom();
  void StartNode(Node& node);
  raft::Storage StorageOf(const Node& node) const;
  void Enqueue(Node& node, raft::Ready ready);
  void Process(const Event& event);
  void CompleteDiskWrite(Node& node);
  void Persist(Node& node, const raft::Ready& ready);
  void Send(const raft::Message& message);
  void ApplyEntry(Node& node, const raft::Entry& entry);
  void ForwardHeld(Node& node, const raft::Ready& ready);
  void DeliverForward(const Event& event);
  bool ProposeValue(Node& node, uint64_t value);
  void RestoreSnapshot(Node& node, const raft::Snapshot& snapshot);
  void TickAll();
  void CheckStep();
  void CheckDurableQuorum();
  void CheckLogMatching();
  void Violation(const std::string& what);

  SimOptions options_;
  uint64_t random_state_;
  uint64_t now_ = 0;
  uint64_t next_tick_ = 0;
  uint64_t seq_ = 0;
  uint64_t next_value_ = 1;
  std::map<NodeId, Node> nodes_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::set<std::pair<NodeId, NodeId>> blocked_;
  std::map<Index, Committed> committed_;
  std::map<Term, NodeId> leader_of_term_;
  raft::Config committed_config_;  // from the newest committed config entry
  Index committed_config_index_ = 0;
  std::set<uint64_t> acked_;
  std::vector<std::string> violations_;
  Stats stats_;
  std::FILE* message_trace_ = nullptr;
};

// Encodes a client value as entry data and back (0 if not a client entry).
std::vector<uint8_t> EncodeValue(uint64_t value);
uint64_t DecodeValue(const std::vector<uint8_t>& data);

}  // namespace estuary::sim
