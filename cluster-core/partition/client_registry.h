#pragma once
// ClientRegistry: the partition state machine that decides which
// connection owns an MQTT client id (issue 6 point 5, docs/cluster.md "One
// client id per cluster"). A client id lives in the partition it hashes to
// (PartitionHost::PartitionOf).
//
// Commands:
//  - Claim{client, owner, clean}: `owner` (node, boot, connection serial)
//    owns the id from now on; the result names the owner it replaced, if
//    any, so the claimer can have that connection closed. `clean` (a clean
//    start) is encoded as its own tag; the registry treats both alike.
//    With `only_from` (its own tag too) the claim applies only while that
//    node owns the id: a survivor taking over a gone node's session never
//    takes it from a client that has reconnected meanwhile elsewhere. With
//    `expected` as well (tag kClaimFromOwner, link minor 3) it applies only
//    while the owner is exactly the one the taker read (node, boot and
//    connection): a reconnect to the same node, or a restart of it, since
//    the taker looked also refuses it (a compare-and-set, issue 29).
//  - Release{client, owner}: the id is free again, but only if `owner` still
//    holds it (a late release after a takeover changes nothing).
//  - A claim with `fenced` (its own tag kFenced before the claim's tag, link
//    minor 5) also keeps the id's copy fence: the owner whose claim made the
//    copy the claimer serves (docs/partitions.md "Late writes of a copy that
//    lost its client id"). A claim by the node and boot that owns the id
//    already, not a clean start, keeps the fence (the same copy goes on);
//    any other claim makes its own owner the fence (the claimer reads the
//    session from the partition, or starts a new one). An unfenced claim
//    that replaces the copy forgets the fence, and so does a release. The
//    claim's result then names the fence after it (EncodeClaimResult).
//    SessionMachine applies a fenced write of a client only under the
//    fence it names, so what a replaced copy still writes is dropped.
//
// A node's CONNACK waits for its Claim to commit, so on the majority side
// of a split two connections never both hold one id; a node that cannot
// reach a majority of the partition refuses the CONNECT.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "cluster-core/partition/partition_host.h"

namespace estuary::partition {

struct ClientOwner {
  NodeId node = 0;
  uint64_t boot = 0;
  uint64_t connection = 0;
  friend bool operator==(const ClientOwner&, const ClientOwner&) = default;
};

struct ClaimClient {
  std::string client;
  ClientOwner owner{};
  // A clean start: the client's session ends with the claim (PartitionState
  // drops its replicated session in the same entry).
  bool clean = false;
  // Not 0: a takeover of a gone node's session; the claim applies only if
  // that node owns the id now (else nothing changes, the result is empty).
  NodeId only_from = 0;
  // With only_from: the exact owner the claim replaces (node 0: any
  // connection of only_from, as before link minor 3).
  ClientOwner expected{};
  // Keeps the copy fence (link minor 5): see above.
  bool fenced = false;
};
struct ReleaseClient {
  std::string client;
  ClientOwner owner{};
};
using RegistryCommand = std::variant<ClaimClient, ReleaseClient>;

std::string EncodeRegistryCommand(const RegistryCommand& command);
std::optional<RegistryCommand> DecodeRegistryCommand(std::string_view bytes);
// Query 0x01 Owner{client}: the id's owner now, as a Claim's result
// (EncodeClaimResult: none, or the owner; then its copy fence, if any).
std::string EncodeRegistryOwnerQuery(std::string_view client);
// A Claim's result: the owner it replaced (nullopt: there was none), and
// for a fenced claim the id's copy fence after it (none: the copy goes on
// unfenced). A conditional claim that did not apply has an empty result.
std::string EncodeClaimResult(const std::optional<ClientOwner>& previous,
                              const std::optional<ClientOwner>& fence = std::nullopt);
// nullopt if the bytes are malformed; else the previous owner or none.
std::optional<std::optional<ClientOwner>> DecodeClaimResult(std::string_view bytes);
struct ClaimResult {
  std::optional<ClientOwner> previous;
  std::optional<ClientOwner> fence;
};
// Both parts (the fence is none in an unfenced claim's result).
std::optional<ClaimResult> DecodeClaimResultWithFence(std::string_view bytes);

class ClientRegistry final : public PartitionMachine {
 public:
  std::string Apply(const raft::Entry& entry) override;
  std::vector<uint8_t> Snapshot() const override;
  bool Restore(const std::vector<uint8_t>& data) override;
  std::string Query(std::string_view query) const override;

  // Applies one command and returns its result (Claim: EncodeClaimResult;
  // Release: "1" if released, "0" if not).
  std::string ApplyCommand(const RegistryCommand& command);
  const std::map<std::string, ClientOwner>& owners() const { return owners_; }
  // The copy fence of each client id that has one (see above).
  const std::map<std::string, ClientOwner, std::less<>>& fences() const { return fences_; }
  uint64_t malformed() const { return malformed_; }

 private:
  std::map<std::string, ClientOwner> owners_;
  std::map<std::string, ClientOwner, std::less<>> fences_;
  uint64_t malformed_ = 0;
};

}  // namespace estuary::partition
