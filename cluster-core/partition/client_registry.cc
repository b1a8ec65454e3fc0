#include "cluster-core/partition/client_registry.h"

#include "base/bytes.h"

namespace estuary::partition {

namespace {

enum Tag : uint8_t { kClaim = 1, kRelease = 2, kClaimClean = 3, kClaimFrom = 4, kClaimFromOwner = 5 };
constexpr uint8_t kSnapshotVersion = 1;

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
  const uint8_t tag = in.U8();
  std::string client(in.Bytes());
  ClientOwner owner = GetOwner(in);
  if (tag == kClaimFrom || tag == kClaimFromOwner) {
    const uint32_t from = in.U32();
    ClientOwner expected{};
    if (tag == kClaimFromOwner) expected = GetOwner(in);
    if (from == 0 || from > 0xFFFF || !in.done()) return std::nullopt;
    if (tag == kClaimFromOwner && expected.node != from) return std::nullopt;
    return ClaimClient{std::move(client), owner, false, static_cast<NodeId>(from), expected};
  }
  if (!in.done()) return std::nullopt;
  if (tag == kClaim || tag == kClaimClean) return ClaimClient{std::move(client), owner, tag == kClaimClean};
  if (tag == kRelease) return ReleaseClient{std::move(client), owner};
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
  return EncodeClaimResult(it == owners_.end() ? std::nullopt : std::optional<ClientOwner>(it->second));
}

std::string EncodeClaimResult(const std::optional<ClientOwner>& previous) {
  base::LittleEndianWriter out;
  out.U8(previous ? 1 : 0);
  if (previous) PutOwner(out, *previous);
  return out.Take();
}

std::optional<std::optional<ClientOwner>> DecodeClaimResult(std::string_view bytes) {
  base::LittleEndianReader in(bytes);
  std::optional<ClientOwner> previous;
  if (in.Bool()) previous = GetOwner(in);
  if (!in.done()) return std::nullopt;
  return previous;
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
    return EncodeClaimResult(previous);
  }
  const auto& release = std::get<ReleaseClient>(command);
  auto it = owners_.find(release.client);
  if (it == owners_.end() || it->second != release.owner) return "0";
  owners_.erase(it);
  return "1";
}

std::vector<uint8_t> ClientRegistry::Snapshot() const {
  base::LittleEndianWriter out;
  out.U8(kSnapshotVersion);
  out.U32(static_cast<uint32_t>(owners_.size()));
  for (const auto& [client, owner] : owners_) {
    out.Bytes(client);
    PutOwner(out, owner);
  }
  std::string bytes = out.Take();
  return {bytes.begin(), bytes.end()};
}

bool ClientRegistry::Restore(const std::vector<uint8_t>& data) {
  base::LittleEndianReader in(std::string_view(reinterpret_cast<const char*>(data.data()), data.size()));
  if (in.U8() != kSnapshotVersion) return false;
  std::map<std::string, ClientOwner> owners;
  const uint32_t count = in.Count(24);
  for (uint32_t i = 0; i < count && in.ok(); ++i) {
    std::string client(in.Bytes());
    owners[std::move(client)] = GetOwner(in);
  }
  if (!in.done()) return false;
  owners_ = std::move(owners);
  return true;
}

}  // namespace estuary::partition
