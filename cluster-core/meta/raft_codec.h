#pragma once
// The wire form of raft::Message and of the raft host's frames (types
// 0x40-0x4F, docs/internode.md). Pure encode/decode: no IO.
//
// Every frame body starts with the u32 raft group id (little-endian), so
// one RaftHost carries many groups (the metadata group is group 0; issue
// 7's partition groups reuse the same frames). Decoders reject malformed
// bytes (unknown enum values, counts larger than the bytes left, bools
// other than 0/1, trailing bytes) instead of crashing: peers are
// authenticated, but their bytes are still outside input.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/bytes.h"
#include "cluster-core/raft/types.h"

namespace estuary::meta {

using GroupId = uint32_t;

enum RaftFrame : uint8_t {
  kRaftMessage = 0x40,   // group | raft::Message
  kRaftPropose = 0x41,   // group | request id | write id | data: a follower's proposal for the leader
  kRaftProposed = 0x42,  // group | request id | status | index | leader: the leader's answer
  kRaftQuiesce = 0x43,   // group | term | commit | leader: the leader stops ticking an idle group
  kRaftWake = 0x44,      // group | term: a follower asks the quiescent leader of term to wake
};

enum class ProposeStatus : uint8_t {
  kOk = 0,         // committed and applied at `index` on the leader
  kNotLeader = 1,  // the receiver is not the leader (or lost leadership before commit)
  kTimeout = 2,    // never sent by the wire; the local answer when no reply came in time
  kRejected = 3,   // the leader refused it (e.g. lease expired, transfer in progress)
};

struct ProposeRequest {
  GroupId group = 0;
  uint64_t request = 0;  // the follower's id for the reply; 0 = no reply wanted
  raft::WriteId write_id{};
  std::vector<uint8_t> data{};
  friend bool operator==(const ProposeRequest&, const ProposeRequest&) = default;
};

struct ProposeReply {
  GroupId group = 0;
  uint64_t request = 0;
  ProposeStatus status = ProposeStatus::kOk;
  raft::Index index = 0;
  raft::NodeId leader = raft::kNoNode;  // kNotLeader: the leader the receiver knows, if any
  friend bool operator==(const ProposeReply&, const ProposeReply&) = default;
};

// A leader's notice that the group is idle (docs/raft.md, "Quiescence"):
// a follower whose term, leader, commit and last index all match stops
// ticking the group too; any other follower ignores it.
struct QuiesceNotice {
  GroupId group = 0;
  raft::Term term = 0;
  raft::Index commit = 0;  // also the leader's last index
  raft::NodeId leader = raft::kNoNode;
  friend bool operator==(const QuiesceNotice&, const QuiesceNotice&) = default;
};

// A follower asks the leader of `term` to wake and resume heartbeats:
// when it was quiescent and a message from another node (a PreVote) woke
// it while it still sees the leader live, so its own election timer never
// fires against a healthy, silent leader; or when it ignored that
// leader's Quiesce notice, so they resynchronise at once.
struct WakeRequest {
  GroupId group = 0;
  raft::Term term = 0;
  friend bool operator==(const WakeRequest&, const WakeRequest&) = default;
};

std::string EncodeMessage(GroupId group, const raft::Message& message);
struct GroupMessage {
  GroupId group = 0;
  raft::Message message{};
};
std::optional<GroupMessage> DecodeMessage(std::string_view body);

std::string EncodeProposeRequest(const ProposeRequest& request);
std::optional<ProposeRequest> DecodeProposeRequest(std::string_view body);
std::string EncodeProposeReply(const ProposeReply& reply);
std::optional<ProposeReply> DecodeProposeReply(std::string_view body);
std::string EncodeQuiesce(const QuiesceNotice& notice);
std::optional<QuiesceNotice> DecodeQuiesce(std::string_view body);
std::string EncodeWake(const WakeRequest& request);
std::optional<WakeRequest> DecodeWake(std::string_view body);

// The byte codec shared with the metadata state's encoding: little-endian
// integers and u32-length-prefixed byte strings (base/bytes.h).
using ByteWriter = base::LittleEndianWriter;
using ByteReader = base::LittleEndianReader;

}  // namespace estuary::meta
