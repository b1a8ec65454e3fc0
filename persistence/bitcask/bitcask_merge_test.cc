// Merge tests for BitcaskEngine on a SimFileSystem: full and incremental
// merges, crashes at every step, interaction with writes and the Loop.
#include <gtest/gtest.h>

#include <random>

#include "io/sim/sim_loop.h"
#include "persistence/bitcask/bitcask_test_util.h"

namespace estuary::persistence::bitcask {
namespace {

TEST(BitcaskCrash, MergeDropsAnUnreadableRecordAndKeepsTheRest) {
  Harness h;
  h.options.max_file_size = 1024;
  auto engine = h.Open();
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(engine->Put(Key(i), Value(i)));
  ASSERT_TRUE(engine->Close());
  std::string first = h.DataFiles().front();
  ASSERT_TRUE(h.fs.FlipBit(first, OffsetOf(h, first, Key(2)) + kRecordHeaderSize + 1, 0));
  engine = h.Open();  // the hint still lists Key(2)
  ASSERT_TRUE(engine->Merge());
  EXPECT_TRUE(h.Logged("merge drops unreadable record"));
  EXPECT_EQ(*engine->Get(Key(2)), std::nullopt);
  EXPECT_EQ(Dump(*engine).size(), 39u);
  ASSERT_TRUE(engine->Close());
  engine = h.Open();
  EXPECT_EQ(Dump(*engine).size(), 39u);
}

TEST(BitcaskCrash, CrashAtEveryStepOfAMergeLosesNothing) {
  bool merge_completed = false;
  int committed_but_unfinished = 0;  // crashes that recovery must finish
  for (int64_t ops = 0; ops < 200 && !merge_completed; ++ops) {
    Harness h(static_cast<uint64_t>(ops) + 1);
    h.options.max_file_size = 1024;
    auto engine = h.Open();
    auto model = Churn(*engine);
    h.fs.CrashAfter(ops);
    merge_completed = static_cast<bool>(engine->Merge());
    h.fs.Crash(true);
    committed_but_unfinished += h.fs.Exists("db/MERGE") ? 1 : 0;
    engine.reset();
    engine = h.Open();
    ASSERT_NE(engine, nullptr) << "crash after " << ops << " ops";
    EXPECT_EQ(Dump(*engine), model) << "crash after " << ops << " ops";
    // And the store keeps working, including a second merge.
    ASSERT_TRUE(engine->Put("new", "1"));
    ASSERT_TRUE(engine->Merge());
    model["new"] = "1";
    engine.reset();
    engine = h.Open();
    EXPECT_EQ(Dump(*engine), model) << "crash after " << ops << " ops";
  }
  EXPECT_TRUE(merge_completed);
  EXPECT_GT(committed_but_unfinished, 0);
}

TEST(BitcaskCrash, MergeReclaimsDeadBytesAndDeletedKeysStayDeleted) {
  Harness h;
  h.options.max_file_size = 1024;
  auto engine = h.Open();
  auto model = Churn(*engine);
  Stats before = engine->GetStats();
  ASSERT_TRUE(engine->Merge());
  Stats after = engine->GetStats();
  EXPECT_EQ(after.dead_bytes, 0u);
  EXPECT_EQ(after.live_bytes, before.live_bytes);
  EXPECT_LT(after.files, before.files);
  // Deletes written after the merge land in a file with a smaller id than
  // the merge output that holds the older value: sequence numbers decide.
  ASSERT_TRUE(engine->Delete(Key(1)));
  model.erase(Key(1));
  ASSERT_TRUE(engine->Close());
  engine = h.Open();
  EXPECT_EQ(Dump(*engine), model);
}

TEST(BitcaskMerge, IncrementalMergeInterleavesWithWrites) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    Harness h(seed);
    h.options.max_file_size = 1024;
    auto engine = h.Open();
    auto model = Churn(*engine);
    ASSERT_TRUE(engine->StartMerge());
    ASSERT_TRUE(engine->merging());
    std::mt19937_64 random(seed);
    int steps = 0;
    while (engine->merging()) {
      ASSERT_TRUE(engine->MergeStep(150));
      ++steps;
      std::string key = Key(static_cast<int>(random() % 40));
      if (random() % 3 == 0) {
        ASSERT_TRUE(engine->Delete(key));
        model.erase(key);
      } else {
        std::string value = "during-merge-" + std::to_string(steps);
        ASSERT_TRUE(engine->Put(key, value));
        model[key] = value;
      }
      ASSERT_EQ(Dump(*engine), model) << "seed " << seed << " step " << steps;
    }
    EXPECT_GT(steps, 3);
    ASSERT_TRUE(engine->Close());
    engine = h.Open();
    EXPECT_EQ(Dump(*engine), model) << "seed " << seed;
  }
}

