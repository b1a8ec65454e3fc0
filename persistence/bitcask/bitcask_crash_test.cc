// Crash, corruption and sync-policy tests for BitcaskEngine on a
// SimFileSystem.
#include <gtest/gtest.h>

#include <random>

#include "io/sim/sim_loop.h"
#include "persistence/bitcask/bitcask_test_util.h"

namespace estuary::persistence::bitcask {
namespace {

TEST(BitcaskCrash, AcknowledgedWritesUnderAlwaysSurviveCrash) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    Harness h(seed);
    h.options.max_file_size = 2048;
    auto engine = h.Open();
    for (int i = 0; i < 200; ++i) ASSERT_TRUE(engine->Put(Key(i), Value(i)));
    for (int i = 0; i < 200; i += 3) ASSERT_TRUE(engine->Delete(Key(i)));
    h.fs.Crash(true);
    engine.reset();
    engine = h.Open();
    for (int i = 0; i < 200; ++i) {
      auto got = engine->Get(Key(i));
      ASSERT_TRUE(got);
      EXPECT_EQ(*got, i % 3 == 0 ? std::nullopt : std::optional<std::string>(Value(i)))
          << "seed " << seed << " key " << i;
    }
  }
}

TEST(BitcaskCrash, UnsyncedWritesMayVanishButSurvivorsAreAPrefix) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Harness h(seed);
    h.options.sync = SyncPolicy::kNone;
    auto engine = h.Open();
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(engine->Put(Key(i), Value(i)));
    h.fs.Crash(true);
    engine.reset();
    engine = h.Open();
    auto all = Dump(*engine);
    for (int i = 0; i < static_cast<int>(all.size()); ++i) {
      EXPECT_EQ(all[Key(i)], Value(i)) << "seed " << seed;
    }
    ASSERT_TRUE(engine->Put("after", "crash"));  // the store is writable
  }
}

TEST(BitcaskCrash, TornTailIsTruncatedAndLogged) {
  Harness h;
  // Plain appends (the layout of every policy but kAlways, and of version 1
  // files); the preallocated variant is in bitcask_preallocation_test.cc.
  h.options.preallocate_bytes = 0;
  auto engine = h.Open();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(engine->Put(Key(i), Value(i)));
  std::string active = h.DataFiles().back();
  ExpectHalfRecordTruncated(h, engine, active, *h.fs.FileSize(active), /*in_place=*/false, 3);
}

TEST(BitcaskCrash, BitFlipInAnOldFileLosesOnlyThatRecord) {
  for (bool keep_hint : {true, false}) {
    Harness h;
    h.options.max_file_size = 1024;
    auto engine = h.Open();
    for (int i = 0; i < 40; ++i) ASSERT_TRUE(engine->Put(Key(i), Value(i)));
    ASSERT_TRUE(engine->Close());
    std::string first = h.DataFiles().front();
    uint64_t at = OffsetOf(h, first, Key(1)) + kRecordHeaderSize + 2;
    ASSERT_TRUE(h.fs.FlipBit(first, at, 3));
    if (!keep_hint) {
      ASSERT_TRUE(h.fs.Remove(first.substr(0, first.size() - 5) + ".hint"));
    }
    engine = h.Open();
    for (int i = 0; i < 40; ++i) {
      auto got = engine->Get(Key(i));
      if (i == 1) {
        // With a hint the key is known but its record fails its CRC; with a
        // scan the record is skipped.
        if (keep_hint) {
          ASSERT_FALSE(got);
          EXPECT_EQ(got.error().code, Errc::kCorruption);
        } else {
          ASSERT_TRUE(got);
          EXPECT_EQ(*got, std::nullopt);
          EXPECT_TRUE(h.Logged("skipped corrupt bytes"));
        }
      } else {
        ASSERT_TRUE(got) << i;
        EXPECT_EQ(*got, Value(i)) << i;
      }
    }
  }
}

TEST(BitcaskSync, IntervalPolicyWithoutALoopSyncsOnTick) {
  Harness h;
  h.options.sync = SyncPolicy::kInterval;
  h.options.sync_interval_ms = 100;
  auto engine = h.Open();
  ASSERT_TRUE(engine->Tick(1000));
  uint64_t syncs = h.fs.sync_count();
  ASSERT_TRUE(engine->Put("a", "1"));
  ASSERT_TRUE(engine->Tick(1050));
  EXPECT_EQ(h.fs.sync_count(), syncs);
  ASSERT_TRUE(engine->Tick(1100));
  EXPECT_EQ(h.fs.sync_count(), syncs + 1);
  EXPECT_EQ(engine->GetStats().syncs, 1u);
}

TEST(BitcaskCrash, BadHintFallsBackToScanningData) {
  Harness h;
  h.options.max_file_size = 1024;
  auto engine = h.Open();
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(engine->Put(Key(i), Value(i)));
  ASSERT_TRUE(engine->Delete(Key(5)));
  auto before = Dump(*engine);
  ASSERT_TRUE(engine->Close());
  std::string hint = h.DataFiles().front();
  hint = hint.substr(0, hint.size() - 5) + ".hint";
  ASSERT_TRUE(h.fs.FlipBit(hint, 10, 0));
  engine = h.Open();
  EXPECT_TRUE(h.Logged("is bad; scanning"));
  EXPECT_EQ(Dump(*engine), before);
}

