// Snapshots: local compaction, and InstallSnapshot for followers whose next
// entry the leader has compacted away. The data travels in chunks of at
// most max_snapshot_chunk_bytes, one at a time; the follower reports how
// many bytes it holds and the leader resumes there after a loss.
#include "base/check.h"
#include "cluster-core/raft/raft.h"

namespace estuary::raft {

Ready Raft::Compact(Index index, std::vector<uint8_t> data) {
  ESTUARY_CHECK(index <= applied_);
  if (index <= log_.snapshot()->index) return TakeReady();
  Snapshot snapshot{.index = index,
                    .term = *log_.TermAt(index),
                    .timestamp = log_.At(index).timestamp,
                    .config = log_.ConfigAt(index),
                    .dedup = {},
                    .data = std::move(data)};
  if (dedup_enabled()) {
    // The window as of `index` (dedup_ may be further along).
    DedupWindow window(options_.dedup_window_ms);
    window.Restore(log_.snapshot()->dedup);
    for (Index i = log_.FirstIndex(); i <= index; ++i) window.Apply(log_.At(i));
    snapshot.dedup = window.Records();
  }
  ready_.snapshot = snapshot;
  ready_.restore_snapshot = false;
  log_.Compact(std::move(snapshot));
  return TakeReady();
}

void Raft::SendSnapshot(NodeId peer, Progress& progress) {
  // A newer snapshot than the one under way starts over; the same one
  // resumes where the follower said it was.
  if (progress.snapshot_index != log_.snapshot()->index) {
    progress.snapshot_index = log_.snapshot()->index;
    progress.snapshot_offset = 0;
  }
  progress.state = Progress::State::kSnapshot;
  progress.inflight.clear();
  progress.probe_sent = false;
  progress.next = log_.snapshot()->index + 1;
  SendSnapshotChunk(peer, progress);
}

void Raft::SendSnapshotChunk(NodeId peer, const Progress& progress) {
  const Snapshot& snapshot = *log_.snapshot();
  auto meta = std::make_shared<Snapshot>(Snapshot{.index = snapshot.index,
                                                  .term = snapshot.term,
                                                  .timestamp = snapshot.timestamp,
                                                  .config = snapshot.config,
                                                  .dedup = snapshot.dedup,
                                                  .data = {}});
  const size_t size = snapshot.data.size();
  const size_t offset = std::min<size_t>(progress.snapshot_offset, size);
  const size_t length = std::min(options_.max_snapshot_chunk_bytes, size - offset);
  const auto first = snapshot.data.begin() + static_cast<std::ptrdiff_t>(offset);
  Send(Message{.type = MessageType::kSnapshot,
               .to = peer,
               .send_time = now_,
               .timestamp = log_.LastTimestamp(),
               .snapshot = std::move(meta),
               .offset = offset,
               .chunk = std::vector<uint8_t>(first, first + static_cast<std::ptrdiff_t>(length)),
               .done = offset + length == size});
}

void Raft::HandleSnapshot(const Message& message) {
  NoteLeaderContact(message);
  const Snapshot& meta = *message.snapshot;
  Message reply{.type = MessageType::kSnapshotResponse, .to = message.from,
                .log_index = meta.index, .send_time = message.send_time};
  if (meta.index > commit_ && log_.Matches(meta.index, meta.term)) {
    // We hold the snapshot's entries already (and may have acknowledged
    // entries after them, which must not be dropped): just commit.
    commit_ = meta.index;
    SaveHardState();
    EmitCommitted();
  } else if (meta.index > commit_) {
    const bool same = incoming_snapshot_ && incoming_snapshot_->index == meta.index &&
                      incoming_snapshot_->term == meta.term;
    if (!same && message.offset == 0) incoming_snapshot_ = meta;
    if (same || message.offset == 0) {
      std::vector<uint8_t>& data = incoming_snapshot_->data;
      if (message.offset == data.size()) {
        data.insert(data.end(), message.chunk.begin(), message.chunk.end());
        if (message.done) {
          InstallSnapshot(*incoming_snapshot_);
          incoming_snapshot_.reset();
        }
      }
      reply.offset = incoming_snapshot_ ? incoming_snapshot_->data.size() : 0;
    }
    // Otherwise (a later chunk of a snapshot we do not have): offset 0,
    // and the leader starts over.
  }
  reply.index = commit_;
  Send(std::move(reply));
}

void Raft::InstallSnapshot(const Snapshot& snapshot) {
  log_.Install(snapshot);
  commit_ = snapshot.index;
  applied_ = snapshot.index;
  ready_.snapshot = snapshot;
  ready_.restore_snapshot = true;
  ready_.entries.clear();  // superseded: the whole log was replaced
  ready_.committed.clear();
  ready_.duplicates.clear();
  dedup_.Restore(snapshot.dedup);
  MaybeLiftVoteBar();
  SaveHardState();
}

void Raft::HandleSnapshotResponse(const Message& message) {
  if (role_ != Role::kLeader || !progress_.contains(message.from)) return;
  NoteAck(message.from, message);
  Progress& progress = progress_.at(message.from);
  if (progress.state == Progress::State::kSnapshot && message.index < progress.snapshot_index &&
      message.log_index == progress.snapshot_index && progress.snapshot_index == log_.snapshot()->index) {
    // A chunk acknowledged: send the next from where the follower is.
    progress.snapshot_offset = message.offset;
    progress.acked_since_heartbeat = true;
    SendSnapshotChunk(message.from, progress);
    return;
  }
  if (message.index > progress.match) {
    progress.match = message.index;
    progress.match_at = std::max(progress.match_at, message.send_time);
  }
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
