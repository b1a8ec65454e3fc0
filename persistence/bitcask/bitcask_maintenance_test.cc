// Maintenance off the write path (issue 4, batched acks): with a Loop, drops
// and merges run on its timer, never inside Write or Tick; with
// background_file_work the unlinks and a merge's last renames run on the
// janitor's thread (real files only).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "io/sim/sim_loop.h"
#include "persistence/bitcask/bitcask_test_util.h"

namespace estuary::persistence::bitcask {
namespace {

TEST(BitcaskMaintenance, WithALoopNothingIsDroppedInsideWriteOrTick) {
  io::ManualClock clock;
  io::SimLoop loop(clock);
  Harness h;
  h.options.loop = &loop;
  h.options.max_file_size = 1 << 20;
  h.options.merge_dead_ratio = 0.5;
  h.options.merge_min_dead_bytes = 1;
  auto engine = h.Open();
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(engine->Put(Key(i), Value(i)));
  ASSERT_TRUE(engine->Rotate());
  size_t files = h.DataFiles().size();
  WriteBatch acks;
  for (int i = 0; i < 20; ++i) acks.Delete(Key(i));
  ASSERT_TRUE(engine->Write(acks));  // the whole file is dead now
  ASSERT_TRUE(engine->Tick(clock.NowMs()));
  EXPECT_EQ(h.DataFiles().size(), files);
  EXPECT_FALSE(h.Logged("dropped"));
  loop.AdvanceBy(h.options.maintenance_delay_ms);
  EXPECT_TRUE(h.Logged("dropped"));
  EXPECT_EQ(h.DataFiles().size(), files - 1);
  EXPECT_TRUE(Dump(*engine).empty());
  // Nothing left to do: the timer is not re-armed for ever.
  EXPECT_EQ(loop.pending_timers(), 0u);
}

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/estuary_bitcask_maintenance_XXXXXX";
    EXPECT_NE(::mkdtemp(tmpl), nullptr);
    path = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  size_t DataFiles() const {
    size_t n = 0;
    for (const auto& entry : std::filesystem::directory_iterator(path + "/db")) {
      n += ParseDataFileName(entry.path().filename().string()) ? 1 : 0;
    }
    return n;
  }
  std::string path;
};

// A queue acked to its end, then a remnant merged, with the file work on the
// janitor's thread: after Close nothing is pending and a reopen sees the
// same store.
TEST(BitcaskMaintenance, BackgroundFileWorkDropsAndMergesOnRealFiles) {
  for (SyncPolicy policy : {SyncPolicy::kAlways, SyncPolicy::kNone}) {
    TempDir dir;
    BitcaskOptions options;
    options.sync = policy;
    options.max_file_size = 16 << 10;
    options.merge_dead_ratio = 0.5;
    options.merge_min_dead_bytes = 1;
    options.background_file_work = true;
    std::vector<std::string> logs;
    options.log = [&logs](const std::string& line) { logs.push_back(line); };
    auto engine = BitcaskEngine::Open(io::PosixFileSystem::Instance(), dir.path + "/db", options);
    ASSERT_TRUE(engine);
    const std::string value(1000, 'v');
    for (int i = 0; i < 200; ++i) ASSERT_TRUE((*engine)->Put(Key(1000 + i), value));
    ASSERT_TRUE((*engine)->Tick(0));
    for (int i = 0; i < 190; ++i) {
      ASSERT_TRUE((*engine)->Delete(Key(1000 + i)));
      ASSERT_TRUE((*engine)->Tick(0));
    }
    ASSERT_TRUE((*engine)->Tick(0));  // the deletes stopped: the remnant merges
    std::map<std::string, std::string> model;
    for (int i = 190; i < 200; ++i) model[Key(1000 + i)] = value;
    EXPECT_EQ(Dump(**engine), model);
    ASSERT_TRUE((*engine)->Close());
    auto has = [&logs](const std::string& needle) {
      for (const auto& line : logs) {
        if (line.find(needle) != std::string::npos) return true;
      }
      return false;
    };
    EXPECT_TRUE(has("dropped"));
    EXPECT_TRUE(has("merged"));
    EXPECT_FALSE(std::filesystem::exists(dir.path + "/db/MERGE"));
    EXPECT_LE(dir.DataFiles(), 3u);
    auto reopened = BitcaskEngine::Open(io::PosixFileSystem::Instance(), dir.path + "/db", options);
    ASSERT_TRUE(reopened);
    EXPECT_EQ(Dump(**reopened), model);
    EXPECT_FALSE(has("scanning")) << "a hint written by the janitor was missing or bad";
  }
}

}  // namespace
}  // namespace estuary::persistence::bitcask
