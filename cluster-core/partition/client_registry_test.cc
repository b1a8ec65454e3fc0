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
  auto fenced = [](RegistryCommand command) {
    std::get<ClaimClient>(command).fenced = true;
    return command;
  };
  for (const RegistryCommand& command : {claim, clean, from, guarded}) {
    auto decoded = DecodeRegistryCommand(EncodeRegistryCommand(fenced(command)));
    ASSERT_TRUE(decoded.has_value());
    EXPECT_TRUE(std::get<ClaimClient>(*decoded).fenced);
    EXPECT_FALSE(std::get<ClaimClient>(*DecodeRegistryCommand(EncodeRegistryCommand(command))).fenced);
  }
  EXPECT_FALSE(DecodeRegistryCommand("\x06" + EncodeRegistryCommand(release))) << "a release has no fence";
  for (const RegistryCommand& command :
       {claim, release, clean, from, guarded, fenced(claim), fenced(clean), fenced(from), fenced(guarded)}) {
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

// Issue 29: the copy fence (client_registry.h). The claim that makes the
// copy a node serves is its fence: kept while the same node and boot
// claims again (the copy goes on), renewed by any other claim.
TEST(ClientRegistry, Issue29AFencedClaimKeepsTheFenceOnlyWhileTheSameCopyGoesOn) {
  ClientRegistry registry;
  auto claim = [&](const std::string& client, ClientOwner owner, bool clean = false, bool fenced = true) {
    ClaimClient command{client, owner, clean};
    command.fenced = fenced;
    return DecodeClaimResultWithFence(registry.ApplyCommand(command)).value();
  };
  const ClientOwner a1{3, 30, 1}, a2{3, 30, 2}, b{1, 10, 1}, a3{3, 30, 3}, a4{3, 30, 4}, restarted{3, 31, 1};
  EXPECT_EQ(claim("dev", a1).fence, a1) << "a new session: this claim's copy";
  auto again = claim("dev", a2);
  EXPECT_EQ(again.previous, a1);
  EXPECT_EQ(again.fence, a1) << "a reconnect to the same node and boot: the same copy";
  EXPECT_EQ(claim("dev", b).fence, b) << "another node reads the session back";
  EXPECT_EQ(claim("dev", a3).fence, a3) << "back on node 3: read back again, a new copy";
  EXPECT_EQ(claim("dev", a4, /*clean=*/true).fence, a4) << "a clean start: a new session";
  EXPECT_EQ(claim("dev", restarted).fence, restarted) << "another boot: read back";
  EXPECT_EQ(DecodeClaimResultWithFence(registry.Query(EncodeRegistryOwnerQuery("dev")))->fence, restarted);
  EXPECT_EQ(claim("dev", ClientOwner{3, 31, 2}, false, /*fenced=*/false).fence, std::nullopt)
      << "an unfenced claim's result names no fence";
  EXPECT_EQ(registry.fences().at("dev"), restarted) << "and keeps it for the same copy";

  // A guarded takeover is always a new copy.
  const ClientOwner owner = registry.owners().at("dev");
  ClaimClient takeover{"dev", ClientOwner{2, 20, 5}, false, 3, owner};
  takeover.fenced = true;
  EXPECT_EQ(DecodeClaimResultWithFence(registry.ApplyCommand(takeover))->fence, (ClientOwner{2, 20, 5}));

  // Snapshots carry the fences (version 2); without any, version 1 as
  // before (readable by older binaries).
  ClientRegistry copy;
  ASSERT_TRUE(copy.Restore(registry.Snapshot()));
  EXPECT_EQ(copy.fences(), registry.fences());
  EXPECT_EQ(copy.owners(), registry.owners());
  EXPECT_EQ(registry.Snapshot().front(), 2);

  // An unfenced claim that replaces the copy, and a release, end the fence.
  claim("dev", ClientOwner{1, 10, 2}, false, /*fenced=*/false);
  EXPECT_EQ(registry.fences().count("dev"), 0u);
  claim("x", b);
  EXPECT_EQ(registry.ApplyCommand(ReleaseClient{"x", b}), "1");
  EXPECT_TRUE(registry.fences().empty());
  EXPECT_EQ(registry.Snapshot().front(), 1);
}

TEST(ClientRegistry, MalformedEntriesAreCountedAndChangeNothing) {
  ClientRegistry registry;
  EXPECT_FALSE(registry.Apply(EntryOf(EncodeRegistryCommand(ClaimClient{"c", {1, 2, 3}}))).empty());
  EXPECT_EQ(registry.Apply(EntryOf("\x01junk")), "");
  EXPECT_EQ(registry.Apply(EntryOf("")), "");
  EXPECT_EQ(registry.malformed(), 2u);
  EXPECT_EQ(registry.owners().size(), 1u);
  auto bytes = registry.Snapshot();
  bytes[0] = 3;  // an unknown snapshot version
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
  ClaimClient fenced{"sensor-17", a};
  fenced.fenced = true;
  write("claim_fenced", 0, EncodeRegistryCommand(fenced));
  write("result_fence", 1, EncodeClaimResult(b, a));
  ClientRegistry registry;
  auto snapshot = registry.Snapshot();
  write("snapshot_empty", 2, std::string(snapshot.begin(), snapshot.end()));
  registry.ApplyCommand(ClaimClient{"x", a});
  registry.ApplyCommand(ClaimClient{"y", b});
  snapshot = registry.Snapshot();
  write("snapshot_two", 2, std::string(snapshot.begin(), snapshot.end()));
  registry.ApplyCommand(fenced);
  snapshot = registry.Snapshot();
  write("snapshot_fences", 2, std::string(snapshot.begin(), snapshot.end()));
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