TEST(BitcaskCrash, NoSpaceFailsTheWriteAndKeepsTheStoreUsable) {
  Harness h;
  // Plain appends (the layout of every policy but kAlways, and of version 1
  // files); the preallocated variant is in bitcask_preallocation_test.cc.
  h.options.preallocate_bytes = 0;
  auto engine = h.Open();
  ASSERT_TRUE(engine->Put("a", "1"));
  h.fs.SetCapacity(200);
  auto full = engine->Put("b", std::string(500, 'x'));
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code, Errc::kNoSpace);
  EXPECT_EQ(*engine->Get("a"), "1");
  EXPECT_EQ(*engine->Get("b"), std::nullopt);
  h.fs.SetCapacity(-1);
  ASSERT_TRUE(engine->Put("b", "2"));
  h.fs.Crash();
  engine.reset();
  engine = h.Open();
  EXPECT_EQ(Dump(*engine), (std::map<std::string, std::string>{{"a", "1"}, {"b", "2"}}));
}

TEST(BitcaskCrash, BatchIsAllOrNothingAcrossACrash) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    Harness h(seed);
    h.options.sync = SyncPolicy::kNone;
    auto engine = h.Open();
    ASSERT_TRUE(engine->Put("k0", "old"));
    ASSERT_TRUE(engine->Sync());
    WriteBatch batch;
    for (int i = 0; i < 20; ++i) batch.Put("k" + std::to_string(i), std::string(40, 'n'));
    ASSERT_TRUE(engine->Write(batch));
    h.fs.Crash(true);
    engine.reset();
    engine = h.Open();
    auto all = Dump(*engine);
    bool applied = all.size() == 20;
    EXPECT_TRUE(applied || (all.size() == 1 && all["k0"] == "old")) << "seed " << seed;
  }
}

TEST(BitcaskSync, GroupCommitSharesOneSyncPerLoopIteration) {
  io::ManualClock clock;
  io::SimLoop loop(clock);
  Harness h;
  h.options.loop = &loop;
  auto engine = h.Open();
  uint64_t syncs = h.fs.sync_count();
  int acknowledged = 0;
  for (int i = 0; i < 10; ++i) {
    WriteBatch batch;
    batch.Put(Key(i), Value(i));
    engine->WriteAsync(batch, [&](Status s) {
      EXPECT_TRUE(s);
      ++acknowledged;
    });
  }
  EXPECT_EQ(acknowledged, 0);
  EXPECT_EQ(*engine->Get(Key(3)), Value(3));  // readable before durable
  loop.RunUntilIdle();
  EXPECT_EQ(acknowledged, 10);
  EXPECT_EQ(h.fs.sync_count(), syncs + 1);
  h.fs.Crash(true);
  engine.reset();
  h.options.loop = nullptr;
  engine = h.Open();
  EXPECT_EQ(Dump(*engine).size(), 10u);
}

TEST(BitcaskSync, IntervalPolicySyncsOnTheLoopTimer) {
  io::ManualClock clock;
  io::SimLoop loop(clock);
  Harness h;
  h.options.loop = &loop;
  h.options.sync = SyncPolicy::kInterval;
  h.options.sync_interval_ms = 100;
  auto engine = h.Open();
  uint64_t syncs = h.fs.sync_count();
  ASSERT_TRUE(engine->Put("a", "1"));
  EXPECT_EQ(h.fs.sync_count(), syncs);
  loop.AdvanceBy(50);
  EXPECT_EQ(h.fs.sync_count(), syncs);
  loop.AdvanceBy(60);
  EXPECT_EQ(h.fs.sync_count(), syncs + 1);
  h.fs.Crash(true);
  engine.reset();
  h.options.loop = nullptr;
  engine = h.Open();
  EXPECT_EQ(*engine->Get("a"), "1");
}

TEST(BitcaskSync, EveryRestartReadsHintsNotData) {
  Harness h;
  h.options.max_file_size = 1024;
  auto engine = h.Open();
  auto model = Churn(*engine);
  ASSERT_TRUE(engine->Close());
  for (int restart = 0; restart < 3; ++restart) {
    engine = h.Open();
    EXPECT_EQ(Dump(*engine), model);
    ASSERT_TRUE(engine->Close());
  }
  EXPECT_FALSE(h.Logged("scanning"));
  EXPECT_FALSE(h.Logged("truncated"));
}

}  // namespace
}  // namespace estuary::persistence::bitcask

namespace estuary::persistence::bitcask {
namespace {

TEST(BitcaskFiles, ValueLargerThanMaxFileSizeGetsAFileOfItsOwn) {
  Harness h;
  h.options.max_file_size = 256;
  auto engine = h.Open();
  ASSERT_TRUE(engine->Put("small", "1"));
  std::string big(1000, 'b');
  ASSERT_TRUE(engine->Put("big", big));
  ASSERT_TRUE(engine->Put("after", "2"));
  EXPECT_EQ(*engine->Get("big"), big);
  ASSERT_TRUE(engine->Close());
  engine = h.Open();
  EXPECT_EQ(Dump(*engine).size(), 3u);
  EXPECT_EQ(*engine->Get("big"), big);
  ASSERT_TRUE(engine->Merge());
  EXPECT_EQ(*engine->Get("big"), big);
}

}  // namespace
}  // namespace estuary::persistence::bitcask
