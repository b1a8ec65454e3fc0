#pragma once
// The cluster's routing and forwarding frames (types 0x20-0x3F on a
// Transport; docs/internode.md, "Cluster frames"). Pure encode and decode:
// bytes in, values out; a malformed body decodes to nullopt.
//
// Every body starts with a version byte (kClusterFrameVersion); integers
// are big-endian; a string is u16 length + bytes (u32 for a message).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster-core/broker/session.h"
#include "model/message.h"

namespace estuary::core::store {
class MessageRecycler;
}

namespace estuary::cluster {

// 0x20 and 0x21 (pairwise route snapshots and deltas) and 0x24 (retained
// messages to every peer) are retired: routes go through the metadata
// group, retained messages through their partitions. A peer of an older
// binary may still send 0x24; it is ignored (kRetiredRetained).
enum FrameType : uint8_t {
  kForward = 0x22,      // one publish to deliver on the receiver's local routes
  kForwardSafe = 0x23,  // forward ids whose deliveries are enqueued (and durable)
  kRetiredRetained = 0x24,
  // Client ids the registry gave to the sender: the receiver's connections
  // for them are taken over (cluster_registry.cc).
  kClientAttached = 0x25,
  // A forward once meant for a node that is gone, sent again to every live
  // node for the sessions they took over from it (docs/partitions.md, "The
  // takeover gap"); confirmed by kForwardSafe like a kForward.
  kForwardReplay = 0x26,
  // The partitioned shared groups (their keys) with a connected member on
  // the sender, all of them, sent when the set changes and at link up: the
  // nodes that share a group's queues (docs/cluster.md "Partitioned shared
  // groups"). Body as kClientAttached's (u32 n, n x str).
  kGroupConsumers = 0x27,
  // The QoS 1/2 deliveries a node held for a session that moved to the
  // receiver before they were written to the session's partition (their
  // writes were refused or never made): the receiver's session takes them,
  // once each (docs/partitions.md "Deliveries left behind by a move").
  // Link minor 4. Answered by kSessionHandOffDone.
  kSessionHandOff = 0x28,
  kSessionHandOffDone = 0x29,
};

inline constexpr uint8_t kClusterFrameVersion = 1;

struct ForwardFrame {
  uint64_t forward_id = 0;  // 0: the sender waits for no kForwardSafe
  bool plain = false;
  std::vector<std::string> shared_keys;
  MessagePtr message;
};
// The payload is copied once, into the frame.
std::string EncodeForward(uint64_t forward_id, bool plain, const std::vector<std::string>& shared_keys,
                          const Message& message);
// EncodeForward's bytes appended to `out` (a reused buffer: no allocation
// once it has grown to a frame's size).
void AppendForward(std::string& out, uint64_t forward_id, bool plain, const std::vector<std::string>& shared_keys,
                   const Message& message);
std::optional<ForwardFrame> DecodeForward(std::string_view body);
// The same, decoding the message with `recycler` (store/record_codec.h):
// the receiving shard's steady stream of forwards reuses its Messages.
std::optional<ForwardFrame> DecodeForward(std::string_view body, core::store::MessageRecycler& recycler);
// The publisher's client id in a kForward body, decoding nothing else.
std::optional<std::string_view> PeekForwardClientId(std::string_view body);
// The forward id, message id and QoS of a kForward body, decoding nothing else.
struct ForwardIdentity {
  uint64_t forward_id = 0;
  MessageId id;
  QoS qos = QoS::kAtMostOnce;
};
std::optional<ForwardIdentity> PeekForwardIdentity(std::string_view body);

// kForwardReplay: the gone node, then a kForward body.
struct ReplayFrame {
  uint16_t gone = 0;  // a NodeId
  ForwardFrame forward;
};
std::string EncodeReplay(uint16_t gone, uint64_t forward_id, bool plain, const std::vector<std::string>& shared_keys,
                         const Message& message);
std::optional<ReplayFrame> DecodeReplay(std::string_view body);

std::string EncodeForwardSafe(const std::vector<uint64_t>& forward_ids);
std::optional<std::vector<uint64_t>> DecodeForwardSafe(std::string_view body);

std::string EncodeClientIds(const std::vector<std::string>& client_ids);
std::optional<std::vector<std::string>> DecodeClientIds(std::string_view body);

// kSessionHandOff: u64 id, str client id, u32 n, n x (u32 length + a
// delivery record, store::EncodeDelivery).
struct SessionHandOffFrame {
  uint64_t id = 0;
  std::string client_id;
  std::vector<core::Delivery> deliveries;
};
std::string EncodeSessionHandOff(uint64_t id, const std::string& client_id,
                                 const std::vector<core::Delivery>& deliveries);
std::optional<SessionHandOffFrame> DecodeSessionHandOff(std::string_view body);

// kSessionHandOffDone: u64 id, u8 taken (1: the receiver's session holds
// them, durably; 0: it serves no such session).
struct SessionHandOffDone {
  uint64_t id = 0;
  bool taken = false;
};
std::string EncodeSessionHandOffDone(uint64_t id, bool taken);
std::optional<SessionHandOffDone> DecodeSessionHandOffDone(std::string_view body);

}  // namespace estuary::cluster
