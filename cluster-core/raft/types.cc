#include "cluster-core/raft/types.h"

#include <algorithm>

#include "base/bytes.h"
#include "base/check.h"

namespace estuary::raft {

std::string_view ErrcName(Errc errc) {
  switch (errc) {
    case Errc::kNotLeader: return "not leader";
    case Errc::kLeaseExpired: return "lease expired";
    case Errc::kTransferInProgress: return "leadership transfer in progress";
    case Errc::kConfigChangeInProgress: return "config change in progress";
    case Errc::kInvalidConfigChange: return "invalid config change";
    case Errc::kLeaderNotReady: return "leader not ready";
    case Errc::kInvalidTransferTarget: return "invalid transfer target";
  }
  return "unknown";
}

std::string_view MessageTypeName(MessageType type) {
  switch (type) {
    case MessageType::kPreVote: return "PreVote";
    case MessageType::kPreVoteResponse: return "PreVoteResponse";
    case MessageType::kVote: return "Vote";
    case MessageType::kVoteResponse: return "VoteResponse";
    case MessageType::kAppend: return "Append";
    case MessageType::kAppendResponse: return "AppendResponse";
    case MessageType::kHeartbeat: return "Heartbeat";
    case MessageType::kHeartbeatResponse: return "HeartbeatResponse";
    case MessageType::kSnapshot: return "Snapshot";
    case MessageType::kSnapshotResponse: return "SnapshotResponse";
    case MessageType::kTimeoutNow: return "TimeoutNow";
  }
  return "unknown";
}

bool MaySendBeforePersist(MessageType type) {
  switch (type) {
    case MessageType::kPreVote:
    case MessageType::kPreVoteResponse:
    case MessageType::kVote:
    case MessageType::kAppend:
    case MessageType::kHeartbeat:
    case MessageType::kSnapshot:
    case MessageType::kTimeoutNow: return true;
    case MessageType::kVoteResponse:
    case MessageType::kAppendResponse:
    case MessageType::kHeartbeatResponse:
    case MessageType::kSnapshotResponse: return false;
  }
  return false;
}

bool Config::IsVoter(NodeId id) const {
  return std::find(voters.begin(), voters.end(), id) != voters.end();
}

bool Config::IsLearner(NodeId id) const {
  return std::find(learners.begin(), learners.end(), id) != learners.end();
}

namespace {

uint64_t GetU64(const std::vector<uint8_t>& in, size_t& pos) {
  ESTUARY_CHECK(pos + 8 <= in.size());
  const uint64_t value = base::LoadLittle<uint64_t>(in.data() + pos);
  pos += 8;
  return value;
}

void PutIds(std::vector<uint8_t>& out, const std::vector<NodeId>& ids) {
  base::AppendLittle<uint64_t>(out, ids.size());
  for (NodeId id : ids) base::AppendLittle<uint64_t>(out, id);
}

std::vector<NodeId> GetIds(const std::vector<uint8_t>& in, size_t& pos) {
  const uint64_t count = GetU64(in, pos);
  ESTUARY_CHECK(count <= (in.size() - pos) / 8);
  std::vector<NodeId> ids;
  for (uint64_t i = 0; i < count; ++i) ids.push_back(GetU64(in, pos));
  return ids;
}

}  // namespace

// Config entries are written only by raft itself, so a malformed one is a
// bug, not input: the decoder checks rather than returns an error.
std::vector<uint8_t> EncodeConfig(const Config& config) {
  std::vector<uint8_t> out;
  PutIds(out, config.voters);
  PutIds(out, config.learners);
  return out;
}

Config DecodeConfig(const std::vector<uint8_t>& bytes) {
  size_t pos = 0;
  Config config;
  config.voters = GetIds(bytes, pos);
  config.learners = GetIds(bytes, pos);
  return config;
}

}  // namespace estuary::raft
