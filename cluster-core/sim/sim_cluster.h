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
#include "cluster-core/raft/raft_store.h"
#include "persistence/memory_engine.h"

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
  // Clocks start up to this far apart. De-duplication expires by entry
  // timestamps, which jump by up to this much at a leader change, so the
  // window must exceed it (docs/raft.md).
  uint64_t max_clock_offset_ms = 1'000;
  size_t snapshot_padding_bytes = 0;  // appended to each snapshot's 8 state bytes
  // Send the messages raft::MaySendBeforePersist allows at once, in
  // parallel with the disk write; false holds every message for it.
  bool send_before_persist = true;
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
  // A client retrying `value` (same write id) on node `id`; true if taken.
  bool Retry(NodeId id, uint64_t value);
  // A fresh client value, and its first submission to node `id`.
  uint64_t NewValue() {
    proposed_.insert(next_value_);
    return next_value_++;
  }
  bool Submit(NodeId id, uint64_t value) { return up(id) && ProposeValue(nodes_.at(id), value); }
  // Values proposed and not (yet) acknowledged, oldest first.
  std::vector<uint64_t> Unacked() const;
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
  // Simulated time at which `value` was first acknowledged (0: not yet).
  uint64_t AckTime(uint64_t value) const {
    auto it = ack_time_.find(value);
    return it == ack_time_.end() ? 0 : it->second;
  }
  // Simulated time at which `value` last entered a leader's log before it
  // was acknowledged: proposed and taken, or appended from a held write
  // (0: never).
  uint64_t InLogTime(uint64_t value) const {
    auto it = in_log_time_.find(value);
    return it == in_log_time_.end() ? 0 : it->second;
  }
  size_t committed_count() const { return committed_.size(); }
  bool IsCommittedValue(uint64_t value) const;
  // How many times `value` took effect (committed and not a duplicate).
  size_t AppliedCount(uint64_t value) const;
  // Acknowledged values that never took effect, and values that took
  // effect more than once.
  struct Outcome {
    size_t lost = 0;
    size_t duplicated = 0;
  };
  Outcome CheckOutcome() const;
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
    uint64_t retries = 0;              // client retries of unacknowledged writes
    uint64_t duplicates_suppressed = 0;  // committed retries not applied again
    uint64_t snapshot_chunks_sent = 0;
    uint64_t snapshot_bytes_sent = 0;    // chunk bytes, resends included
    size_t largest_snapshot_chunk = 0;
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
    // Durable state, as the disk holds it: a plain model, and the same
    // through RaftStore on a StorageEngine (restarts read the engine and
    // check it against the model).
    std::unique_ptr<persistence::MemoryEngine> engine{};
    std::unique_ptr<raft::RaftStore> store{};
    raft::HardState hard_state{};
    raft::Snapshot snapshot{};
    std::vector<raft::Entry> log{};  // after snapshot.index
    std::deque<raft::Ready> disk_queue{};
    uint64_t disk_free_at = 0;
    // The replicated state machine: a hash chain of applied entries.
    Index applied = 0;
    uint64_t state = 0;
    std::map<Index, std::pair<Term, uint64_t>> pending;  // proposals: index -> (term, value)
    int64_t drift_ppm = 0;
    uint64_t clock_offset = 0;
  };
  struct Committed {
    Term term = 0;
    std::vector<uint8_t> data{};
    uint64_t state = 0;  // state machine hash after applying
    Term known_by = 0;   // highest term any node had when first applied
    bool duplicate = false;  // a retry the de-duplication window suppressed
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
  raft::Storage StorageOf(Node& node);
  void Enqueue(Node& node, raft::Ready ready);
  void Process(const Event& event);
  void CompleteDiskWrite(Node& node);
  void Persist(Node& node, const raft::Ready& ready);
  void Send(const raft::Message& message);
  void ApplyEntry(Node& node, const raft::Entry& entry, bool duplicate);
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
  std::set<uint64_t> proposed_;
  std::map<uint64_t, uint64_t> ack_time_;
  std::map<uint64_t, uint64_t> in_log_time_;
  std::vector<std::string> violations_;
  Stats stats_;
  std::FILE* message_trace_ = nullptr;
};

// Encodes a client value as entry data and back (0 if not a client entry).
std::vector<uint8_t> EncodeValue(uint64_t value);
// The write id a client gives value `value` (16 producers, sequence = value).
raft::WriteId WriteIdOf(uint64_t value);
uint64_t DecodeValue(const std::vector<uint8_t>& data);

}  // namespace estuary::sim