TEST(BitcaskMerge, CrashInTheMiddleOfAnIncrementalMergeLosesNothing) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    Harness h(seed);
    h.options.max_file_size = 1024;
    auto engine = h.Open();
    auto model = Churn(*engine);
    ASSERT_TRUE(engine->StartMerge());
    std::mt19937_64 random(seed);
    h.fs.CrashAfter(static_cast<int64_t>(random() % 40));
    for (int step = 0; engine->merging() && !h.fs.dead(); ++step) {
      if (!engine->MergeStep(200)) break;
      if (engine->Put("step" + std::to_string(step), "x")) model["step" + std::to_string(step)] = "x";
    }
    h.fs.Crash(true);
    engine.reset();
    engine = h.Open();
    EXPECT_EQ(Dump(*engine), model) << "seed " << seed;
  }
}

// Found by the model test: a merge under kNone deleted the old record of a
// key overwritten (unsynced) during the merge; a crash then lost both.
TEST(BitcaskMerge, MergeCommitSyncsWritesThatSupersedeDeletedRecords) {
  Harness h;
  h.options.sync = SyncPolicy::kNone;
  auto engine = h.Open();
  ASSERT_TRUE(engine->Put("a", "old-a"));
  ASSERT_TRUE(engine->Put("z", "old-z"));
  ASSERT_TRUE(engine->StartMerge());  // rotates: both are durable
  ASSERT_TRUE(engine->Put("a", "new-a"));  // unsynced, supersedes a record
  ASSERT_TRUE(engine->Delete("z"));        // being merged away
  while (engine->merging()) ASSERT_TRUE(engine->MergeStep(1));
  h.fs.Crash(/*torn_tail=*/false);
  engine.reset();
  engine = h.Open();
  EXPECT_EQ(Dump(*engine), (std::map<std::string, std::string>{{"a", "new-a"}}));
}

TEST(BitcaskMerge, LoopDrivesAMergeStartedByTick) {
  io::ManualClock clock;
  io::SimLoop loop(clock);
  Harness h;
  h.options.loop = &loop;
  h.options.max_file_size = 1024;
  h.options.merge_dead_ratio = 0.1;
  h.options.merge_min_dead_bytes = 100;
  h.options.merge_step_bytes = 100;
  auto engine = h.Open();
  auto model = Churn(*engine);
  uint64_t dead_before = engine->GetStats().dead_bytes;
  ASSERT_TRUE(engine->Tick(clock.NowMs()));
  EXPECT_FALSE(engine->merging());  // never inside Tick: on the Loop's timer
  // The first pass sees live bytes that fell since the files rotated and
  // waits; the second, with no writes between, merges.
  loop.AdvanceBy(h.options.maintenance_delay_ms);
  EXPECT_FALSE(engine->merging());
  loop.AdvanceBy(h.options.maintenance_delay_ms);
  EXPECT_TRUE(engine->merging());
  int steps = 0;
  for (; engine->merging() && steps < 1000; ++steps) {
    ASSERT_TRUE(engine->Put("during", std::to_string(steps)));  // writers go on
    loop.AdvanceBy(1);
  }
  model["during"] = std::to_string(steps - 1);
  EXPECT_FALSE(engine->merging());
  EXPECT_GT(steps, 3);
  // What is dead now are the overwrites of "during" made while merging.
  EXPECT_LT(engine->GetStats().dead_bytes, dead_before / 4);
  EXPECT_EQ(Dump(*engine), model);
}

