// RaftStore: encodings, the log layout under overwrites and snapshots, a
// restart of a raft node from a MemoryEngine, and a power loss under
// Bitcask on a SimFileSystem.
#include "cluster-core/raft/raft_store.h"

#include <gtest/gtest.h>

#include "base/pinned_bytes.h"
#include "io/file_system.h"
#include "persistence/bitcask/bitcask_engine.h"
#include "persistence/memory_engine.h"

namespace estuary::raft {
namespace {

Entry MakeEntry(Index index, Term term, uint8_t byte) {
  return Entry{.term = term, .index = index, .timestamp = 1000 + index,
               .type = EntryType::kNormal, .write_id = {3, index}, .data = {byte, byte}};
}

TEST(RaftStore, EncodingsRoundTripAndRejectDamage) {
  const Entry entry = MakeEntry(7, 2, 9);
  EXPECT_EQ(DecodeEntry(EncodeEntry(entry)), entry);
  const std::string bytes = EncodeEntry(entry);
  EXPECT_FALSE(DecodeEntry(bytes.substr(0, bytes.size() - 1)).has_value());
  EXPECT_FALSE(DecodeEntry(bytes + "x").has_value());

  Snapshot snapshot{.index = 5, .term = 2, .timestamp = 77,
                    .config = Config{.voters = {1, 2, 3}, .learners = {4}},
                    .dedup = {DedupRecord{{3, 4}, 70}}, .data = {1, 2, 3}};
  auto decoded = DecodeSnapshot(EncodeSnapshot(snapshot));
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->config, snapshot.config);
  EXPECT_EQ(decoded->dedup, snapshot.dedup);
  EXPECT_EQ(decoded->data, snapshot.data);
  EXPECT_EQ(EncodeSnapshot(*decoded), EncodeSnapshot(snapshot));
  EXPECT_FALSE(DecodeSnapshot(EncodeSnapshot(snapshot).substr(3)).has_value());
}

TEST(RaftStore, OverwritesTruncateAndSnapshotsDropTheLog) {
  persistence::MemoryEngine engine;
  RaftStore store(engine, "g1");
  ASSERT_TRUE(store.Load().has_value());
  Ready ready;
  ready.hard_state = HardState{1, 1, 0};
  for (Index i = 1; i <= 5; ++i) ready.entries.push_back(MakeEntry(i, 1, 'a'));
  ASSERT_TRUE(store.Save(ready).has_value());
  // A new leader overwrites from index 3 with two entries: 5 goes.
  Ready overwrite;
  overwrite.entries = {MakeEntry(3, 2, 'b'), MakeEntry(4, 2, 'b')};
  ASSERT_TRUE(store.Save(overwrite).has_value());
  auto loaded = RaftStore(engine, "g1").Load();
  ASSERT_TRUE(loaded.has_value());
  ASSERT_EQ(loaded->entries.size(), 4u);
  EXPECT_EQ(loaded->entries[2], MakeEntry(3, 2, 'b'));
  EXPECT_EQ(loaded->hard_state, (HardState{1, 1, 0}));
  // Entries that do not follow the log are refused.
  Ready gap;
  gap.entries = {MakeEntry(9, 2, 'c')};
  EXPECT_FALSE(store.Save(gap).has_value());

  // Compaction at 2 keeps 3..4; a leader's snapshot at 10 drops everything.
  Ready compact;
  compact.snapshot = Snapshot{.index = 2, .term = 1};
  ASSERT_TRUE(store.Save(compact).has_value());
  loaded = RaftStore(engine, "g1").Load();
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->snapshot.index, 2u);
  ASSERT_EQ(loaded->entries.size(), 2u);
  EXPECT_EQ(loaded->entries.front().index, 3u);
  Ready install;
  install.snapshot = Snapshot{.index = 10, .term = 3};
  install.restore_snapshot = true;
  ASSERT_TRUE(store.Save(install).has_value());
  loaded = RaftStore(engine, "g1").Load();
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->snapshot.index, 10u);
  EXPECT_TRUE(loaded->entries.empty());
  size_t keys = 0;
  ASSERT_TRUE(engine.Scan(store.EntryPrefix(), [&](std::string_view, std::string_view) {
    ++keys;
    return true;
  }));
  EXPECT_EQ(keys, 0u);  // no stale entry keys left behind
  // Another group's keys are apart.
  EXPECT_TRUE(RaftStore(engine, "g2").Load()->entries.empty());
}

// Drives a single-voter raft whose every Ready goes through the store.
struct Node {
  Node(persistence::StorageEngine& engine, uint64_t now) : store(engine, "meta") {
    Storage storage = store.Load().value();
    storage.bootstrap = Config{.voters = {1}};
    Options options;
    options.id = 1;
    options.mode = Mode::kTimestamp;
    raft = std::make_unique<Raft>(options, std::move(storage), now);
  }
  void Handle(Ready ready) {
    while (!ready.Empty()) {
      ASSERT_TRUE(store.Save(ready).has_value());
      if (ready.snapshot && ready.restore_snapshot) applied = ready.snapshot->data;
      for (size_t i = 0; i < ready.committed.size(); ++i) {
        const Entry& entry = ready.committed[i];
        const bool duplicate =
            std::find(ready.duplicates.begin(), ready.duplicates.end(), entry.index) !=
            ready.duplicates.end();
        if (entry.type == EntryType::kNormal && !duplicate) {
          applied.insert(applied.end(), entry.data.begin(), entry.data.end());
        }
      }
      ready = raft->Advance(ready);
    }
  }
  RaftStore store;
  std::unique_ptr<Raft> raft;
  std::vector<uint8_t> applied;  // the state machine: every applied byte
};

