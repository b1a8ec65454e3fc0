#include "cluster-core/sim/sim_cluster.h"

#include <algorithm>
#include <sstream>

namespace estuary::sim {

namespace {

uint64_t Mix(uint64_t hash, uint64_t value) {
  hash ^= value + 0x9E3779B97F4A7C15ULL + (hash << 6) + (hash >> 2);
  return hash * 0xBF58476D1CE4E5B9ULL;
}

uint64_t HashEntry(uint64_t state, const raft::Entry& entry) {
  uint64_t hash = Mix(state, entry.index);
  hash = Mix(hash, entry.term);
  for (uint8_t byte : entry.data) hash = Mix(hash, byte);
  return hash;
}

}  // namespace

std::vector<uint8_t> EncodeValue(uint64_t value) {
  std::vector<uint8_t> data(8);
  for (int i = 0; i < 8; ++i) data[i] = static_cast<uint8_t>(value >> (8 * i));
  return data;
}

raft::WriteId WriteIdOf(uint64_t value) {
  return raft::WriteId{.producer = 1 + value % 16, .sequence = value};
}

uint64_t DecodeValue(const std::vector<uint8_t>& data) {
  if (data.size() != 8) return 0;
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= uint64_t{data[i]} << (8 * i);
  return value;
}

SimCluster::SimCluster(SimOptions options)
    : options_(std::move(options)), random_state_(options_.seed * 0x2545F4914F6CDD1DULL + 1) {
  options_.raft.mode = options_.mode;
  for (NodeId id = 1; id <= options_.voters; ++id) committed_config_.voters.push_back(id);
  for (NodeId id = 1; id <= options_.voters + options_.spares; ++id) {
    Node& node = nodes_[id];
    node.id = id;
    const uint64_t span = 2 * uint64_t{options_.max_drift_ppm} + 1;
    node.drift_ppm = static_cast<int64_t>(NextRandom() % span) - options_.max_drift_ppm;
    node.clock_offset = 1'000'000 + NextRandom() % (options_.max_clock_offset_ms + 1);
    node.engine = std::make_unique<persistence::MemoryEngine>();
    StartNode(node);
  }
}

uint64_t SimCluster::NextRandom() {
  uint64_t z = (random_state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t SimCluster::LocalNow(NodeId id) const {
  const Node& node = nodes_.at(id);
  const auto scaled = static_cast<int64_t>(now_) * (1'000'000 + node.drift_ppm) / 1'000'000;
  return node.clock_offset + static_cast<uint64_t>(scaled);
}

std::vector<NodeId> SimCluster::ids() const {
  std::vector<NodeId> out;
  for (const auto& [id, node] : nodes_) out.push_back(id);
  return out;
}

// Reads the node's state back through RaftStore and checks it against the
// plain model of the disk.
raft::Storage SimCluster::StorageOf(Node& node) {
  auto loaded = node.store->Load();
  raft::Storage storage{node.hard_state, node.snapshot, node.log, {}};
  if (!loaded) {
    Violation("node " + std::to_string(node.id) + ": RaftStore load failed: " +
              loaded.error().message);
  } else if (loaded->hard_state != storage.hard_state ||
             raft::EncodeSnapshot(loaded->snapshot) != raft::EncodeSnapshot(storage.snapshot) ||
             loaded->entries != storage.entries) {
    Violation("node " + std::to_string(node.id) + ": RaftStore read back other state than written");
  } else {
    storage = std::move(*loaded);
  }
  if (node.id <= options_.voters) {
    for (NodeId id = 1; id <= options_.voters; ++id) storage.bootstrap.voters.push_back(id);
  }
  return storage;
}

void SimCluster::StartNode(Node& node) {
  raft::Options raft_options = options_.raft;
  raft_options.id = node.id;
  raft_options.random_seed = options_.seed * 1000 + node.id * 31 + node.starts;
  ++node.starts;
  node.up = true;
  node.disk_queue.clear();
  node.disk_free_at = now_;
  node.pending.clear();
  node.applied = 0;
  node.state = 0;
  if (node.snapshot.index > 0) RestoreSnapshot(node, node.snapshot);
  node.store = std::make_unique<raft::RaftStore>(*node.engine, "sim");
  node.raft = std::make_unique<raft::Raft>(raft_options, StorageOf(node), LocalNow(node.id));
}

void SimCluster::Crash(NodeId id) {
  Node& node = nodes_.at(id);
  if (!node.up) return;
  node.up = false;
  ++stats_.crashes;
  ++node.epoch;  // unfinished disk writes are lost
  node.disk_queue.clear();
  node.raft.reset();
}

void SimCluster::Restart(NodeId id) {
  Node& node = nodes_.at(id);
  if (node.up) return;
  StartNode(node);
}

void SimCluster::Isolate(const std::set<NodeId>& side) {
  for (const auto& [a, node_a] : nodes_) {
    for (const auto& [b, node_b] : nodes_) {
      if (side.contains(a) != side.contains(b)) blocked_.insert({a, b});
    }
  }
}

void SimCluster::StallDisk(NodeId id, uint64_t ms) {
  Node& node = nodes_.at(id);
  node.disk_free_at = std::max(node.disk_free_at, now_ + ms);
}

void SimCluster::Cut(NodeId from, NodeId to) { blocked_.insert({from, to}); }
void SimCluster::Heal() { blocked_.clear(); }

void SimCluster::Enqueue(Node& node, raft::Ready ready) {
  if (ready.Empty()) return;
  // Held writes the node appended as new leader: answered like proposals.
  for (const raft::AcceptedWrite& write : ready.accepted) {
    for (const raft::Entry& entry : ready.entries) {
      if (entry.index != write.index) continue;
      const uint64_t value = DecodeValue(entry.data);
      node.pending[write.index] = {write.term, value};
      if (!acked_.contains(value)) in_log_time_[value] = now_;
    }
  }
  if (options_.send_before_persist) {
    auto late = std::stable_partition(
        ready.messages.begin(), ready.messages.end(),
        [](const raft::Message& message) { return raft::MaySendBeforePersist(message.type); });
    for (auto it = ready.messages.begin(); it != late; ++it) Send(*it);
    ready.messages.erase(ready.messages.begin(), late);
    ForwardHeld(node, ready);
  }
  // A Ready with nothing to write completes as soon as those before it.
  const bool writes = ready.hard_state || ready.snapshot || !ready.entries.empty();
  node.disk_queue.push_back(std::move(ready));
  uint64_t delay = 0;
  if (writes) {
    delay = NextRandom() % (options_.max_disk_delay_ms + 1);
    if (NextRandom() % 1000 < options_.slow_disk_per_mille) {
      delay += NextRandom() % (options_.slow_disk_ms + 1);
    }
  }
  node.disk_free_at = std::max(node.disk_free_at, now_ + delay);
  events_.push(Event{.time = node.disk_free_at, .seq = seq_++, .kind = Event::Kind::kDiskDone,
                     .node = node.id, .epoch = node.epoch});
}

void SimCluster::Send(const raft::Message& message) {
  ++stats_.messages_sent;
  if (message.type == raft::MessageType::kSnapshot) {
    ++stats_.snapshot_chunks_sent;
    stats_.snapshot_bytes_sent += message.chunk.size();
    stats_.largest_snapshot_chunk = std::max(stats_.largest_snapshot_chunk, message.chunk.size());
  }
  if (blocked_.contains({message.from, message.to}) ||
      NextRandom() % 1000 < options_.drop_per_mille) {
    ++stats_.messages_dropped;
    return;
  }
  const int copies = NextRandom() % 1000 < options_.duplicate_per_mille ? 2 : 1;
  for (int i = 0; i < copies; ++i) {
    const uint64_t span = options_.max_delay_ms - options_.min_delay_ms + 1;
    events_.push(Event{.time = now_ + options_.min_delay_ms + NextRandom() % span,
                       .seq = seq_++, .kind = Event::Kind::kDeliver, .node = message.to,
                       .message = message});
  }
}

void SimCluster::RunFor(uint64_t ms) {
  const uint64_t end = now_ + ms;
  while (ok()) {
    const uint64_t next_event = events_.empty() ? UINT64_MAX : events_.top().time;
    const uint64_t next = std::min(next_event, next_tick_);
    if (next > end) break;
    now_ = std::max(now_, next);
    if (next == next_tick_ && next_tick_ <= next_event) {
      next_tick_ += options_.tick_ms;
      TickAll();
    } else {
      Event event = events_.top();
      events_.pop();
      Process(event);
    }
    CheckStep();
  }
  now_ = std::max(now_, end);
}

void SimCluster::TickAll() {
  for (auto& [id, node] : nodes_) {
    if (node.up) Enqueue(node, node.raft->Tick(LocalNow(id)));
  }
}

void SimCluster::Process(const Event& event) {
  auto it = nodes_.find(event.node);
  if (it == nodes_.end() || !it->second.up) return;
  Node& node = it->second;
  if (event.kind == Event::Kind::kForward) {
    DeliverForward(event);
  } else if (event.kind == Event::Kind::kDeliver) {
    if (blocked_.contains({event.message.from, event.message.to})) return;
    if (message_trace_) {
      const raft::Message& m = event.message;
      std::fprintf(message_trace_,
                   "t=%llu %llu->%llu %s term %llu log %llu/%llu n=%zu commit %llu index %llu "
                   "hint %llu reject %d\n",
                   static_cast<unsigned long long>(now_), static_cast<unsigned long long>(m.from),
                   static_cast<unsigned long long>(m.to),
                   std::string(raft::MessageTypeName(m.type)).c_str(),
                   static_cast<unsigned long long>(m.term),
                   static_cast<unsigned long long>(m.log_index),
                   static_cast<unsigned long long>(m.log_term), m.entries.size(),
                   static_cast<unsigned long long>(m.commit),
                   static_cast<unsigned long long>(m.index),
                   static_cast<unsigned long long>(m.hint_term), m.reject ? 1 : 0);
    }
    Enqueue(node, node.raft->Step(event.message, LocalNow(node.id)));
  } else if (event.epoch == node.epoch) {
    CompleteDiskWrite(node);
  }
}

// The Ready contract: persist, send, apply, then Advance.
void SimCluster::CompleteDiskWrite(Node& node) {
  if (node.disk_queue.empty()) return;
  raft::Ready ready = std::move(node.disk_queue.front());
  node.disk_queue.pop_front();
  Persist(node, ready);
  for (const raft::Message& message : ready.messages) Send(message);
  if (ready.snapshot && ready.restore_snapshot) {
    ++stats_.snapshots_installed;
    RestoreSnapshot(node, *ready.snapshot);
  }
  size_t next_duplicate = 0;
  for (const raft::Entry& entry : ready.committed) {
    const bool duplicate = next_duplicate < ready.duplicates.size() &&
                           ready.duplicates[next_duplicate] == entry.index;
    if (duplicate) ++next_duplicate;
    ApplyEntry(node, entry, duplicate);
  }
  if (!options_.send_before_persist) ForwardHeld(node, ready);
  Enqueue(node, node.raft->Advance(ready));
}

void SimCluster::Persist(Node& node, const raft::Ready& ready) {
  if (auto saved = node.store->Save(ready); !saved) {
    Violation("node " + std::to_string(node.id) + ": RaftStore save failed: " +
              saved.error().message);
  }
  if (ready.hard_state) node.hard_state = *ready.hard_state;
  if (ready.snapshot) {
    const Index old_base = node.snapshot.index;
    node.snapshot = *ready.snapshot;
    if (ready.restore_snapshot) {
      node.log.clear();
    } else {
      const auto drop = std::min<size_t>(node.log.size(), node.snapshot.index - old_base);
      node.log.erase(node.log.begin(), node.log.begin() + static_cast<std::ptrdiff_t>(drop));
    }
  }
  if (ready.entries.empty()) return;
  const Index first = ready.entries.front().index;
  const Index base = node.snapshot.index;
  if (first <= base || first > base + node.log.size() + 1) {
    Violation("entries persisted out of place at node " + std::to_string(node.id) +
              " index " + std::to_string(first));
    return;
  }
  node.log.resize(first - base - 1);
  for (const raft::Entry& entry : ready.entries) {
    if (options_.mode == raft::Mode::kTimestamp && !node.log.empty() &&
        entry.timestamp <= node.log.back().timestamp) {
      Violation("timestamps not increasing at node " + std::to_string(node.id));
    }
    node.log.push_back(entry);
  }
}

void SimCluster::RestoreSnapshot(Node& node, const raft::Snapshot& snapshot) {
  node.applied = snapshot.index;
  node.state = snapshot.data.size() >= 8
                   ? DecodeValue(std::vector<uint8_t>(snapshot.data.begin(), snapshot.data.begin() + 8))
                   : 0;
  auto it = committed_.find(snapshot.index);
  if (snapshot.index > 0 && (it == committed_.end() || it->second.state != node.state)) {
    Violation("snapshot at " + std::to_string(snapshot.index) + " restored on node " +
              std::to_string(node.id) + " differs from the committed state");
  }
}

void SimCluster::ApplyEntry(Node& node, const raft::Entry& entry, bool duplicate) {
  if (entry.index != node.applied + 1) {
    Violation("node " + std::to_string(node.id) + " applied " + std::to_string(entry.index) +
              " after " + std::to_string(node.applied));
    return;
  }
  if (!duplicate) node.state = HashEntry(node.state, entry);
  node.applied = entry.index;
  Term known_by = 0;
  for (const auto& [id, other] : nodes_) {
    known_by = std::max(known_by, std::max(other.hard_state.term, other.up ? other.raft->term() : 0));
  }
  auto [it, inserted] = committed_.try_emplace(
      entry.index, Committed{entry.term, entry.data, node.state, known_by, duplicate});
  if (inserted && duplicate) ++stats_.duplicates_suppressed;
  if (inserted && entry.type == raft::EntryType::kConfig && entry.index > committed_config_index_) {
    committed_config_ = raft::DecodeConfig(entry.data);
    committed_config_index_ = entry.index;
  }
  if (!inserted && (it->second.term != entry.term || it->second.data != entry.data ||
                    it->second.state != node.state || it->second.duplicate != duplicate)) {
    Violation("state machine safety: node " + std::to_string(node.id) + " applied a different entry at " +
              std::to_string(entry.index));
  }
  auto pending = node.pending.find(entry.index);
  if (pending != node.pending.end()) {
    if (pending->second.first == entry.term && acked_.insert(pending->second.second).second) {
      ack_time_[pending->second.second] = now_;
    }
    node.pending.erase(pending);
  }
}

std::optional<uint64_t> SimCluster::Propose(NodeId id) {
  Node& node = nodes_.at(id);
  if (!node.up) return std::nullopt;
  const uint64_t value = next_value_++;
  if (!ProposeValue(node, value)) return std::nullopt;
  proposed_.insert(value);
  return value;
}

bool SimCluster::Retry(NodeId id, uint64_t value) {
  Node& node = nodes_.at(id);
  if (!node.up || !ProposeValue(node, value)) return false;
  ++stats_.retries;
  return true;
}

std::vector<uint64_t> SimCluster::Unacked() const {
  std::vector<uint64_t> out;
  for (uint64_t value : proposed_) {
    if (!acked_.contains(value)) out.push_back(value);
  }
  return out;
}

bool SimCluster::ProposeValue(Node& node, uint64_t value) {
  auto result = node.raft->Propose(EncodeValue(value), LocalNow(node.id), WriteIdOf(value));
  if (!result) return false;
  if (result->held) {
    ++stats_.writes_held;
  } else {
    node.pending[result->index] = {result->term, value};
    if (!acked_.contains(value)) in_log_time_[value] = now_;
  }
  Enqueue(node, std::move(result->ready));
  return true;
}

// The shell's half of hot switching: held writes go to the new leader over
// the network, which takes them once its lease is up (retrying briefly).
void SimCluster::ForwardHeld(Node& node, const raft::Ready& ready) {
  for (const raft::Write& write : ready.redirected) {
    const uint64_t value = DecodeValue(write.data);
    const uint64_t span = options_.max_delay_ms - options_.min_delay_ms + 1;
    const uint64_t delay =
        ready.redirect_to == node.id ? 0 : options_.min_delay_ms + NextRandom() % span;
    events_.push(Event{.time = now_ + delay, .seq = seq_++, .kind = Event::Kind::kForward,
                       .node = ready.redirect_to, .value = value});
  }
}

void SimCluster::DeliverForward(const Event& event) {
  auto it = nodes_.find(event.node);
  if (it == nodes_.end() || !it->second.up) {
    ++stats_.held_forward_failed;
    return;
  }
  // The target may not have received TimeoutNow yet, or its lease may be
  // coming up: the shell retries every tick for a while.
  if (ProposeValue(it->second, event.value)) return;
  if (event.attempts >= 20) {
    ++stats_.held_forward_failed;
    return;
  }
  Event retry = event;
  retry.time = now_ + options_.tick_ms;
  retry.seq = seq_++;
  ++retry.attempts;
  events_.push(retry);
}

Expected<raft::Proposed, raft::Errc> SimCluster::ChangeConfig(NodeId id,
                                                                    raft::ConfigChange change) {
  Node& node = nodes_.at(id);
  if (!node.up) return MakeError(raft::Errc::kNotLeader);
  auto result = node.raft->ChangeConfig(change, LocalNow(id));
  if (result) Enqueue(node, result->ready);
  return result;
}

Expected<raft::Ready, raft::Errc> SimCluster::Transfer(NodeId id, NodeId target) {
  Node& node = nodes_.at(id);
  if (!node.up) return MakeError(raft::Errc::kNotLeader);
  auto result = node.raft->TransferLeadership(target, LocalNow(id));
  if (result) Enqueue(node, *result);
  return result;
}

void SimCluster::Compact(NodeId id) {
  Node& node = nodes_.at(id);
  if (!node.up || node.applied <= node.snapshot.index) return;
  // The sim's state machine lags raft's by the disk queue; snapshot what
  // it has applied.
  std::vector<uint8_t> data = EncodeValue(node.state);
  data.resize(8 + options_.snapshot_padding_bytes, 0xAB);
  Enqueue(node, node.raft->Compact(node.applied, std::move(data)));
}

std::vector<NodeId> SimCluster::LiveLeaders() const {
  std::vector<NodeId> out;
  for (const auto& [id, node] : nodes_) {
    if (node.up && node.raft->role() == raft::Role::kLeader) out.push_back(id);
  }
  return out;
}

std::optional<NodeId> SimCluster::Leader() const {
  std::optional<NodeId> best;
  for (NodeId id : LiveLeaders()) {
    if (!best || raft(id).term() > raft(*best).term()) best = id;
  }
  return best;
}

bool SimCluster::IsCommittedValue(uint64_t value) const {
  for (const auto& [index, entry] : committed_) {
    if (DecodeValue(entry.data) == value) return true;
  }
  return false;
}

}  // namespace estuary::sim
