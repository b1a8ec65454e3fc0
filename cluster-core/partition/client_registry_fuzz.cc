// libFuzzer target for the client-id registry's decoders (client_registry.h),
// built with -DESTUARY_FUZZ=ON and clang. The first byte picks the input:
//   0: a command (raft entry data): decode -> encode gives the same bytes,
//      and Apply counts it malformed exactly when it does not decode;
//   1: a claim result: the same round trip;
//   2: a snapshot from another replica: Restore either refuses it and
//      changes nothing, or the state snapshots and restores to itself;
//   3: a run of commands (u8 length, bytes) applied in order, checked
//      against plain maps of owners and copy fences (a conditional claim
//      changes them only while its `only_from` node owns the id, and a
//      guarded one only while the owner is the `expected` one; a claim by
//      the owner's node and boot, not clean, keeps the fence; any other
//      fenced claim makes its owner the fence, an unfenced one drops it, as
//      a release does), then a snapshot round trip.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "cluster-core/partition/client_registry.h"

using namespace estuary::partition;

namespace {

estuary::raft::Entry EntryOf(std::string_view bytes) {
  estuary::raft::Entry entry;
  entry.data.assign(bytes.begin(), bytes.end());
  return entry;
}

void Check(bool ok) {
  if (!ok) std::abort();
}

void SnapshotRoundTrip(const ClientRegistry& registry) {
  ClientRegistry copy;
  Check(copy.Restore(registry.Snapshot()));
  Check(copy.owners() == registry.owners());
  Check(copy.fences() == registry.fences());
  Check(copy.Snapshot() == registry.Snapshot());
}

void Command(std::string_view body) {
  auto command = DecodeRegistryCommand(body);
  if (command) Check(EncodeRegistryCommand(*command) == body);
  ClientRegistry registry;
  registry.Apply(EntryOf(body));
  Check(registry.malformed() == (command ? 0u : 1u));
}

void Result(std::string_view body) {
  auto result = DecodeClaimResultWithFence(body);
  if (result) Check(EncodeClaimResult(result->previous, result->fence) == body);
  Check(DecodeClaimResult(body).has_value() == result.has_value());
}

void Snapshot(std::string_view body) {
  ClientRegistry registry;
  registry.ApplyCommand(ClaimClient{"kept", ClientOwner{1, 2, 3}});
  const auto before = registry.owners();
  if (!registry.Restore(std::vector<uint8_t>(body.begin(), body.end()))) {
    Check(registry.owners() == before);
    return;
  }
  SnapshotRoundTrip(registry);
}

void Run(std::string_view body) {
  ClientRegistry registry;
  std::map<std::string, ClientOwner> model;
  std::map<std::string, ClientOwner, std::less<>> fences;
  while (!body.empty()) {
    const size_t length = static_cast<uint8_t>(body[0]);
    body.remove_prefix(1);
    const std::string_view bytes = body.substr(0, length);
    body.remove_prefix(bytes.size());
    auto command = DecodeRegistryCommand(bytes);
    const std::string result = registry.Apply(EntryOf(bytes));
    if (!command) {
      Check(result.empty());
      continue;
    }
    if (const auto* claim = std::get_if<ClaimClient>(&*command)) {
      auto it = model.find(claim->client);
      const std::optional<ClientOwner> previous =
          it == model.end() ? std::nullopt : std::optional<ClientOwner>(it->second);
      const bool refused = claim->only_from != 0 && (!previous || previous->node != claim->only_from ||
                                                     (claim->expected.node != 0 && *previous != claim->expected));
      if (refused) {
        // A takeover claim applies only while that node owns the id (and,
        // guarded, only while the owner is exactly the one expected).
        Check(result.empty());
        Check(registry.owners() == model);
        continue;
      }
      Check(DecodeClaimResult(result) == std::optional<std::optional<ClientOwner>>(previous));
      model[claim->client] = claim->owner;
      const bool same_copy = previous && previous->node == claim->owner.node &&
                             previous->boot == claim->owner.boot && !claim->clean;
      if (!same_copy) {
        if (claim->fenced) {
          fences[claim->client] = claim->owner;
        } else {
          fences.erase(claim->client);
        }
      }
      if (claim->fenced) {
        auto fence = fences.find(claim->client);
        Check(DecodeClaimResultWithFence(result)->fence ==
              (fence == fences.end() ? std::nullopt : std::optional<ClientOwner>(fence->second)));
      }
    } else {
      const auto& release = std::get<ReleaseClient>(*command);
      auto it = model.find(release.client);
      const bool owned = it != model.end() && it->second == release.owner;
      Check(result == (owned ? "1" : "0"));
      if (owned) {
        model.erase(it);
        fences.erase(release.client);
      }
    }
    Check(registry.owners() == model);
    Check(registry.fences() == fences);
  }
  SnapshotRoundTrip(registry);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      Command(body);
      break;
    case 1:
      Result(body);
      break;
    case 2:
      Snapshot(body);
      break;
    default:
      Run(body);
      break;
  }
  return 0;
}