TEST(RaftStore, NodeRestartsFromMemoryEngineWithItsLogSnapshotAndWindow) {
  persistence::MemoryEngine engine;
  std::vector<uint8_t> state;
  Index commit = 0;
  {
    Node node(engine, 1'000);
    node.Handle(node.raft->Tick(5'000));
    ASSERT_EQ(node.raft->role(), Role::kLeader);
    node.Handle(node.raft->Tick(5'100));  // lease: a lone voter is its own quorum
    for (uint8_t i = 1; i <= 10; ++i) {
      auto proposed = node.raft->Propose({i}, 5'100 + i, WriteId{9, i});
      ASSERT_TRUE(proposed.has_value());
      node.Handle(std::move(proposed->ready));
    }
    node.Handle(node.raft->Compact(node.raft->applied() - 3, node.applied));
    // (The snapshot data is the applied bytes; raft treats it as opaque.)
    for (uint8_t i = 11; i <= 13; ++i) {
      auto proposed = node.raft->Propose({i}, 5'200 + i, WriteId{9, i});
      ASSERT_TRUE(proposed.has_value());
      node.Handle(std::move(proposed->ready));
    }
    state = node.applied;
    commit = node.raft->commit();
    EXPECT_EQ(state.size(), 13u);
  }
  Node restarted(engine, 9'000);
  EXPECT_EQ(restarted.raft->term(), 1u);
  EXPECT_EQ(restarted.raft->commit(), commit);
  EXPECT_EQ(restarted.raft->log().LastIndex(), commit);
  EXPECT_GT(restarted.raft->log().snapshot()->index, 0u);
  // The de-duplication window came back with the snapshot and the log:
  // a retry of write 2 (before the snapshot) is still a duplicate.
  restarted.Handle(restarted.raft->Tick(20'000));
  ASSERT_EQ(restarted.raft->role(), Role::kLeader);
  restarted.Handle(restarted.raft->Tick(20'100));
  auto retry = restarted.raft->Propose({2}, 20'101, WriteId{9, 2});
  ASSERT_TRUE(retry.has_value());
  const Index retry_index = retry->index;
  Ready ready = std::move(retry->ready);
  bool reported = false;
  while (!ready.Empty()) {
    ASSERT_TRUE(restarted.store.Save(ready).has_value());
    for (Index index : ready.duplicates) reported = reported || index == retry_index;
    ready = restarted.raft->Advance(ready);
  }
  EXPECT_TRUE(reported);
}

// Power loss under Bitcask with SyncPolicy::kNone: whatever survives is
// the state after some prefix of the saves (each save is one atomic
// batch), never a torn mix; everything synced survives.
TEST(RaftStore, PowerLossKeepsAPrefixOfSavesOnBitcask) {
  size_t seeds_that_lost_saves = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    io::SimFileSystem fs(seed);
    persistence::bitcask::BitcaskOptions options;
    options.sync = persistence::SyncPolicy::kNone;
    options.log = [](const std::string&) {};
    Index synced = 0;
    Index saved = 0;
    {
      auto engine = persistence::bitcask::BitcaskEngine::Open(fs, "raft", options);
      ASSERT_TRUE(engine.has_value());
      RaftStore store(**engine, "g");
      ASSERT_TRUE(store.Load().has_value());
      for (Index i = 1; i <= 40; ++i) {
        Ready ready;
        ready.hard_state = HardState{1, 1, i - 1};
        ready.entries = {MakeEntry(i, 1, static_cast<uint8_t>(i))};
        ASSERT_TRUE(store.Save(ready).has_value());
        saved = i;
        if (i == 10 + seed) {
          ASSERT_TRUE((*engine)->Sync().has_value());
          synced = i;
        }
      }
      fs.Crash(true);
    }
    auto engine = persistence::bitcask::BitcaskEngine::Open(fs, "raft", options);
    ASSERT_TRUE(engine.has_value()) << engine.error().message;
    auto loaded = RaftStore(**engine, "g").Load();
    ASSERT_TRUE(loaded.has_value()) << "seed " << seed << ": " << loaded.error().message;
    const Index last = loaded->entries.size();
    EXPECT_GE(last, synced) << "seed " << seed;
    EXPECT_LE(last, saved);
    for (Index i = 1; i <= last; ++i) {
      EXPECT_EQ(loaded->entries[i - 1], MakeEntry(i, 1, static_cast<uint8_t>(i)));
    }
    EXPECT_EQ(loaded->hard_state.commit, last - 1) << "hard state and log from one batch";
    if (last < saved) ++seeds_that_lost_saves;
  }
  EXPECT_GT(seeds_that_lost_saves, 0u);  // the crash really dropped unsynced saves
}

// The stored records' bytes, pinned (issue 23: the byte codec was
// replaced; a node must read the log it wrote before).
TEST(RaftStore, BytesArePinned) {
  EXPECT_EQ(base::PinnedBytes(EncodeEntry(MakeEntry(7, 2, 9))), "58 bytes fnv1a64=b0e89197e33897c2");
  Snapshot snapshot{.index = 5,
                    .term = 2,
                    .timestamp = 77,
                    .config = Config{.voters = {1, 2, 3}, .learners = {4}},
                    .dedup = {DedupRecord{{3, 4}, 70}},
                    .data = {1, 2, 3}};
  EXPECT_EQ(base::PinnedBytes(EncodeSnapshot(snapshot)), "123 bytes fnv1a64=1063fcc40faca06e");
  EXPECT_EQ(base::PinnedBytes(EncodeConfig(snapshot.config)), "48 bytes fnv1a64=773c84d242a84363");
}

}  // namespace
}  // namespace estuary::raft
