#include "cluster-core/partition/session_machine.h"

#include <gtest/gtest.h>

#include "cluster-core/partition/partition_state.h"
#include "cluster-core/store/record_codec.h"

namespace estuary::partition {
namespace {

namespace store = core::store;

constexpr int64_t kNow = 1'800'000'000'000;

raft::Entry EntryOf(std::string_view bytes) {
  raft::Entry entry;
  entry.index = 1;
  entry.term = 1;
  entry.data.assign(bytes.begin(), bytes.end());
  return entry;
}

SessionOp Put(std::string key, std::string value) { return {SessionOp::kPut, std::move(key), std::move(value)}; }
SessionOp Delete(std::string key) { return {SessionOp::kDelete, std::move(key), {}}; }
SessionOp Wipe(std::string client) { return {SessionOp::kWipe, std::move(client), {}}; }

std::vector<std::string> Write(PartitionState& state, NodeId node, uint64_t boot, std::vector<SessionOp> ops) {
  return DecodeSessionWriteResult(state.Apply(EntryOf(EncodeSessionWrite(SessionWrite{node, boot, std::move(ops)}))))
      .value();
}

void Claim(PartitionState& state, const std::string& client, ClientOwner owner) {
  state.Apply(EntryOf(EncodeRegistryCommand(ClaimClient{client, owner})));
}

void FencedClaim(PartitionState& state, const std::string& client, ClientOwner owner) {
  ClaimClient claim{client, owner};
  claim.fenced = true;
  state.Apply(EntryOf(EncodeRegistryCommand(claim)));
}

SessionOp Fenced(SessionOp op, uint64_t fence) {
  op.fence = fence;
  return op;
}

SessionWriteResult FencedWrite(PartitionState& state, NodeId node, uint64_t boot, std::vector<SessionOp> ops) {
  SessionWrite write{node, boot, std::move(ops)};
  write.fenced = true;
  return DecodeSessionWriteOutcome(state.Apply(EntryOf(EncodeSessionWrite(write)))).value();
}

std::vector<std::pair<std::string, std::string>> Load(const PartitionState& state, std::string_view client) {
  return DecodeSessionLoadResult(state.Query(EncodeSessionLoad(client))).value();
}

TEST(SessionMachineTest, OnlyTheRegisteredOwnerWritesAClientsSession) {
  PartitionState state([] { return kNow; });
  Claim(state, "dev", ClientOwner{1, 7, 1});
  EXPECT_TRUE(Write(state, 1, 7,
                    {Put(store::SessionKey("dev"), "record"), Put(store::SubscriptionKey("dev", "a/#"), "opts"),
                     Put(store::QueuedKey("dev", 1), "m1"), Put(store::QueuedKey("dev", 2), "m2")})
                  .empty());
  EXPECT_EQ(Load(state, "dev").size(), 4u);

  // Another node is not the owner; the same node after a restart is (it
  // serves what it recovered).
  EXPECT_EQ(Write(state, 2, 9, {Put(store::QueuedKey("dev", 3), "late")}), std::vector<std::string>{"dev"});
  EXPECT_EQ(Load(state, "dev").size(), 4u);
  EXPECT_EQ(state.sessions().refused(), 1u);
  EXPECT_TRUE(Write(state, 1, 8, {Put(store::QueuedKey("dev", 3), "m3")}).empty());
  EXPECT_TRUE(Write(state, 1, 8, {Delete(store::QueuedKey("dev", 3))}).empty());

  // The claim moves to node 2: node 1's late writes, and its clean-up of
  // its own copy, are refused; node 2 writes.
  Claim(state, "dev", ClientOwner{2, 9, 1});
  EXPECT_EQ(Write(state, 1, 7, {Put(store::QueuedKey("dev", 3), "late"), Wipe("dev")}),
            std::vector<std::string>{"dev"});
  EXPECT_EQ(Load(state, "dev").size(), 4u);
  EXPECT_TRUE(Write(state, 2, 9, {Delete(store::QueuedKey("dev", 1)), Put(store::InboundKey("dev", 5), "")}).empty());
  const auto loaded = Load(state, "dev");
  ASSERT_EQ(loaded.size(), 4u);
  // In key order: record, subscription, queue, inbound id... as the store lays them out.
  std::vector<std::string> keys;
  for (const auto& [key, value] : loaded) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{store::SessionKey("dev"), store::SubscriptionKey("dev", "a/#"),
                                             store::QueuedKey("dev", 2), store::InboundKey("dev", 5)}));
  EXPECT_EQ(loaded[2].second, "m2");
}

