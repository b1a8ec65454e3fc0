#pragma once
// Raft vocabulary: log entries, messages, durable state and the Ready batch
// a Raft returns from every input. Plain values, no behaviour; safe to copy
// between threads.
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

namespace estuary::raft {

using Term = uint64_t;
using Index = uint64_t;
using NodeId = uint64_t;
inline constexpr NodeId kNoNode = 0;

enum class Errc {
  kNotLeader,               // propose or transfer on a follower or candidate
  kLeaseExpired,            // timestamp mode: no quorum heard within the lease
  kTransferInProgress,      // a leadership transfer holds proposals
  kConfigChangeInProgress,  // an earlier config entry is not yet committed
  kInvalidConfigChange,     // e.g. adding a present voter, removing the last one
  kLeaderNotReady,          // leader has not yet committed an entry of its term
  kInvalidTransferTarget,   // transfer to a non-voter or unknown node
};
std::string_view ErrcName(Errc errc);

enum class Mode { kPlain, kTimestamp };

enum class EntryType : uint8_t { kNormal, kConfig, kNoop };

// A client write's identity for de-duplication: the same (producer,
// sequence) proposed twice is applied once (timestamp mode). Producer 0
// means "no identity": never de-duplicated.
struct WriteId {
  uint64_t producer = 0;
  uint64_t sequence = 0;
  friend bool operator==(const WriteId&, const WriteId&) = default;
};

struct Entry {
  Term term = 0;
  Index index = 0;
  uint64_t timestamp = 0;  // HLC assigned by the leader; 0 in plain mode
  EntryType type = EntryType::kNormal;
  WriteId write_id{};  // kNormal: the client's identity for the write, if any
  std::vector<uint8_t> data{};
  friend bool operator==(const Entry&, const Entry&) = default;
};

// A client write not (yet) in the log: held during a leadership transfer.
struct Write {
  std::vector<uint8_t> data{};
  WriteId id{};
};

// A held write that this node, on winning a transfer campaign, appended
// to its log itself: the caller answers it as if Propose had returned
// this index and term.
struct AcceptedWrite {
  Index index = 0;
  Term term = 0;
  WriteId id{};
};

// One write remembered by the de-duplication window: its identity and the
// timestamp of the entry that first carried it.
struct DedupRecord {
  WriteId id{};
  uint64_t timestamp = 0;
  friend bool operator==(const DedupRecord&, const DedupRecord&) = default;
};

// Cluster membership: voters form quorums; learners only receive the log.
struct Config {
  std::vector<NodeId> voters{};
  std::vector<NodeId> learners{};
  bool IsVoter(NodeId id) const;
  bool IsLearner(NodeId id) const;
  bool Contains(NodeId id) const { return IsVoter(id) || IsLearner(id); }
  size_t Quorum() const { return voters.size() / 2 + 1; }
  friend bool operator==(const Config&, const Config&) = default;
};
std::vector<uint8_t> EncodeConfig(const Config& config);
Config DecodeConfig(const std::vector<uint8_t>& bytes);

struct Snapshot {
  Index index = 0;
  Term term = 0;
  uint64_t timestamp = 0;  // of the entry at index
  Config config{};           // membership as of index
  std::vector<DedupRecord> dedup{};  // the de-duplication window as of index
  std::vector<uint8_t> data{};  // the application's state, opaque to raft
};

// Term, vote and commit: persisted before any message of the same Ready.
struct HardState {
  Term term = 0;
  NodeId vote = kNoNode;
  Index commit = 0;
  friend bool operator==(const HardState&, const HardState&) = default;
};

enum class MessageType : uint8_t {
  kPreVote, kPreVoteResponse,
  kVote, kVoteResponse,
  kAppend, kAppendResponse,
  kHeartbeat, kHeartbeatResponse,
  kSnapshot, kSnapshotResponse,
  kTimeoutNow,
};
std::string_view MessageTypeName(MessageType type);
// Requests (PreVote and Vote requests, PreVote answers, appends,
// heartbeats, snapshot chunks, TimeoutNow) promise nothing about the
// sender's disk, so the caller may send them before or while it persists
// the Ready that carries them. Answers that promise durable state (vote
// grants, append and snapshot acknowledgements, heartbeat echoes that
// extend a lease) wait for step 1 of the Ready contract.
bool MaySendBeforePersist(MessageType type);

// One flat message; which fields matter depends on type (noted per field).
struct Message {
  MessageType type = MessageType::kAppend;
  NodeId from = kNoNode;
  NodeId to = kNoNode;
  Term term = 0;  // PreVote: the term the sender would campaign in
  // Vote/PreVote: candidate's last log entry. Append: the entry before
  // `entries` (prev index/term).
  Index log_index = 0;
  Term log_term = 0;
  bool transfer = false;  // Vote: campaign started by TimeoutNow
  bool reject = false;    // responses
  std::vector<Entry> entries{};  // Append
  Index commit = 0;            // Append/Heartbeat: leader's commit for the receiver
  // AppendResponse: on success the last index now matching the leader; on
  // reject a hint: the receiver's last index <= log_index whose term is <=
  // log_term, with hint_term its term (fast backtracking).
  // SnapshotResponse: the receiver's commit after install.
  Index index = 0;
  Term hint_term = 0;
  // Leader's `now` at send, echoed in responses (lease). Vote: the
  // candidate's `now`, echoed by a transfer vote's grant (inherited lease).
  uint64_t send_time = 0;
  // Append/Heartbeat: timestamp of the leader's commit point, the newest
  // replicated timestamp (freshness, and merged into the receiver's HLC).
  uint64_t timestamp = 0;
  // Snapshot: the snapshot's metadata (its data left empty) and one chunk
  // of its data at `offset`; `done` marks the last chunk.
  // SnapshotResponse: `log_index` is the snapshot's index and `offset` how
  // many of its bytes the receiver holds (where the leader resumes).
  std::shared_ptr<const Snapshot> snapshot{};
  uint64_t offset = 0;
  std::vector<uint8_t> chunk{};
  bool done = false;
  // TimeoutNow: the client writes the old leader held, handed to the
  // target with the order to campaign (so they cannot arrive before it).
  std::vector<Write> writes{};
};

// Everything one input produced. The caller must, in this order:
//  1. persist durably `hard_state`, then `snapshot` (replacing any older
//     one; the log up to snapshot.index is dropped, and all of it when
//     `restore_snapshot`), then `entries` (which overwrite the log from
//     entries.front().index on);
//  2. send `messages` (they may promise what step 1 persisted; those for
//     which MaySendBeforePersist holds may instead go at once, in
//     parallel with step 1, which takes the disk off a request's path);
//  3. restore the state machine from `snapshot` if `restore_snapshot`,
//     then apply `committed` in order;
//  4. call Raft::Advance(ready) so the leader counts its own log.
// Readys are handled in the order they were returned.
struct Ready {
  std::optional<HardState> hard_state;
  std::optional<Snapshot> snapshot;
  bool restore_snapshot = false;  // snapshot came from the leader
  std::vector<Entry> entries;
  std::vector<Message> messages;
  std::vector<Entry> committed;
  // Timestamp mode: indexes among `committed` whose write id the
  // de-duplication window has seen: the application must not apply them
  // again (the write they retry is already applied; they are acknowledged).
  std::vector<Index> duplicates;
  // Timestamp mode: client writes held during a leadership transfer, in
  // the order they were proposed, to be submitted again to
  // `redirect_to` (the new leader or transfer target; possibly this node).
  // They are not in the log, so they may go at once, like the messages
  // MaySendBeforePersist allows.
  NodeId redirect_to = kNoNode;
  std::vector<Write> redirected;
  // Timestamp mode: held writes this new leader appended (they are among
  // `entries`); answer them once applied at (index, term), like proposals.
  std::vector<AcceptedWrite> accepted;
  bool Empty() const {
    return !hard_state && !snapshot && entries.empty() && messages.empty() &&
           committed.empty() && redirected.empty() && accepted.empty();
  }
};

}  // namespace estuary::raft
