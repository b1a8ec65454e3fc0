// Rotation off the write path (issue 4, BitcaskOptions::rotate_ahead): the
// janitor prepares the next data file and finishes a rotated one, and the
// syncs the engine owes still cover a rotated file whose job is pending.
// On SimFileSystem the janitor is deferred (jobs run only when drained), so
// crashes find that work pending; on real files it runs on its thread.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <random>

#include "io/sim/sim_loop.h"
#include "persistence/bitcask/bitcask_test_util.h"

namespace estuary::persistence::bitcask {
namespace {

const std::string kValue(300, 'r');

// Rotation every 3 records (329-byte records).
void RotateAhead(Harness& h, SyncPolicy policy, bool deferred = true) {
  h.options.sync = policy;
  h.options.max_file_size = 1024;
  h.options.rotate_ahead = true;
  h.options.defer_file_work_for_tests = deferred;
  h.options.merge_dead_ratio = 0;
}

// The process dies (its engine does nothing more on disk, pending janitor
// work included), then power is lost; the engine is reopened.
void KillAndReopen(Harness& h, std::unique_ptr<BitcaskEngine>& engine) {
  h.fs.CrashAfter(0);
  engine.reset();
  h.fs.Crash(true);
  h.options.loop = nullptr;
  h.options.defer_file_work_for_tests = false;
  engine = h.Open();
  ASSERT_NE(engine, nullptr);
}

TEST(BitcaskRotation, TheWriterTakesThePreparedFileWithoutASyncOrACreate) {
  Harness h;
  RotateAhead(h, SyncPolicy::kAlways);
  auto engine = h.Open();
  EXPECT_EQ(h.DataFiles().size(), 1u);  // the next file's job is queued
  ASSERT_TRUE(engine->WaitForFileWork());
  EXPECT_EQ(h.DataFiles().size(), 2u);  // prepared
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(engine->Put(Key(i), kValue));
  uint64_t syncs = h.fs.sync_count();
  ASSERT_TRUE(engine->Put(Key(3), kValue));  // rotates
  EXPECT_EQ(h.fs.sync_count(), syncs + 1) << "more than the write's own sync";
  EXPECT_EQ(h.DataFiles().size(), 2u) << "the writer created a file";
  ASSERT_TRUE(engine->WaitForFileWork());  // the old file trimmed, the next one made
  EXPECT_GT(h.fs.sync_count(), syncs + 1);
  EXPECT_EQ(h.DataFiles().size(), 3u);
  EXPECT_EQ(Dump(*engine).size(), 4u);
  ASSERT_TRUE(engine->Close());
  EXPECT_EQ(h.DataFiles().size(), 2u) << "the unused prepared file is left behind";
  engine = h.Open();
  EXPECT_EQ(Dump(*engine).size(), 4u);
  EXPECT_FALSE(h.Logged("scanning")) << "the janitor's hint was missing or bad";
  EXPECT_FALSE(h.Logged("trimmed"));
}

// Under none/interval rotation syncs the old file's unsynced records on the
// writer's path (a prefix survives power loss), and nothing else.
TEST(BitcaskRotation, UnderNoneTheWriterOnlySyncsTheOldFile) {
  Harness h;
  RotateAhead(h, SyncPolicy::kNone);
  auto engine = h.Open();
  ASSERT_TRUE(engine->WaitForFileWork());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(engine->Put(Key(i), kValue));
  uint64_t syncs = h.fs.sync_count();
  ASSERT_TRUE(engine->Put(Key(3), kValue));  // rotates
  EXPECT_EQ(h.fs.sync_count(), syncs + 1);
  EXPECT_EQ(h.DataFiles().size(), 2u) << "the writer created a file";
}

TEST(BitcaskRotation, AnUnfinishedPreparedFileIsNotWaitedFor) {
  Harness h;
  RotateAhead(h, SyncPolicy::kAlways);
  auto engine = h.Open();  // the next file's job stays queued
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(engine->Put(Key(i), kValue));
  EXPECT_EQ(Dump(*engine).size(), 10u);
  KillAndReopen(h, engine);  // with the jobs never run
  EXPECT_EQ(Dump(*engine).size(), 10u);
  EXPECT_FALSE(h.Logged("torn"));
}

TEST(BitcaskRotation, SyncCoversEveryFileWithRotationJobsPending) {
  for (SyncPolicy policy : {SyncPolicy::kNone, SyncPolicy::kInterval}) {
    Harness h;
    RotateAhead(h, policy);
    auto engine = h.Open();
    ASSERT_TRUE(engine->WaitForFileWork());
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(engine->Put(Key(i), kValue));
    ASSERT_TRUE(engine->Sync());
    KillAndReopen(h, engine);
    EXPECT_EQ(Dump(*engine).size(), 10u);
  }
}

TEST(BitcaskRotation, IntervalTickCoversEveryFileWithRotationJobsPending) {
  Harness h;
  RotateAhead(h, SyncPolicy::kInterval);
  h.options.sync_interval_ms = 100;
  auto engine = h.Open();
  ASSERT_TRUE(engine->WaitForFileWork());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(engine->Put(Key(i), kValue));
  ASSERT_TRUE(engine->Tick(1000));
  KillAndReopen(h, engine);
  EXPECT_EQ(Dump(*engine).size(), 5u);
}

TEST(BitcaskRotation, GroupCommitSyncsTheRotatedFileBeforeItsAcks) {
  io::ManualClock clock;
  io::SimLoop loop(clock);
  Harness h;
  RotateAhead(h, SyncPolicy::kAlways);
  h.options.loop = &loop;
  auto engine = h.Open();
  ASSERT_TRUE(engine->WaitForFileWork());
  int acknowledged = 0;
  for (int i = 0; i < 8; ++i) {  // two rotations in one loop iteration
    WriteBatch batch;
    batch.Put(Key(i), kValue);
    engine->WriteAsync(batch, [&](Status s) {
      EXPECT_TRUE(s);
      ++acknowledged;
    });
  }
  loop.RunUntilIdle();
  EXPECT_EQ(acknowledged, 8);
  KillAndReopen(h, engine);  // the rotations' jobs never ran
  EXPECT_EQ(Dump(*engine).size(), 8u);
}

TEST(BitcaskRotation, WithoutASyncACrashLeavesAPrefix) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Harness h(seed);
    RotateAhead(h, SyncPolicy::kNone);
    auto engine = h.Open();
    std::mt19937_64 random(seed);
    int written = 0;
    for (; written < 30; ++written) {
      ASSERT_TRUE(engine->Put(Key(written), kValue));
      if (random() % 5 == 0) {
        ASSERT_TRUE(engine->WaitForFileWork());
      }
      if (random() % 11 == 0) {
        ASSERT_TRUE(engine->Sync());
      }
    }
    KillAndReopen(h, engine);
    auto got = Dump(*engine);
    for (int i = 0; i < static_cast<int>(got.size()); ++i) {
      EXPECT_TRUE(got.count(Key(i))) << "seed " << seed << ": " << got.size()
                                     << " keys survived but not " << Key(i);
    }
  }
}

