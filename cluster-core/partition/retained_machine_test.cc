#include "cluster-core/partition/retained_machine.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>

#include "cluster-core/partition/partition_state.h"
#include "cluster-core/store/record_codec.h"
#include "model/hlc.h"

namespace estuary::partition {
namespace {

// A retained message stamped as node `node` would at wall time `ms`.
Message Stamped(std::string topic, std::string payload, uint16_t node, uint64_t ms) {
  Message message;
  message.topic = std::move(topic);
  message.payload = MakePayload(std::move(payload));
  message.retain = true;
  message.qos = QoS::kAtLeastOnce;
  message.id = MessageId{node, HybridLogicalClock::Pack(ms, 0), 1};
  return message;
}

raft::Entry EntryOf(std::string_view bytes, uint64_t ms, raft::Index index = 1) {
  raft::Entry entry;
  entry.index = index;
  entry.term = 1;
  entry.timestamp = HybridLogicalClock::Pack(ms, 0);
  entry.data.assign(bytes.begin(), bytes.end());
  return entry;
}

std::string Put(RetainedMachine& machine, const Message& message, uint64_t entry_ms) {
  return machine.Apply(EntryOf(EncodeRetainedPut(message), entry_ms));
}

std::map<std::string, std::string> Matched(const RetainedMachine& machine, std::string_view filter) {
  auto decoded = DecodeRetainedMatchResult(machine.Query(EncodeRetainedMatch(filter)));
  EXPECT_TRUE(decoded.has_value());
  std::map<std::string, std::string> out;
  if (!decoded) return out;
  for (const MessagePtr& message : *decoded) out[message->topic] = *message->payload;
  return out;
}

constexpr uint64_t kT0 = 1'800'000'000'000;  // wall ms

TEST(RetainedMachineTest, StoresMatchesAndRoundTripsMessages) {
  RetainedMachine machine([] { return static_cast<int64_t>(kT0); });
  Message message = Stamped("a/b", "v1", 2, kT0);
  message.properties.content_type = "text/plain";
  message.properties.user_properties.push_back({"k", "v"});
  EXPECT_EQ(Put(machine, message, kT0), "1");
  EXPECT_EQ(Put(machine, Stamped("a/c", "v2", 2, kT0 + 1), kT0 + 1), "1");
  EXPECT_EQ(Put(machine, Stamped("b", "v3", 3, kT0 + 2), kT0 + 2), "1");
  EXPECT_EQ(Matched(machine, "a/+"), (std::map<std::string, std::string>{{"a/b", "v1"}, {"a/c", "v2"}}));
  EXPECT_EQ(Matched(machine, "b"), (std::map<std::string, std::string>{{"b", "v3"}}));
  EXPECT_TRUE(Matched(machine, "c/#").empty());
  auto decoded = DecodeRetainedMatchResult(machine.Query(EncodeRetainedMatch("a/b")));
  ASSERT_TRUE(decoded && decoded->size() == 1);
  EXPECT_EQ((*decoded)[0]->properties, message.properties);
  EXPECT_EQ((*decoded)[0]->id, message.id);
}

// A value older than the one held (or than a clear's tombstone) is
// refused, whatever order the log delivers them in.
TEST(RetainedMachineTest, NewerIdWinsAndClearsLeaveTombstones) {
  RetainedMachine machine([] { return static_cast<int64_t>(kT0); });
  EXPECT_EQ(Put(machine, Stamped("t", "new", 1, kT0 + 10), kT0 + 10), "1");
  EXPECT_EQ(Put(machine, Stamped("t", "old", 2, kT0 + 5), kT0 + 11), "0");
  EXPECT_EQ(Matched(machine, "t").at("t"), "new");
  EXPECT_EQ(Put(machine, Stamped("t", "", 1, kT0 + 20), kT0 + 20), "1");  // clear
  EXPECT_TRUE(Matched(machine, "t").empty());
  EXPECT_EQ(Put(machine, Stamped("t", "stale", 3, kT0 + 15), kT0 + 21), "0");
  EXPECT_TRUE(Matched(machine, "#").empty());
  EXPECT_EQ(machine.store().tombstones(), 1u);
}

// Tombstones go after their TTL in entry time, the same on every replica;
// messages past their expiry are not answered even before the sweep.
TEST(RetainedMachineTest, SweepsFollowEntryTimeAndQueriesHideExpired) {
  int64_t wall = static_cast<int64_t>(kT0);
  RetainedMachine machine([&wall] { return wall; }, /*tombstone_ttl_ms=*/1000);
  Put(machine, Stamped("gone", "", 1, kT0), kT0);
  Message expiring = Stamped("exp", "x", 1, kT0);
  expiring.properties.expiry_at_ms = static_cast<int64_t>(kT0 + 500);
  Put(machine, expiring, kT0);
  EXPECT_EQ(Matched(machine, "exp").size(), 1u);
  wall = static_cast<int64_t>(kT0 + 600);
  EXPECT_TRUE(Matched(machine, "exp").empty());
  EXPECT_EQ(machine.store().tombstones(), 1u);
  // The next entry a sweep interval later drops both.
  Put(machine, Stamped("other", "y", 1, kT0 + RetainedMachine::kSweepEveryMs), kT0 + RetainedMachine::kSweepEveryMs);
  EXPECT_EQ(machine.store().tombstones(), 0u);
  EXPECT_EQ(machine.store().size(), 1u);
}

TEST(RetainedMachineTest, SnapshotRestoresTheSameStateTombstonesIncluded) {
  RetainedMachine machine([] { return static_cast<int64_t>(kT0); });
  Put(machine, Stamped("x/1", "a", 1, kT0), kT0);
  Put(machine, Stamped("x/2", "b", 1, kT0 + 1), kT0 + 1);
  Put(machine, Stamped("x/2", "", 1, kT0 + 2), kT0 + 2);
  RetainedMachine copy([] { return static_cast<int64_t>(kT0); });
  ASSERT_TRUE(copy.Restore(machine.Snapshot()));
  EXPECT_EQ(Matched(copy, "x/#"), Matched(machine, "x/#"));
  EXPECT_EQ(copy.store().tombstones(), 1u);
  // The tombstone still refuses an older value on the restored copy.
  EXPECT_EQ(Put(copy, Stamped("x/2", "late", 2, kT0 + 1), kT0 + 3), "0");
  EXPECT_EQ(copy.Snapshot(), machine.Snapshot());
  // Empty snapshot: empty state.
  ASSERT_TRUE(copy.Restore({}));
  EXPECT_TRUE(Matched(copy, "#").empty());
}

TEST(RetainedMachineTest, MalformedInputIsCountedNotApplied) {
  RetainedMachine machine([] { return static_cast<int64_t>(kT0); });
  EXPECT_EQ(machine.Apply(EntryOf("", kT0)), "0");
  EXPECT_EQ(machine.Apply(EntryOf("\x11xyz", kT0)), "0");
  EXPECT_EQ(machine.Apply(EntryOf("\x10garbage", kT0)), "0");
  EXPECT_EQ(machine.malformed(), 3u);
  EXPECT_EQ(machine.store().size(), 0u);
  std::vector<uint8_t> bad = machine.Snapshot();
  bad.push_back(7);
  EXPECT_FALSE(machine.Restore(bad));
  EXPECT_FALSE(DecodeRetainedMatchResult("\x05").has_value());
  EXPECT_FALSE(DecodeRetainedMatchResult(std::string("\x00\x00\x00\x01\x00\x00\x00\x03zzz", 11)).has_value());
  // An unknown query answers nothing.
  auto none = DecodeRetainedMatchResult(machine.Query("\x09"));
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->empty());
}

std::vector<PartitionId> Listed(const PartitionMachine& machine) {
  auto listed = DecodeRetainedIndexList(machine.Query(EncodeRetainedIndexList()));
  EXPECT_TRUE(listed.has_value());
  return listed.value_or(std::vector<PartitionId>{});
}

TEST(RetainedIndexTest, AddsOnceListsInOrderAndSnapshots) {
  RetainedIndex index;
  EXPECT_EQ(index.Apply(EntryOf(EncodeRetainedIndexAdd(42), kT0)), "1");
  EXPECT_EQ(index.Apply(EntryOf(EncodeRetainedIndexAdd(7), kT0)), "1");
  EXPECT_EQ(index.Apply(EntryOf(EncodeRetainedIndexAdd(42), kT0)), "0");
  EXPECT_EQ(index.Apply(EntryOf(EncodeRetainedIndexTouch(), kT0)), "1");
  EXPECT_EQ(Listed(index), (std::vector<PartitionId>{7, 42}));
  RetainedIndex copy;
  ASSERT_TRUE(copy.Restore(index.Snapshot()));
  EXPECT_EQ(Listed(copy), (std::vector<PartitionId>{7, 42}));
  EXPECT_EQ(index.Apply(EntryOf(std::string("\x20\x00", 2), kT0)), "0");
  EXPECT_EQ(index.malformed(), 1u);
  EXPECT_FALSE(DecodeRetainedIndexList(std::string("\x00\x00\x00\x02\x00\x00\x00\x01", 8)).has_value());
}

// One partition holds several kinds of state; each entry and query goes
// to the machine its first byte names, and the snapshot carries them all.
TEST(PartitionStateTest, DispatchesByTagAndSnapshotsEveryMachine) {
  PartitionState state([] { return static_cast<int64_t>(kT0); });
  const std::string claim = EncodeRegistryCommand(ClaimClient{"dev-1", ClientOwner{2, 9, 1}});
  EXPECT_EQ(state.Apply(EntryOf(claim, kT0)), EncodeClaimResult(std::nullopt));
  EXPECT_EQ(state.Apply(EntryOf(EncodeRetainedPut(Stamped("s/1", "on", 2, kT0)), kT0)), "1");
  EXPECT_EQ(state.Apply(EntryOf(EncodeRetainedIndexAdd(3), kT0)), "1");
  EXPECT_EQ(state.Apply(EntryOf("\x7fzz", kT0)), "0");
  EXPECT_EQ(state.malformed(), 1u);
  EXPECT_EQ(state.registry().owners().count("dev-1"), 1u);
  EXPECT_EQ(Matched(state.retained(), "s/#").at("s/1"), "on");
  EXPECT_EQ(Listed(state), (std::vector<PartitionId>{3}));
  EXPECT_TRUE(DecodeRetainedMatchResult(state.Query(EncodeRetainedMatch("s/1"))).value().size() == 1);
  EXPECT_TRUE(state.Query("\x7f").empty());

  PartitionState copy([] { return static_cast<int64_t>(kT0); });
  ASSERT_TRUE(copy.Restore(state.Snapshot()));
  EXPECT_EQ(copy.Snapshot(), state.Snapshot());
  EXPECT_EQ(copy.registry().owners().at("dev-1"), (ClientOwner{2, 9, 1}));
  EXPECT_EQ(Listed(copy), (std::vector<PartitionId>{3}));

  // A registry snapshot from before PartitionState restores the registry.
  ClientRegistry old;
  old.ApplyCommand(ClaimClient{"dev-2", ClientOwner{1, 1, 5}});
  ASSERT_TRUE(copy.Restore(old.Snapshot()));
  EXPECT_EQ(copy.registry().owners().size(), 1u);
  EXPECT_EQ(copy.registry().owners().count("dev-2"), 1u);
  EXPECT_TRUE(Matched(copy.retained(), "#").empty());
  EXPECT_TRUE(Listed(copy).empty());
  std::vector<uint8_t> bad = state.Snapshot();
  bad.pop_back();
  EXPECT_FALSE(copy.Restore(bad));
  ASSERT_TRUE(copy.Restore({}));
  EXPECT_TRUE(copy.registry().owners().empty());
}

// Seeds for partition_state_fuzz (fuzz_corpus/partition_state): the first
// byte picks the input, as that target's header says.
TEST(PartitionStateTest, SeedCorpus) {
  const char* dir = std::getenv("ESTUARY_WRITE_CORPUS");
  if (dir == nullptr) GTEST_SKIP() << "set ESTUARY_WRITE_CORPUS=dir to write the seeds";
  auto write = [&](const std::string& name, char selector, const std::string& body) {
    std::ofstream(std::string(dir) + "/" + name, std::ios::binary) << selector << body;
  };
  auto entry = [](const std::string& bytes, uint8_t step_seconds) {
    return std::string(1, static_cast<char>(bytes.size())) + static_cast<char>(step_seconds) + bytes;
  };
  const std::string put = EncodeRetainedPut(Stamped("a/b", "v1", 2, kT0));
  const std::string clear = EncodeRetainedPut(Stamped("a/b", "", 2, kT0 + 1));
  const std::string claim = EncodeRegistryCommand(ClaimClient{"dev", ClientOwner{1, 2, 3}});
  const std::string session_write = EncodeSessionWrite(
      SessionWrite{1, 2, {SessionOp{SessionOp::kPut, core::store::SessionKey("dev"), "r"},
                          SessionOp{SessionOp::kPut, core::store::SubscriptionKey("dev", "a/#"), "o"},
                          SessionOp{SessionOp::kDelete, core::store::QueuedKey("dev", 4), ""}}});
  const std::string release = EncodeRegistryCommand(ReleaseClient{"dev", ClientOwner{1, 2, 3}});
  write("run_all_kinds", 0,
        entry(claim, 0) + entry(put, 0) + entry(EncodeRetainedIndexAdd(7), 1) + entry(EncodeRetainedIndexTouch(), 0) +
            entry(EncodeRetainedMatch("a/#"), 0) + entry(EncodeRetainedIndexList(), 0) + entry(clear, 90) +
            entry(session_write, 0) + entry(EncodeSessionLoad("dev"), 0) + entry(release, 1));
  PartitionState state([] { return static_cast<int64_t>(kT0); });
  state.Apply(EntryOf(claim, kT0));
  state.Apply(EntryOf(put, kT0));
  state.Apply(EntryOf(EncodeRetainedIndexAdd(7), kT0));
  state.Apply(EntryOf(session_write, kT0));
  const std::vector<uint8_t> snapshot = state.Snapshot();
  write("snapshot_all_kinds", 1, std::string(snapshot.begin(), snapshot.end()));
  write("match_result", 2, state.Query(EncodeRetainedMatch("#")));
  write("index_list", 2, state.Query(EncodeRetainedIndexList()));
  write("session_load", 2, state.Query(EncodeSessionLoad("dev")));
}

}  // namespace
}  // namespace estuary::partition