TEST(BitcaskCrash, TickMergesWhenDeadRatioIsReached) {
  Harness h;
  h.options.max_file_size = 1024;
  h.options.merge_dead_ratio = 0.1;
  h.options.merge_min_dead_bytes = 100;
  auto engine = h.Open();
  auto model = Churn(*engine);
  Stats before = engine->GetStats();
  ASSERT_GT(before.dead_bytes, before.live_bytes);
  ASSERT_TRUE(engine->Tick(0));  // live bytes fell since rotation: waits
  EXPECT_FALSE(h.Logged("merged"));
  EXPECT_TRUE(h.Logged("dropped"));  // files with nothing live need no merge
  ASSERT_TRUE(engine->Tick(0));
  EXPECT_TRUE(h.Logged("merged"));
  // What is left dead: the active file's.
  EXPECT_LT(engine->GetStats().dead_bytes, 1024u);
  EXPECT_EQ(Dump(*engine), model);
  engine.reset();
  engine = h.Open();
  EXPECT_EQ(Dump(*engine), model);
}

// Acks consuming a queue: a merge started halfway through a file would copy
// the live rest, records about to be deleted anyway. A file whose live bytes
// fell since the last pass waits; once the deletes stop it is merged, alone:
// files below the dead ratio are left as they are.
TEST(BitcaskMerge, AFileBeingDrainedWaitsAndOnlyFilesPastTheRatioAreMerged) {
  Harness h;
  h.options.max_file_size = 1 << 20;
  h.options.merge_dead_ratio = 0.5;
  h.options.merge_min_dead_bytes = 1;
  auto engine = h.Open();
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(engine->Put(Key(i), Value(i)));
  ASSERT_TRUE(engine->Rotate());  // file 1: the queue's head
  for (int i = 20; i < 40; ++i) ASSERT_TRUE(engine->Put(Key(i), Value(i)));
  ASSERT_TRUE(engine->Rotate());  // file 2: all live
  std::vector<std::string> files = h.DataFiles();
  ASSERT_EQ(files.size(), 3u);
  ASSERT_TRUE(engine->Tick(0));
  for (int i = 0; i < 16; ++i) {
    ASSERT_TRUE(engine->Delete(Key(i)));
    ASSERT_TRUE(engine->Tick(0));
    ASSERT_FALSE(h.Logged("merged")) << "merged while its live bytes fell, at " << i;
  }
  ASSERT_TRUE(engine->Tick(0));  // the deletes stopped
  EXPECT_TRUE(h.Logged("merged 1 files into 1"));
  EXPECT_FALSE(h.fs.Exists(files[0]));
  EXPECT_TRUE(h.fs.Exists(files[1]));
  std::map<std::string, std::string> model;
  for (int i = 16; i < 40; ++i) model[Key(i)] = Value(i);
  EXPECT_EQ(Dump(*engine), model);
  h.fs.Crash(true);
  engine.reset();
  engine = h.Open();
  EXPECT_EQ(Dump(*engine), model);
}

// A merge of some files keeps the tombstones that still delete puts in a
// file left out of it; without them the puts would come back on restart.
TEST(BitcaskMerge, AMergeOfSomeFilesKeepsTombstonesOfPutsInOtherFiles) {
  Harness h;
  h.options.max_file_size = 1 << 20;
  h.options.merge_dead_ratio = 0.5;
  h.options.merge_min_dead_bytes = 1;
  auto engine = h.Open();
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(engine->Put(Key(i), Value(i)));
  ASSERT_TRUE(engine->Rotate());  // A: 15 of 20 stay live
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(engine->Delete(Key(i)));
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(engine->Put("x" + Key(i), Value(i)));
  ASSERT_TRUE(engine->Rotate());  // B: tombstones of A's puts, and x*
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(engine->Put("x" + Key(i), "new"));
  std::map<std::string, std::string> model;
  for (int i = 5; i < 20; ++i) model[Key(i)] = Value(i);
  for (int i = 0; i < 20; ++i) model["x" + Key(i)] = "new";
  ASSERT_TRUE(engine->Tick(0));  // sets the baseline: nothing falls later
  ASSERT_TRUE(engine->Tick(0));
  EXPECT_TRUE(h.Logged("merged 1 files into 1"));  // B alone, its tombstones kept
  EXPECT_EQ(Dump(*engine), model);
  h.fs.Crash(true);
  engine.reset();
  engine = h.Open();
  EXPECT_EQ(Dump(*engine), model);
  // With A merged too (by command), the tombstones go.
  ASSERT_TRUE(engine->Merge());
  EXPECT_EQ(engine->GetStats().dead_bytes, 0u);
  engine.reset();
  engine = h.Open();
  EXPECT_EQ(Dump(*engine), model);
}

