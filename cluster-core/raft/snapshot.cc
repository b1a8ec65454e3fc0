// Snapshots: local compaction, and InstallSnapshot for followers whose next
// entry the leader has compacted away. A snapshot travels whole in one
// message (no chunking yet).
#include "cluster-core/raft/check.h"
#include "cluster-core/raft/raft.h"

namespace estuary::raft {

Ready Raft::Compact(Index index, std::vector<uint8_t> data) {
  ESTUARY_RAFT_CHECK(index <= applied_);
  if (index <= log_.snapshot()->index) return TakeReady();
  Snapshot snapshot{.index = index,
                    .term = *log_.TermAt(index),
                    .timestamp = log_.At(index).timestamp,
                    .config = log_.ConfigAt(index),
                    .data = std::move(data)};
  ready_.snapshot = snapshot;
  ready_.restore_snapshot = false;
  log_.Compact(std::move(snapshot));
  return TakeReady();
}

void Raft::SendSnapshot(NodeId peer, Progress& progress) {
  progress.state = Progress::State::kSnapshot;
  progress.inflight.clear();
  progress.probe_sent = false;
  progress.next = log_.snapshot()->index + 1;
  Send(Message{.type = MessageType::kSnapshot,
               .to = peer,
               .send_time = now_,
               .timestamp = log_.LastTimestamp(),
               .snapshot = log_.snapshot()});
}

void Raft::HandleSnapshot(const Message& message) {
  NoteLeaderContact(message);
  const Snapshot& snapshot = *message.snapshot;
  if (snapshot.index > commit_ && log_.Matches(snapshot.index, snapshot.term)) {
    // We hold the snapshot's entries already (and may have acknowledged
    // entries after them, which must not be dropped): just commit.
    commit_ = snapshot.index;
    SaveHardState();
    EmitCommitted();
  } else if (snapshot.index > commit_) {
    log_.Install(snapshot);
    commit_ = snapshot.index;
    applied_ = snapshot.index;
    ready_.snapshot = snapshot;
    ready_.restore_snapshot = true;
    ready_.entries.clear();  // superseded: the whole log was replaced
    ready_.committed.clear();
    SaveHardState();
  }
  Send(Message{.type = MessageType::kSnapshotResponse, .to = message.from,
               .index = commit_, .send_time = message.send_time});
}

void Raft::HandleSnapshotResponse(const Message& message) {
  if (role_ != Role::kLeader || !progress_.contains(message.from)) return;
  NoteAck(message.from, message);
  Progress& progress = progress_.at(message.from);
  if (message.index > progress.match) progress.match = message.index;
  if (progress.state == Progress::State::kSnapshot) {
    progress.state = Progress::State::kProbe;
    progress.probe_sent = false;
    progress.next = progress.match + 1;
  }
  MaybeCommit();
  if (role_ != Role::kLeader) return;
  MaybeSendTimeoutNow();
  SendAppend(message.from);
}

}  // namespace estuary::raft
