#include "cluster-core/partition/client_registry.h"

#include "base/bytes.h"

namespace estuary::partition {

namespace {

enum Tag : uint8_t { kClaim = 1, kRelease = 2, kClaimClean = 3, kClaimFrom = 4, kClaimFromOwner = 5, kFenced = 6 };
// 1: the owners; 2: the owners, then the copy fences (written only when
// there is one, so a registry without fences reads in older binaries).
constexpr uint8_t kSnapshotVersion = 1;
constexpr uint8_t kSnapshotWithFences = 2;

void PutOwner(base::LittleEndianWriter& out, const ClientOwner& owner) {
  out.U32(owner.node);
  out.U64(owner.boot);
  out.U64(owner.connection);
}

ClientOwner GetOwner(base::LittleEndianReader& in) {
  ClientOwner owner;
  const uint32_t node = in.U32();
  if (node == 0 || node > 0xFFFF) in.Fail();
  owner.node = static_cast<NodeId>(node);
  owner.boot = in.U64();
  owner.connection = in.U64();
  return owner;
}

}  // namespace

std::string EncodeRegistryCommand(const RegistryCommand& command) {
  base::LittleEndianWriter out;
  if (const auto* claim = std::get_if<ClaimClient>(&command)) {
    const bool guarded = claim->only_from != 0 && claim->expected.node != 0;
    if (claim->fenced) out.U8(kFenced);
    out.U8(guarded ? kClaimFromOwner : claim->only_from != 0 ? kClaimFrom : claim->clean ? kClaimClean : kClaim);
    out.Bytes(claim->client);
    PutOwner(out, claim->owner);
    if (claim->only_from != 0) out.U32(claim->only_from);  // (a takeover is never a clean start)
    if (guarded) PutOwner(out, claim->expected);
  } else {
    const auto& release = std::get<ReleaseClient>(command);
    out.U8(kRelease);
    out.Bytes(release.client);
    PutOwner(out, release.owner);
  }
  return out.Take();
}

std::optional<RegistryCommand> DecodeRegistryCommand(std::string_view bytes) {
  base::LittleEndianReader in(bytes);
  uint8_t tag = in.U8();
  const bool fenced = tag == kFenced;
  if (fenced) tag = in.U8();
  std::string client(in.Bytes());
  ClientOwner owner = GetOwner(in);
  if (tag == kClaimFrom || tag == kClaimFromOwner) {
    const uint32_t from = in.U32();
    ClientOwner expected{};
    if (tag == kClaimFromOwner) expected = GetOwner(in);
    if (from == 0 || from > 0xFFFF || !in.done()) return std::nullopt;
    if (tag == kClaimFromOwner && expected.node != from) return std::nullopt;
    return ClaimClient{std::move(client), owner, false, static_cast<NodeId>(from), expected, fenced};
  }
  if (!in.done()) return std::nullopt;
  if (tag == kClaim || tag == kClaimClean) {
    return ClaimClient{std::move(client), owner, tag == kClaimClean, 0, {}, fenced};
  }
  if (tag == kRelease && !fenced) return ReleaseClient{std::move(client), owner};
  return std::nullopt;
}

std::string EncodeRegistryOwnerQuery(std::string_view client) {
  base::LittleEndianWriter out;
  out.U8(kClaim);
  out.Bytes(client);
  return out.Take();
}

std::string ClientRegistry::Query(std::string_view query) const {
  base::LittleEndianReader in(query);
  if (in.U8() != kClaim) return {};
  const std::string client(in.Bytes());
  if (!in.done()) return {};
  auto it = owners_.find(client);
  auto fence = fences_.find(client);
  return EncodeClaimResult(it == owners_.end() ? std::nullopt : std::optional<ClientOwner>(it->second),
                           fence == fences_.end() ? std::nullopt : std::optional<ClientOwner>(fence->second));
}

std::string EncodeClaimResult(const std::optional<ClientOwner>& previous, const std::optional<ClientOwner>& fence) {
  base::LittleEndianWriter out;
  out.U8(previous ? 1 : 0);
  if (previous) PutOwner(out, *previous);
  if (fence) PutOwner(out, *fence);
  return out.Take();
}

std::optional<ClaimResult> DecodeClaimResultWithFence(std::string_view bytes) {
  base::LittleEndianReader in(bytes);
  ClaimResult result;
  if (in.Bool()) result.previous = GetOwner(in);
  if (!in.done()) result.fence = GetOwner(in);
  if (!in.done()) return std::nullopt;
  return result;
}

std::optional<std::optional<ClientOwner>> DecodeClaimResult(std::string_view bytes) {
  auto result = DecodeClaimResultWithFence(bytes);
  if (!result) return std::nullopt;
  return result->previous;
}

std::string ClientRegistry::Apply(const raft::Entry& entry) {
  auto command =
      DecodeRegistryCommand(std::string_view(reinterpret_cast<const char*>(entry.data.data()), entry.data.size()));
  if (!command) {
    ++malformed_;
    return {};
  }
  return ApplyCommand(*command);
}

std::string ClientRegistry::ApplyCommand(const RegistryCommand& command) {
  if (const auto* claim = std::get_if<ClaimClient>(&command)) {
    if (claim->only_from != 0) {
      auto it = owners_.find(claim->client);
      if (it == owners_.end() || it->second.node != claim->only_from) return {};
      if (claim->expected.node != 0 && it->second != claim->expected) return {};  // renewed since it was read
    }
    std::optional<ClientOwner> previous;
    auto [it, inserted] = owners_.try_emplace(claim->client, claim->owner);
    if (!inserted) {
      previous = it->second;
      it->second = claim->owner;
    }
    // The same copy goes on only where the claimer served it last (as
    // ClusterAgent::ClaimClientId decides what to read).
    const bool same_copy = previous && previous->node == claim->owner.node &&
                           previous->boot == claim->owner.boot && !claim->clean;
    if (!claim->fenced) {
      if (!same_copy) fences_.erase(claim->client);
      return EncodeClaimResult(previous);
    }
    auto fence = fences_.find(claim->client);
    if (!same_copy) {
      fence = fences_.insert_or_assign(claim->client, claim->owner).first;
    }
    return EncodeClaimResult(previous, fence == fences_.end() ? std::nullopt
                                                              : std::optional<ClientOwner>(fence->second));
  }
  const auto& release = std::get<ReleaseClient>(command);
  auto it = owners_.find(release.client);
  if (it == owners_.end() || it->second != release.owner) return "0";
  owners_.erase(it);
  fences_.erase(release.client);
  return "1";
}

std::vector<uint8_t> ClientRegistry::Snapshot() const {
  base::LittleEndianWriter out;
  out.U8(fences_.empty() ? kSnapshotVersion : kSnapshotWithFences);
  out.U32(static_cast<uint32_t>(owners_.size()));
  for (const auto& [client, owner] : owners_) {
    out.Bytes(client);
    PutOwner(out, owner);
  }
  if (!fences_.empty()) {
    out.U32(static_cast<uint32_t>(fences_.size()));
    for (const auto& [client, fence] : fences_) {
      out.Bytes(client);
      PutOwner(out, fence);
    }
  }
  std::string bytes = out.Take();
  return {bytes.begin(), bytes.end()};
}

bool ClientRegistry::Restore(const std::vector<uint8_t>& data) {
  base::LittleEndianReader in(std::string_view(reinterpret_cast<const char*>(data.data()), data.size()));
  const uint8_t version = in.U8();
  if (version != kSnapshotVersion && version != kSnapshotWithFences) return false;
  std::map<std::string, ClientOwner> owners;
  const uint32_t count = in.Count(24);
  for (uint32_t i = 0; i < count && in.ok(); ++i) {
    std::string client(in.Bytes());
    owners[std::move(client)] = GetOwner(in);
  }
  std::map<std::string, ClientOwner, std::less<>> fences;
  if (version == kSnapshotWithFences) {
    const uint32_t fenced = in.Count(24);
    for (uint32_t i = 0; i < fenced && in.ok(); ++i) {
      std::string client(in.Bytes());
      fences[std::move(client)] = GetOwner(in);
    }
  }
  if (!in.done()) return false;
  owners_ = std::move(owners);
  fences_ = std::move(fences);
  return true;
}

}  // namespace estuary::partition