TEST(BitcaskRotation, APreparedFileLeftByACrashIsRemovedAtOpen) {
  Harness h;
  RotateAhead(h, SyncPolicy::kAlways);
  auto engine = h.Open();
  ASSERT_TRUE(engine->Put("a", "1"));
  ASSERT_TRUE(engine->WaitForFileWork());  // a zero-filled, synced next file
  ASSERT_EQ(h.DataFiles().size(), 2u);
  const std::string prepared = h.DataFiles().back();
  EXPECT_GT(*h.fs.FileSize(prepared), 0u);
  KillAndReopen(h, engine);
  EXPECT_EQ(Dump(*engine).size(), 1u);
  EXPECT_FALSE(h.Logged("torn"));
  EXPECT_FALSE(h.fs.Exists(prepared));
}

// Inline janitor: the process dies at each file-system call in turn while
// writes rotate; every acknowledged write survives and nothing else but the
// write in flight.
TEST(BitcaskRotation, CrashAtEveryCallAroundRotationsLosesNothingAcknowledged) {
  for (SyncPolicy policy : {SyncPolicy::kAlways, SyncPolicy::kNone}) {
    for (int64_t at = 0; at < 40; ++at) {
      Harness h(static_cast<uint64_t>(at) + 1);
      RotateAhead(h, policy, false);
      auto engine = h.Open();
      ASSERT_TRUE(engine->Put(Key(0), kValue));
      ASSERT_TRUE(engine->Sync());
      h.fs.CrashAfter(at);
      int acknowledged = 1;
      int synced = 1;
      for (int i = 1; i < 12; ++i) {
        if (!engine->Put(Key(i), kValue)) break;
        acknowledged = i + 1;
        if (policy == SyncPolicy::kNone && i % 4 == 0) {
          if (!engine->Sync()) break;
          synced = acknowledged;
        }
      }
      if (policy == SyncPolicy::kAlways) synced = acknowledged;
      KillAndReopen(h, engine);
      auto got = Dump(*engine);
      EXPECT_GE(static_cast<int>(got.size()), synced) << "crash after " << at << " calls";
      EXPECT_LE(static_cast<int>(got.size()), acknowledged + 1) << "crash after " << at;
      for (int i = 0; i < static_cast<int>(got.size()); ++i) {
        EXPECT_TRUE(got.count(Key(i))) << "crash after " << at << ": not a prefix";
      }
    }
  }
}

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/estuary_bitcask_rotation_XXXXXX";
    EXPECT_NE(::mkdtemp(tmpl), nullptr);
    path = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string path;
};

TEST(BitcaskRotation, OnRealFilesTheJanitorThreadRotates) {
  for (SyncPolicy policy : {SyncPolicy::kAlways, SyncPolicy::kInterval, SyncPolicy::kNone}) {
    TempDir dir;
    BitcaskOptions options;
    options.sync = policy;
    options.max_file_size = 16 << 10;
    options.background_file_work = true;
    options.rotate_ahead = true;
    std::vector<std::string> logs;
    options.log = [&logs](const std::string& line) { logs.push_back(line); };
    auto engine = BitcaskEngine::Open(io::PosixFileSystem::Instance(), dir.path + "/db", options);
    ASSERT_TRUE(engine);
    const std::string value(1000, 'v');
    for (int i = 0; i < 200; ++i) ASSERT_TRUE((*engine)->Put(Key(1000 + i), value));
    ASSERT_TRUE((*engine)->Sync());
    EXPECT_EQ(Dump(**engine).size(), 200u);
    ASSERT_TRUE((*engine)->Close());
    auto reopened = BitcaskEngine::Open(io::PosixFileSystem::Instance(), dir.path + "/db", options);
    ASSERT_TRUE(reopened);
    EXPECT_EQ(Dump(**reopened).size(), 200u);
    for (const auto& line : logs) {
      EXPECT_EQ(line.find("scanning"), std::string::npos) << line;
      EXPECT_EQ(line.find("torn"), std::string::npos) << line;
    }
  }
}

}  // namespace
}  // namespace estuary::persistence::bitcask