// The head of an acked queue: immutable files whose every record was
// superseded (no live record, no tombstone) are deleted by Tick without a
// merge copying anything; a crash after it keeps the deletes.
TEST(BitcaskMerge, TickDropsFilesWithNothingLiveWithoutCopying) {
  for (SyncPolicy policy : {SyncPolicy::kAlways, SyncPolicy::kNone}) {
    Harness h;
    h.options.sync = policy;
    h.options.max_file_size = 1024;
    h.options.merge_dead_ratio = 0.99;  // no merge: only the drop
    h.options.merge_min_dead_bytes = 1u << 30;
    auto engine = h.Open();
    for (int i = 0; i < 60; ++i) ASSERT_TRUE(engine->Put(Key(i), Value(i)));
    ASSERT_TRUE(engine->Rotate());
    size_t files_before = h.DataFiles().size();
    for (int i = 0; i < 40; ++i) ASSERT_TRUE(engine->Delete(Key(i)));  // unsynced under none
    ASSERT_TRUE(engine->Tick(0));
    EXPECT_TRUE(h.Logged("dropped"));
    EXPECT_FALSE(h.Logged("merged"));
    EXPECT_LT(h.DataFiles().size(), files_before);
    std::map<std::string, std::string> model;
    for (int i = 40; i < 60; ++i) model[Key(i)] = Value(i);
    EXPECT_EQ(Dump(*engine), model);
    h.fs.Crash(true);
    engine.reset();
    engine = h.Open();
    EXPECT_EQ(Dump(*engine), model) << "policy " << static_cast<int>(policy);
  }
}

// A file of tombstones with nothing live goes once no file left holds an
// older record: after the files of the puts it deletes. A crash at any point
// of those drops brings nothing back.
TEST(BitcaskMerge, TombstoneFilesAreDroppedAfterTheFilesTheyDeleteFrom) {
  bool completed = false;
  for (int64_t ops = 0; ops < 100 && !completed; ++ops) {
    Harness h(static_cast<uint64_t>(ops) + 1);
    h.options.sync = SyncPolicy::kNone;
    h.options.max_file_size = 1 << 20;
    h.options.merge_dead_ratio = 0.99;
    h.options.merge_min_dead_bytes = 1u << 30;
    auto engine = h.Open();
    ASSERT_TRUE(engine->Put("a", "1"));
    ASSERT_TRUE(engine->Put("b", "2"));
    ASSERT_TRUE(engine->Rotate());
    ASSERT_TRUE(engine->Delete("a"));  // nothing live here, "b" still is there
    ASSERT_TRUE(engine->Rotate());
    ASSERT_TRUE(engine->Tick(0));
    ASSERT_EQ(h.DataFiles().size(), 3u) << "a tombstone went before its put";
    ASSERT_TRUE(engine->Delete("b"));
    ASSERT_TRUE(engine->Put("c", "3"));  // unsynced under none
    h.fs.CrashAfter(ops);
    completed = static_cast<bool>(engine->Tick(0)) && !h.fs.dead();
    if (completed) {
      EXPECT_EQ(h.DataFiles().size(), 1u);  // the active file only
    }
    h.fs.Crash(true);
    engine.reset();
    engine = h.Open();
    ASSERT_NE(engine, nullptr);
    auto contents = Dump(*engine);
    EXPECT_EQ(contents.count("a"), 0u) << "crash after " << ops << " ops";
    // "b"'s tombstone and "c" were never synced unless a drop synced them.
    if (contents.count("c")) {
      EXPECT_EQ(contents.count("b"), 0u) << "crash after " << ops << " ops";
    }
  }
  EXPECT_TRUE(completed);
}

}  // namespace
}  // namespace estuary::persistence::bitcask
