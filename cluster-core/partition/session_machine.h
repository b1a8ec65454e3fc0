#pragma once
// SessionMachine: the replicated copy of the persistent sessions whose
// client ids hash to one partition (issue 7 points 2 and 4,
// docs/partitions.md "Sessions on partitions").
//
// The node a client is connected to serves its session (core::Session) and
// writes every durable change of it here as well as to its own engine:
// the keys and values are the node store's own (store/record_codec.h:
// record, subscriptions, queued deliveries, in-flight deliveries, inbound
// QoS 2 ids), so a session read back from here is restored exactly as a
// restarted node restores its own. A client that connects to another node
// has that node claim its id (ClientRegistry, the same partition, so the
// claim and the session are ordered by one log) and read the session here.
//
// Only the owner may write: a write names its node (and boot, for the
// logs), and the changes of a client are applied only while the registry
// says that node owns the client id (whatever the boot: a restarted node
// serves the sessions it recovered from its own store, with every change
// since, until another node claims them). So once another node's claim has committed,
// late writes from the node that lost the client (queued deliveries it
// accepted before it heard of the takeover, the clean-up of its copy) are
// refused and cannot overwrite or delete the session the new owner read.
// Deletes of a client nobody owns are applied (the clean-up after a
// release). A registry release (the session ended) and a clean start's
// claim drop the client's keys.
//
// A fenced write (link minor 5) also names, per change, the copy that made
// it: the connection serial of the claim whose copy it is (the registry's
// copy fence, ClientRegistry), or 0 for a copy this node recovered from its
// own store or served unfenced. A change is applied only under the fence it
// names: serial s only while the client's fence is (node, boot, s); 0 only
// while the fence is not this node's boot's. So once a node read a session
// back from the partition (or started it again), what its replaced copy
// still writes (a write waiting in the agent's queue, or a timed-out
// attempt that commits late) is dropped, and counted as stale, not
// refused: the client is this node's, served by its new copy
// (docs/partitions.md "Late writes of a copy that lost its client id").
//
// Commands (tags 0x30-0x31, see PartitionState):
//   0x30 Write: u32 node, u64 boot, u32 n, then n x {u8 kind, bytes a,
//        [bytes b]}: kind 0 delete key a, 1 put key a = b, 2 wipe every key
//        of client id a. Result: u32 n, then n x bytes (the client ids whose
//        changes were refused).
//   0x31 Fenced write: as 0x30 with a u64 fence serial after each kind.
//        Result: as 0x30's, then u32 (the changes dropped as stale).
// Queries:
//   0x30 Load: bytes client id. Result: u32 n, then n x {bytes key, bytes
//        value}, every key of that client in key order.
//   0x31 Owned: u32 node. Result: u32 n, then n x bytes: the client ids
//        that node owns (registry) and that have a session record here
//        (the sessions a survivor takes over when the node is gone).
//
// The state is held in memory (bounded per session by the session limits);
// the snapshot is every key and value.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cluster-core/partition/client_registry.h"
#include "cluster-core/partition/partition_host.h"

namespace estuary::partition {

// One change to the replicated session state.
struct SessionOp {
  enum Kind : uint8_t { kDelete = 0, kPut = 1, kWipe = 2 };
  Kind kind = kPut;
  std::string key;    // kWipe: the client id
  std::string value;  // kPut only
  uint64_t fence = 0;  // fenced writes: the copy's claim serial (0: unfenced copy)
  friend bool operator==(const SessionOp&, const SessionOp&) = default;
};

struct SessionWrite {
  NodeId node = 0;
  uint64_t boot = 0;
  std::vector<SessionOp> ops;
  bool fenced = false;  // encoded as 0x31, each op's fence checked
};

struct SessionWriteResult {
  std::vector<std::string> refused;  // client ids another node owns
  uint32_t stale = 0;                // fenced changes of a replaced copy, dropped
};

std::string EncodeSessionWrite(const SessionWrite& write);
std::optional<SessionWrite> DecodeSessionWrite(std::string_view bytes);
// The Write's result: the client ids whose changes were refused.
std::optional<std::vector<std::string>> DecodeSessionWriteResult(std::string_view bytes);
// With the stale count of a fenced write (0 for an unfenced one).
std::optional<SessionWriteResult> DecodeSessionWriteOutcome(std::string_view bytes);
std::string EncodeSessionLoad(std::string_view client_id);
std::string EncodeSessionsOwnedBy(NodeId node);
// The Owned query's result (and the Write's): a list of client ids.
std::optional<std::vector<std::string>> DecodeClientList(std::string_view bytes);
// The Load's result: the client's keys and values, in key order.
std::optional<std::vector<std::pair<std::string, std::string>>> DecodeSessionLoadResult(std::string_view bytes);
// The client id a session key (or a wipe) belongs to; nullopt if malformed.
std::optional<std::string> ClientOfSessionOp(const SessionOp& op);

class SessionMachine final : public PartitionMachine {
 public:
  // `registry` is the same partition's: who owns each client id.
  explicit SessionMachine(const ClientRegistry& registry) : registry_(registry) {}

  std::string Apply(const raft::Entry& entry) override;
  std::vector<uint8_t> Snapshot() const override;
  bool Restore(const std::vector<uint8_t>& data) override;
  std::string Query(std::string_view query) const override;

  // Applies a decoded Write; returns the refused client ids (and counts the
  // stale changes dropped in `stale`, when given).
  std::vector<std::string> ApplyWrite(const SessionWrite& write, uint32_t* stale = nullptr);
  // Drops every key of the client (its registry claim was released).
  void Drop(std::string_view client_id);

  const std::map<std::string, std::string, std::less<>>& keys() const { return keys_; }
  uint64_t refused() const { return refused_; }
  uint64_t malformed() const { return malformed_; }
  uint64_t stale() const { return stale_; }

 private:
  // A fenced change of `client` by (node, boot) from the copy `fence`
  // names: still that client's copy?
  bool UnderFence(const std::string& client, NodeId node, uint64_t boot, uint64_t fence) const;

  const ClientRegistry& registry_;
  std::map<std::string, std::string, std::less<>> keys_;
  uint64_t refused_ = 0;  // client changes refused (not the owner)
  uint64_t stale_ = 0;    // fenced changes of replaced copies, dropped
  uint64_t malformed_ = 0;
};

}  // namespace estuary::partition
