#pragma once
// Transport: the cluster's seam over the inter-node links (docs/internode.md).
//
// A Transport keeps one authenticated, ordered, framed link to every peer
// node it knows an address for, and hands the cluster logic whole frames.
// The real one (UvTransport, links/uv_transport.h) runs on a libuv loop over
// TCP; the simulated one (SimTransport, links/sim_transport.h) runs on a
// SimLoop, so the same cluster logic runs under the simulator.
//
// Frame types: 0x00-0x0F belong to the link layer itself (hello, challenge,
// heartbeat, ...) and never reach the handler; the ranges above it are
// named below (FrameRange), the rest reserved.
//
// Threading: a Transport and its handler belong to one loop's thread.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace estuary::cluster {

using NodeId = uint16_t;

// The link protocol's minor version this binary speaks (links/frame.h's
// hello). Minors are compatible within a major; a minor says what a peer
// understands beyond the frames themselves:
//   0: up to 2026-12-01 (session 11);
//   1: reads delivery records that carry a shared group's key (older
//      binaries reject them: docs/storage.md);
//   2: applies the partitioned queues' Hand, Unhand and Settle commands
//      (partition/queue_machine.h; older binaries count them malformed);
//   3: applies a takeover claim guarded by the exact owner it replaces
//      (partition/client_registry.h, kClaimFromOwner; issue 29);
//   4: takes the deliveries a moved session left behind on its previous
//      node (kSessionHandOff; cluster/cluster_handoff.cc, issue 29);
//   5: applies fenced claims and fenced session writes (the copy fence:
//      partition/client_registry.h, partition/session_machine.h; issue 29).
constexpr uint8_t kLinkVersionMinor = 5;
constexpr uint8_t kMinorGroupKeyRecords = 1;
constexpr uint8_t kMinorQueueHands = 2;
constexpr uint8_t kMinorClaimGuard = 3;
constexpr uint8_t kMinorSessionHandOff = 4;
constexpr uint8_t kMinorCopyFence = 5;

// Who owns which frame types (docs/internode.md): the node's coordinator
// (cluster::ClusterAgent) hands each range to its owner.
struct FrameRange {
  uint8_t first = 0;
  uint8_t last = 0;
  constexpr bool Contains(uint8_t type) const { return type >= first && type <= last; }
};
inline constexpr FrameRange kMembershipFrames{0x10, 0x1F};  // membership/membership_codec.h
inline constexpr FrameRange kClusterFrames{0x20, 0x3F};     // cluster/cluster_frames.h: forwards, hand-offs
inline constexpr FrameRange kRaftFrames{0x40, 0x4F};        // meta/raft_codec.h: every raft group's messages
inline constexpr FrameRange kPartitionFrames{0x50, 0x5F};   // partition/partition_frames.h
inline constexpr FrameRange kQueueFrames{0x60, 0x6F};       // partition/queue_frames.h

struct PeerInfo {
  NodeId node = 0;
  std::string cluster_address;  // the address the peer listens on, "HOST:PORT"
  uint8_t minor = kLinkVersionMinor;  // the minor its hello announced
};

// Why a dial failed before a link existed.
enum class DialError : uint8_t {
  // The peer's host answered that nothing listens on that port
  // (ECONNREFUSED): on a sound network, the process behind it is gone.
  kRefused,
  // Timed out, unreachable, reset after connecting, ...: says nothing
  // about whether the process is alive.
  kOther,
};

struct DialFailure {
  std::string address;  // the dialled "HOST:PORT"
  NodeId node = 0;      // the node last found behind it, 0 if none yet
  DialError error = DialError::kOther;
  std::string detail;   // for logs ("connection refused", "timed out")
};

class LinkHandler {
 public:
  virtual ~LinkHandler() = default;
  // A link to `peer` finished its handshake (both sides proved the cluster
  // secret). Frames sent from now on are delivered in order.
  virtual void OnPeerUp(const PeerInfo& peer) = 0;
  // The link to `node` is gone (closed, reset, or silent past the heartbeat
  // timeout). Frames not yet written are dropped. A known address is
  // redialled with backoff; OnPeerUp follows when it is back.
  virtual void OnPeerDown(NodeId node) = 0;
  // One frame from `from`. `body` is valid only during the call.
  virtual void OnFrame(NodeId from, uint8_t type, std::string_view body) = 0;
  // The send queue to `node` fell below its low watermark after Send
  // returned kFull: the caller may send again.
  virtual void OnWritable(NodeId /*node*/) {}
  // A peer at `address` closed a link that never came up with an error
  // (wrong cluster secret, unsupported version, ...), as its last frame
  // said. The address is redialled as usual.
  virtual void OnRefusedBy(const std::string& /*address*/, const std::string& /*reason*/) {}
};

enum class SendResult : uint8_t {
  kQueued,  // accepted; written with the other frames of this loop iteration
  kFull,    // the peer's send queue is at its bound; nothing was queued
  kNoLink,  // no authenticated link to that node now; nothing was queued
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual NodeId self() const = 0;
  void set_handler(LinkHandler* handler) { handler_ = handler; }
  // Keeps a link to this address (a seed or a member's cluster address):
  // dials it, and redials with backoff while it is unreachable. The node id
  // behind it is learned in the handshake. Adding a known address is a no-op.
  virtual void AddPeerAddress(const std::string& address) = 0;
  // Closes the link to `node` and forgets its address (it left the cluster).
  virtual void RemovePeer(NodeId node) = 0;
  virtual SendResult Send(NodeId to, uint8_t type, std::string_view body) = 0;
  virtual bool connected(NodeId node) const = 0;
  // The peers with an authenticated link now.
  virtual std::vector<PeerInfo> peers() const = 0;
  // Every failed dial (a seed, a member's address, a redial), with why.
  // An observer of its own rather than a LinkHandler call: what judges
  // liveness from it (membership) is not the links' handler in estuaryd
  // (the ClusterAgent). Called on the loop's thread, never from Close().
  void set_dial_observer(std::function<void(const DialFailure&)> observer) {
    dial_observer_ = std::move(observer);
  }

 protected:
  void ReportDialFailure(const DialFailure& failure) {
    if (dial_observer_) dial_observer_(failure);
  }

  LinkHandler* handler_ = nullptr;
  std::function<void(const DialFailure&)> dial_observer_;
};

}  // namespace estuary::cluster
