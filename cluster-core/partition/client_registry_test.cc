// ClientRegistry (client_registry.h): the claim/release rules, its snapshot,
// and the strict decoders of its commands, claim results and snapshots
// (bytes from raft entries and from other nodes' snapshots).
#include "cluster-core/partition/client_registry.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace estuary::partition {
namespace {

raft::Entry EntryOf(const std::string& bytes) {
  raft::Entry entry;
  entry.data.assign(bytes.begin(), bytes.end());
  return entry;
}

TEST(ClientRegistry, ClaimReplacesAndNamesThePreviousOwnerReleaseOnlyByTheOwner) {
  ClientRegistry registry;
  const ClientOwner a{1, 10, 5}, b{2, 20, 6};
  auto first = DecodeClaimResult(registry.ApplyCommand(ClaimClient{"c", a}));
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(*first, std::nullopt);
  auto second = DecodeClaimResult(registry.ApplyCommand(ClaimClient{"c", b}));
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(*second, std::optional<ClientOwner>{a});
  EXPECT_EQ(registry.ApplyCommand(ReleaseClient{"c", a}), "0") << "a late release after a takeover";
  EXPECT_EQ(registry.owners().at("c"), b);
  EXPECT_EQ(registry.ApplyCommand(ReleaseClient{"c", b}), "1");
  EXPECT_TRUE(registry.owners().empty());

  registry.ApplyCommand(ClaimClient{"x", a});
  registry.ApplyCommand(ClaimClient{"y", b});
  ClientRegistry copy;
  ASSERT_TRUE(copy.Restore(registry.Snapshot()));
  EXPECT_EQ(copy.owners(), registry.owners());
  auto bytes = registry.Snapshot();
  bytes.pop_back();
  EXPECT_FALSE(copy.Restore(bytes)) << "a truncated snapshot is refused";
  EXPECT_EQ(copy.owners(), registry.owners()) << "and changes nothing";
  EXPECT_FALSE(DecodeRegistryCommand("\x09junk").has_value());
}

TEST(ClientRegistry, CommandsAndClaimResultsRoundTripAndRefuseMalformedBytes) {
  const RegistryCommand claim = ClaimClient{std::string("id\0x", 4), ClientOwner{0xFFFF, 1ull << 40, 7}};
  const RegistryCommand release = ReleaseClient{"", ClientOwner{1, 0, 0}};
  const RegistryCommand clean = ClaimClient{"c", ClientOwner{2, 1, 1}, /*clean=*/true};
  const RegistryCommand from = ClaimClient{"c", ClientOwner{2, 1, 1}, false, /*only_from=*/9};
  const RegistryCommand guarded = ClaimClient{"c", ClientOwner{2, 1, 1}, false, 9, /*expected=*/ClientOwner{9, 4, 8}};
  EXPECT_EQ(std::get<ClaimClient>(*DecodeRegistryCommand(EncodeRegistryCommand(from))).only_from, 9u);
  EXPECT_EQ(std::get<ClaimClient>(*DecodeRegistryCommand(EncodeRegistryCommand(guarded))).expected,
            (ClientOwner{9, 4, 8}));
  EXPECT_FALSE(DecodeRegistryCommand(
      EncodeRegistryCommand(ClaimClient{"c", ClientOwner{2, 1, 1}, false, 9, ClientOwner{8, 4, 8}})))
      << "the expected owner must be the node the claim takes from";
  EXPECT_TRUE(std::get<ClaimClient>(*DecodeRegistryCommand(EncodeRegistryCommand(clean))).clean);
  EXPECT_FALSE(std::get<ClaimClient>(*DecodeRegistryCommand(EncodeRegistryCommand(claim))).clean);
  for (const RegistryCommand& command : {claim, release, clean, from, guarded}) {
    const std::string bytes = EncodeRegistryCommand(command);
    auto decoded = DecodeRegistryCommand(bytes);
    ASSERT_TRUE(decoded.has_value());
    EXPECT_EQ(EncodeRegistryCommand(*decoded), bytes);
    for (size_t size = 0; size < bytes.size(); ++size) {
      EXPECT_FALSE(DecodeRegistryCommand(bytes.substr(0, size))) << "cut to " << size;
    }
    EXPECT_FALSE(DecodeRegistryCommand(bytes + "x"));
  }
  std::string node_zero = EncodeRegistryCommand(ReleaseClient{"c", ClientOwner{1, 2, 3}});
  node_zero[1 + 4 + 1] = 0;  // tag, length, "c": the owner's node 1 becomes 0
  EXPECT_FALSE(DecodeRegistryCommand(node_zero)) << "node 0 is no node";
  std::string node_too_big = EncodeRegistryCommand(ReleaseClient{"c", ClientOwner{1, 2, 3}});
  node_too_big[1 + 4 + 1 + 2] = 1;  // node 0x00010001
  EXPECT_FALSE(DecodeRegistryCommand(node_too_big));

  for (const std::optional<ClientOwner>& previous :
       {std::optional<ClientOwner>{}, std::optional{ClientOwner{3, 4, 5}}}) {
    const std::string bytes = EncodeClaimResult(previous);
    EXPECT_EQ(DecodeClaimResult(bytes), std::optional<std::optional<ClientOwner>>(previous));
    for (size_t size = 0; size < bytes.size(); ++size) EXPECT_FALSE(DecodeClaimResult(bytes.substr(0, size)));
    EXPECT_FALSE(DecodeClaimResult(bytes + "x"));
  }
  EXPECT_FALSE(DecodeClaimResult("\x02")) << "the has-owner flag is 0 or 1";
}

// Issue 29: a takeover claim guarded by the owner the taker read is
// refused once that owner renewed its claim (a reconnect, even to the same
// node), while the unguarded form of older binaries only checks the node.
TEST(ClientRegistry, Issue29AGuardedTakeoverIsRefusedOnceTheOwnerRenewed) {
  ClientRegistry registry;
  const ClientOwner read{3, 30, 1}, renewed{3, 30, 2}, taker{1, 10, 7};
  registry.ApplyCommand(ClaimClient{"dev", read});
  registry.ApplyCommand(ClaimClient{"dev", renewed});  // the client reconnected to node 3
  EXPECT_EQ(registry.ApplyCommand(ClaimClient{"dev", taker, false, 3, read}), "");
  EXPECT_EQ(registry.owners().at("dev"), renewed);
  auto taken = DecodeClaimResult(registry.ApplyCommand(ClaimClient{"dev", taker, false, 3, renewed}));
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(*taken, std::optional<ClientOwner>(renewed));
  EXPECT_EQ(registry.owners().at("dev"), taker);
  ClientRegistry older;
  older.ApplyCommand(ClaimClient{"dev", renewed});
  EXPECT_FALSE(older.ApplyCommand(ClaimClient{"dev", taker, false, 3}).empty()) << "unguarded: any owner on node 3";
}

TEST(ClientRegistry, MalformedEntriesAreCountedAndChangeNothing) {
  ClientRegistry registry;
  EXPECT_FALSE(registry.Apply(EntryOf(EncodeRegistryCommand(ClaimClient{"c", {1, 2, 3}}))).empty());
  EXPECT_EQ(registry.Apply(EntryOf("\x01junk")), "");
  EXPECT_EQ(registry.Apply(EntryOf("")), "");
  EXPECT_EQ(registry.malformed(), 2u);
  EXPECT_EQ(registry.owners().size(), 1u);
  auto bytes = registry.Snapshot();
  bytes[0] = 2;  // an unknown snapshot version
  EXPECT_FALSE(ClientRegistry().Restore(bytes));
}

// Writes client_registry_fuzz's seed corpus when ESTUARY_WRITE_CORPUS names
// a dir. The first byte picks what the rest is: 0 a command, 1 a claim
// result, 2 a snapshot, 3 a run of length-prefixed commands.
TEST(ClientRegistry, SeedCorpus) {
  const char* dir = std::getenv("ESTUARY_WRITE_CORPUS");
  if (dir == nullptr) GTEST_SKIP() << "set ESTUARY_WRITE_CORPUS=dir to write the seeds";
  auto write = [&](const std::string& name, char selector, const std::string& body) {
    std::ofstream(std::string(dir) + "/" + name, std::ios::binary) << selector << body;
  };
  const ClientOwner a{1, 10, 5}, b{2, 20, 6};
  write("claim", 0, EncodeRegistryCommand(ClaimClient{"sensor-17", a}));
  write("release", 0, EncodeRegistryCommand(ReleaseClient{"sensor-17", b}));
  write("claim_guarded", 0, EncodeRegistryCommand(ClaimClient{"sensor-17", b, false, 1, a}));
  write("result_none", 1, EncodeClaimResult(std::nullopt));
  write("result_owner", 1, EncodeClaimResult(a));
  ClientRegistry registry;
  auto snapshot = registry.Snapshot();
  write("snapshot_empty", 2, std::string(snapshot.begin(), snapshot.end()));
  registry.ApplyCommand(ClaimClient{"x", a});
  registry.ApplyCommand(ClaimClient{"y", b});
  snapshot = registry.Snapshot();
  write("snapshot_two", 2, std::string(snapshot.begin(), snapshot.end()));
  std::string run;
  for (const RegistryCommand& command :
       {RegistryCommand{ClaimClient{"c", a}}, RegistryCommand{ClaimClient{"c", b}},
        RegistryCommand{ReleaseClient{"c", a}}, RegistryCommand{ReleaseClient{"c", b}}}) {
    const std::string bytes = EncodeRegistryCommand(command);
    run += static_cast<char>(bytes.size());
    run += bytes;
  }
  write("run", 3, run);
}

}  // namespace
}  // namespace estuary::partition