TEST(SessionMachineTest, ChangesOfSeveralClientsInOneWriteAreDecidedPerClient) {
  PartitionState state([] { return kNow; });
  Claim(state, "a", ClientOwner{1, 1, 1});
  Claim(state, "b", ClientOwner{2, 1, 1});
  EXPECT_EQ(Write(state, 1, 1,
                  {Put(store::SessionKey("a"), "ra"), Put(store::SessionKey("b"), "rb"),
                   Put(store::QueuedKey("a", 1), "qa"), Put(store::SessionKey("c"), "rc")}),
            (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(Load(state, "a").size(), 2u);
  EXPECT_TRUE(Load(state, "b").empty());
  EXPECT_TRUE(Load(state, "c").empty());
}

TEST(SessionMachineTest, ADeleteOfAnUnownedClientIsAppliedAndAReleaseDropsTheSession) {
  PartitionState state([] { return kNow; });
  const ClientOwner owner{1, 3, 4};
  Claim(state, "dev", owner);
  Claim(state, "dev-longer", ClientOwner{1, 3, 5});
  Write(state, 1, 3,
        {Put(store::SessionKey("dev"), "r"), Put(store::QueuedKey("dev", 1), "q"),
         Put(store::SessionKey("dev-longer"), "r2")});
  // A stale release (another connection's) changes nothing.
  state.Apply(EntryOf(EncodeRegistryCommand(ReleaseClient{"dev", ClientOwner{1, 3, 99}})));
  EXPECT_EQ(Load(state, "dev").size(), 2u);
  state.Apply(EntryOf(EncodeRegistryCommand(ReleaseClient{"dev", owner})));
  EXPECT_TRUE(Load(state, "dev").empty());
  EXPECT_EQ(Load(state, "dev-longer").size(), 1u);  // a longer id sharing the prefix is untouched

  // Nobody owns "dev" now: its clean-up is applied, a put is not.
  Claim(state, "dev", owner);
  Write(state, 1, 3, {Put(store::SessionKey("dev"), "r")});
  state.Apply(EntryOf(EncodeRegistryCommand(ReleaseClient{"dev", owner})));
  EXPECT_EQ(Write(state, 1, 3, {Put(store::SessionKey("dev"), "again")}), std::vector<std::string>{"dev"});
  EXPECT_TRUE(Write(state, 1, 3, {Delete(store::SessionKey("dev")), Wipe("dev")}).empty());
  EXPECT_TRUE(Load(state, "dev").empty());
}

TEST(SessionMachineTest, ACleanStartsClaimEndsTheSession) {
  PartitionState state([] { return kNow; });
  Claim(state, "dev", ClientOwner{1, 1, 1});
  Write(state, 1, 1, {Put(store::SessionKey("dev"), "r"), Put(store::QueuedKey("dev", 1), "q")});
  Claim(state, "dev", ClientOwner{2, 1, 1});  // resumed elsewhere: kept
  EXPECT_EQ(Load(state, "dev").size(), 2u);
  state.Apply(EntryOf(EncodeRegistryCommand(ClaimClient{"dev", ClientOwner{3, 1, 1}, /*clean=*/true})));
  EXPECT_TRUE(Load(state, "dev").empty());
  EXPECT_EQ(state.registry().owners().at("dev"), (ClientOwner{3, 1, 1}));
}

// Task transfer (docs/partitions.md "Sessions on partitions"): a survivor
// lists the sessions a gone node owned and takes each with a claim that
// applies only while that node still owns the id.
TEST(SessionMachineTest, ASurvivorFindsAGoneNodesSessionsAndTakesThemOnlyFromIt) {
  PartitionState state([] { return kNow; });
  Claim(state, "a", ClientOwner{2, 1, 1});
  Claim(state, "b", ClientOwner{2, 1, 2});
  Claim(state, "c", ClientOwner{1, 1, 3});
  Claim(state, "no-session", ClientOwner{2, 1, 4});
  Write(state, 2, 1, {Put(store::SessionKey("a"), "r"), Put(store::SessionKey("b"), "r")});
  Write(state, 1, 1, {Put(store::SessionKey("c"), "r")});
  auto owned = DecodeClientList(state.Query(EncodeSessionsOwnedBy(2)));
  ASSERT_TRUE(owned.has_value());
  EXPECT_EQ(*owned, (std::vector<std::string>{"a", "b"}));

  // "b" reconnected on node 1 meanwhile: the takeover of "b" does not apply.
  Claim(state, "b", ClientOwner{1, 1, 5});
  const ClientOwner survivor{3, 7, 1};
  EXPECT_EQ(state.Apply(EntryOf(EncodeRegistryCommand(ClaimClient{"b", survivor, false, /*only_from=*/2}))), "");
  EXPECT_EQ(state.registry().owners().at("b").node, 1u);
  EXPECT_EQ(state.Apply(EntryOf(EncodeRegistryCommand(ClaimClient{"a", survivor, false, /*only_from=*/2}))),
            EncodeClaimResult(ClientOwner{2, 1, 1}));
  EXPECT_EQ(state.registry().owners().at("a"), survivor);
  EXPECT_EQ(Load(state, "a").size(), 1u);  // the session stays for the survivor to read
  EXPECT_TRUE(DecodeClientList(state.Query(EncodeSessionsOwnedBy(2)))->empty());
  // Who owns an id now (a restarted node asks before it serves what it recovered).
  EXPECT_EQ(DecodeClaimResult(state.Query(EncodeRegistryOwnerQuery("a"))).value(), survivor);
  EXPECT_EQ(DecodeClaimResult(state.Query(EncodeRegistryOwnerQuery("nobody"))).value(), std::nullopt);
  EXPECT_TRUE(state.Query(std::string("\x31\x00", 2)).empty());  // malformed: no answer
}

// AMQP durable subscriptions (docs/amqp.md) are sessions whose id starts
// with a NUL byte (frontends/amqp DurableSessionId): ids are byte strings
// to the registry, the session machine, the listing and the snapshot.
TEST(SessionMachineTest, AnIdStartingWithANulIsAnIdLikeAnyOther) {
  const std::string amqp("\0amqp/6:cont-1/sub", 18);
  const std::string prefix_of_it(1, '\0');  // a different client, a prefix of the other
  PartitionState state([] { return kNow; });
  Claim(state, amqp, ClientOwner{2, 1, 1});
  Claim(state, prefix_of_it, ClientOwner{2, 1, 2});
  const std::vector<SessionOp> ops = {Put(store::SessionKey(amqp), "r"), Put(store::SubscriptionKey(amqp, "t/#"), "s"),
                                      Put(store::QueuedKey(amqp, 1), "q"), Put(store::InflightKey(amqp, 7), "f")};
  for (const SessionOp& op : ops) EXPECT_EQ(ClientOfSessionOp(op), amqp);
  EXPECT_EQ(Write(state, 1, 1, ops), std::vector<std::string>{amqp}) << "only its owner writes it";
  EXPECT_TRUE(Write(state, 2, 1, ops).empty());
  EXPECT_TRUE(Write(state, 2, 1, {Put(store::SessionKey(prefix_of_it), "r")}).empty());
  EXPECT_EQ(Load(state, amqp).size(), 4u);
  EXPECT_EQ(Load(state, prefix_of_it).size(), 1u);
  auto owned = DecodeClientList(state.Query(EncodeSessionsOwnedBy(2)));
  ASSERT_TRUE(owned.has_value());
  EXPECT_EQ(*owned, (std::vector<std::string>{prefix_of_it, amqp}));

  PartitionState copy([] { return kNow; });
  ASSERT_TRUE(copy.Restore(state.Snapshot()));
  EXPECT_EQ(Load(copy, amqp), Load(state, amqp));
  EXPECT_EQ(copy.registry().owners().at(amqp), (ClientOwner{2, 1, 1}));
  // A release ends it, and only it.
  state.Apply(EntryOf(EncodeRegistryCommand(ReleaseClient{amqp, ClientOwner{2, 1, 1}})));
  EXPECT_TRUE(Load(state, amqp).empty());
  EXPECT_EQ(Load(state, prefix_of_it).size(), 1u);
}

TEST(SessionMachineTest, SnapshotCarriesTheSessionsAndOlderSnapshotsRestoreNone) {
  PartitionState state([] { return kNow; });
  Claim(state, "dev", ClientOwner{1, 1, 1});
  Write(state, 1, 1, {Put(store::SessionKey("dev"), "r"), Put(store::InflightKey("dev", 9), "f")});
  const std::vector<uint8_t> snapshot = state.Snapshot();

  PartitionState copy([] { return kNow; });
  ASSERT_TRUE(copy.Restore(snapshot));
  EXPECT_EQ(copy.Snapshot(), snapshot);
  EXPECT_EQ(Load(copy, "dev"), Load(state, "dev"));

  // A snapshot written before sessions were kept (three sections).
  PartitionState older([] { return kNow; });
  Claim(older, "x", ClientOwner{2, 2, 2});
  std::vector<uint8_t> three = older.Snapshot();
  const std::vector<uint8_t> empty_sessions = SessionMachine(older.registry()).Snapshot();
  three.resize(three.size() - empty_sessions.size() - 4);  // drop the last section and its length
  ASSERT_TRUE(copy.Restore(three));
  EXPECT_TRUE(copy.sessions().keys().empty());
  EXPECT_EQ(copy.registry().owners().count("x"), 1u);
}

// Issue 29, docs/partitions.md "Late writes of a copy that lost its client
// id": node 3 lost the id to node 1 without hearing of it, its client came
// back to node 3, and node 3 read the session back. What the replaced copy
// still writes (here a delete and a put of queue keys, which node 1's
// copy, written with its own sequences, may hold too) is dropped by the
// fence; the copy read back writes on.
TEST(SessionMachineTest, Issue29AReplacedCopysLateWritesAreDroppedByTheFence) {
  PartitionState state([] { return kNow; });
  FencedClaim(state, "dev", ClientOwner{3, 30, 1});
  EXPECT_TRUE(FencedWrite(state, 3, 30, {Fenced(Put(store::SessionKey("dev"), "r"), 1),
                                         Fenced(Put(store::QueuedKey("dev", 1), "m1"), 1)})
                  .refused.empty());
  FencedClaim(state, "dev", ClientOwner{1, 10, 1});  // node 1 takes it (node 3 cut off)
  auto refused = FencedWrite(state, 3, 30, {Fenced(Put(store::QueuedKey("dev", 2), "old"), 1)});
  EXPECT_EQ(refused.refused, std::vector<std::string>{"dev"}) << "another node's: refused, as before";
  EXPECT_EQ(refused.stale, 0u);
  EXPECT_TRUE(FencedWrite(state, 1, 10, {Fenced(Put(store::QueuedKey("dev", 2), "m2 of node 1"), 1)})
                  .refused.empty());
  FencedClaim(state, "dev", ClientOwner{3, 30, 2});  // the client is back on node 3: a new copy
  ASSERT_EQ(state.registry().fences().at("dev"), (ClientOwner{3, 30, 2}));

  // The old copy's late writes: not refused (the id is node 3's), dropped.
  auto late = FencedWrite(state, 3, 30, {Fenced(Delete(store::QueuedKey("dev", 2)), 1),
                                         Fenced(Put(store::QueuedKey("dev", 3), "late"), 1)});
  EXPECT_TRUE(late.refused.empty());
  EXPECT_EQ(late.stale, 2u);
  EXPECT_EQ(state.sessions().stale(), 2u);
  auto loaded = Load(state, "dev");
  ASSERT_EQ(loaded.size(), 3u);
  EXPECT_EQ(loaded[2], (std::pair<std::string, std::string>{store::QueuedKey("dev", 2), "m2 of node 1"}));
  // An unfenced copy of this boot (one it recovered, before the claim) is
  // replaced too; one of a later boot (a restart since) is not.
  EXPECT_EQ(FencedWrite(state, 3, 30, {Put(store::QueuedKey("dev", 4), "recovered")}).stale, 1u);
  // One write with changes of both copies: decided per change.
  auto mixed = FencedWrite(state, 3, 30, {Fenced(Put(store::QueuedKey("dev", 5), "old"), 1),
                                          Fenced(Put(store::QueuedKey("dev", 6), "new"), 2)});
  EXPECT_TRUE(mixed.refused.empty());
  EXPECT_EQ(mixed.stale, 1u);
  EXPECT_EQ(Load(state, "dev").size(), 4u);
  EXPECT_EQ(FencedWrite(state, 3, 31, {Put(store::QueuedKey("dev", 7), "after a restart")}).stale, 0u);
  EXPECT_EQ(Load(state, "dev").size(), 5u);
  // An unfenced write (while a node of an older binary is linked) is
  // decided by node only, as before.
  EXPECT_TRUE(Write(state, 3, 30, {Put(store::QueuedKey("dev", 8), "unfenced")}).empty());
  EXPECT_EQ(Load(state, "dev").size(), 6u);

  // Without a fence (claims made unfenced) only fence 0 is this copy's.
  Claim(state, "other", ClientOwner{3, 30, 9});
  EXPECT_EQ(FencedWrite(state, 3, 30, {Put(store::SessionKey("other"), "r")}).stale, 0u);
  EXPECT_EQ(FencedWrite(state, 3, 30, {Fenced(Put(store::QueuedKey("other", 1), "q"), 9)}).stale, 1u);
  // The fence survives a snapshot.
  PartitionState copy([] { return kNow; });
  ASSERT_TRUE(copy.Restore(state.Snapshot()));
  EXPECT_EQ(copy.registry().fences(), state.registry().fences());
  EXPECT_EQ(FencedWrite(copy, 3, 30, {Fenced(Put(store::QueuedKey("dev", 9), "late"), 1)}).stale, 1u);
}

TEST(SessionMachineTest, MalformedWritesAndResultsAreRefused) {
  PartitionState state([] { return kNow; });
  const std::string good = EncodeSessionWrite(SessionWrite{1, 1, {Put(store::SessionKey("d"), "v")}});
  EXPECT_EQ(DecodeSessionWrite(good)->ops.size(), 1u);
  for (size_t cut = 1; cut < good.size(); ++cut) {
    EXPECT_FALSE(DecodeSessionWrite(good.substr(0, cut)).has_value()) << cut;
  }
  std::string bad_kind = good;
  bad_kind[1 + 4 + 8 + 4] = 3;
  EXPECT_FALSE(DecodeSessionWrite(bad_kind).has_value());
  EXPECT_FALSE(DecodeSessionWrite(EncodeSessionWrite(SessionWrite{0, 1, {}})).has_value());  // node 0
  EXPECT_EQ(state.Apply(EntryOf(good.substr(0, 5))), "");
  EXPECT_EQ(state.sessions().malformed(), 1u);
  // A key that is not a session key is skipped, not stored.
  Claim(state, "d", ClientOwner{1, 1, 1});
  EXPECT_TRUE(Write(state, 1, 1, {Put(store::RetainedKey("t"), "v"), Put(store::SessionKey("d"), "r")}).empty());
  EXPECT_EQ(state.sessions().keys().size(), 1u);
  EXPECT_FALSE(DecodeSessionLoadResult(std::string("\x00\x00\x00\x01", 4)).has_value());
  EXPECT_FALSE(DecodeSessionWriteResult(std::string("\x00\x00\x00\x02\x00", 5)).has_value());
  // A fenced write: each change names its copy; cut anywhere, refused.
  SessionWrite fenced{1, 1, {Fenced(Put(store::SessionKey("d"), "v"), 1ull << 40), Wipe("d")}};
  fenced.fenced = true;
  const std::string fenced_bytes = EncodeSessionWrite(fenced);
  auto decoded = DecodeSessionWrite(fenced_bytes);
  ASSERT_TRUE(decoded.has_value());
  EXPECT_TRUE(decoded->fenced);
  EXPECT_EQ(decoded->ops, fenced.ops);
  for (size_t cut = 1; cut < fenced_bytes.size(); ++cut) {
    EXPECT_FALSE(DecodeSessionWrite(fenced_bytes.substr(0, cut)).has_value()) << cut;
  }
  EXPECT_FALSE(DecodeSessionWrite(fenced_bytes + "x").has_value());
  auto outcome = DecodeSessionWriteOutcome(std::string("\x00\x00\x00\x00\x03\x00\x00\x00", 8));
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->stale, 3u);
  EXPECT_FALSE(DecodeSessionWriteOutcome(std::string("\x00\x00\x00\x00\x03\x00", 6)).has_value());
  EXPECT_TRUE(state.Query(std::string("\x30", 1)).empty());
}

}  // namespace
}  // namespace estuary::partition
