#pragma once
// The membership wire format (frames 0x10-0x1F, docs/membership.md) and the
// merge order of member entries. Pure: no IO, no clock.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster-core/links/transport.h"

namespace estuary::cluster {

enum class MemberState : uint8_t { kJoining, kUp, kSuspect, kDown, kLeaving, kLeft };
std::string_view ToString(MemberState state);

// Frame types carried by the Transport (0x10-0x1F are membership's).
enum class MembershipFrame : uint8_t {
  kJoin = 0x10,        // "here is my table, answer with yours"
  kWelcome = 0x11,     // the answer to kJoin
  kGossip = 0x12,      // periodic or on-change push of the whole table
  kLeave = 0x13,       // the sender is leaving (its entry, state kLeaving)
  kLeaveAck = 0x14,    // the answer to kLeave
  kProbe = 0x15,       // "do you have a link to node X?"
  kProbeReply = 0x16,  // "node X: reachable or not"
  kRefuse = 0x17,      // "you are not admitted" (node-id conflict), with a reason
  kInvite = 0x18,      // an operator asked this member to readmit the receiver
  // --bootstrap-expect (docs/cluster.md "Forming a cluster from one configuration"):
  kBootstrapAsk = 0x19,    // "do you belong to a cluster yet?"
  kBootstrapState = 0x1A,  // the answer: whether the sender's metadata group has any state
};
constexpr uint8_t kMembershipWireVersion = 1;

// One member as it travels: everything in Member but the local since_ms.
struct MemberEntry {
  NodeId node = 0;
  uint32_t epoch = 0;  // readmissions after a removal; a tombstone is final within an epoch
  uint64_t incarnation = 0;
  MemberState state = MemberState::kJoining;
  std::string cluster_address;
  std::string admin_address;
  bool removed = false;  // with kLeft: removed by an operator (a restart does not readmit it)
  bool operator==(const MemberEntry&) const = default;
};

// True when `incoming` must replace `current` (the same node): a higher
// epoch wins; within an epoch kLeft wins over everything (and a removal over
// a graceful leave); otherwise the higher incarnation, then the state later
// in the order kJoining < kUp < kSuspect < kDown < kLeaving < kLeft.
bool Supersedes(const MemberEntry& incoming, const MemberEntry& current);

// Frame bodies. Every body starts with the version byte.
struct JoinBody {
  bool rejoin = false;  // the sender was removed and asks to be readmitted
  std::vector<MemberEntry> table;
};
struct ProbeBody {
  NodeId target = 0;
  bool reachable = false;  // replies only
};

std::string EncodeTable(uint8_t flags, const std::vector<MemberEntry>& table);
std::string EncodeProbe(const ProbeBody& probe);
std::string EncodeReason(std::string_view reason);
std::string EncodeEmpty();
std::string EncodeFlag(bool flag);  // kBootstrapState

// Decoders return nullopt for a malformed body or another version.
std::optional<JoinBody> DecodeTable(std::string_view body);
std::optional<ProbeBody> DecodeProbe(std::string_view body);
std::optional<std::string> DecodeReason(std::string_view body);
bool DecodeEmpty(std::string_view body);
std::optional<bool> DecodeFlag(std::string_view body);

}  // namespace estuary::cluster
