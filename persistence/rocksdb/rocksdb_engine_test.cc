// RocksDbEngine beyond the shared contract: sync policies (counted syncs),
// group commit on a Loop, upper-bounded prefix scans, stats from properties.
#include "persistence/rocksdb/rocksdb_engine.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "io/clock.h"
#include "io/sim/sim_loop.h"

namespace estuary::persistence {
namespace {

class RocksDbEngineTest : public ::testing::Test {
 protected:
  RocksDbEngineTest() {
    char tmpl[] = "/tmp/estuary_rocksdb_XXXXXX";
    EXPECT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    options_.log = [](const std::string&) {};
  }
  ~RocksDbEngineTest() override {
    engine_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Open() {
    auto engine = RocksDbEngine::Open(dir_ + "/db", options_);
    ASSERT_TRUE(engine) << engine.error().message;
    engine_ = std::move(*engine);
  }
  std::vector<std::string> Keys(std::string_view prefix) {
    std::vector<std::string> keys;
    EXPECT_TRUE(engine_->Scan(prefix, [&](std::string_view key, std::string_view) {
      keys.emplace_back(key);
      return true;
    }));
    return keys;
  }
  static std::string SequenceKey(uint32_t n) {
    std::string out = "q/";
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(n >> shift));
    return out;
  }

  std::string dir_;
  RocksDbOptions options_;
  std::unique_ptr<RocksDbEngine> engine_;
};

TEST_F(RocksDbEngineTest, AlwaysSyncsTheWalOnEveryWrite) {
  Open();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(engine_->Put("k" + std::to_string(i), "v"));
  EXPECT_EQ(engine_->GetStats().syncs, 3u);
  ASSERT_TRUE(engine_->Sync());  // nothing unsynced: no extra sync
  EXPECT_EQ(engine_->GetStats().syncs, 3u);
}

TEST_F(RocksDbEngineTest, AlwaysWithALoopSharesOneSyncPerLoopIteration) {
  io::ManualClock clock;
  io::SimLoop loop(clock);
  options_.loop = &loop;
  Open();
  int acknowledged = 0;
  for (int i = 0; i < 10; ++i) {
    WriteBatch batch;
    batch.Put(SequenceKey(i), "m");
    engine_->WriteAsync(batch, [&](Status s) {
      EXPECT_TRUE(s);
      ++acknowledged;
    });
  }
  EXPECT_EQ(acknowledged, 0);
  EXPECT_EQ(*engine_->Get(SequenceKey(3)), "m");  // readable before durable
  loop.RunUntilIdle();
  EXPECT_EQ(acknowledged, 10);
  EXPECT_EQ(engine_->GetStats().syncs, 1u);
}

TEST_F(RocksDbEngineTest, IntervalSyncsFromTheLoopTimer) {
  io::ManualClock clock(0);
  io::SimLoop loop(clock);
  options_.sync = SyncPolicy::kInterval;
  options_.sync_interval_ms = 100;
  options_.loop = &loop;
  Open();
  ASSERT_TRUE(engine_->Put("a", "1"));
  EXPECT_EQ(engine_->GetStats().syncs, 0u);
  loop.AdvanceBy(99);
  EXPECT_EQ(engine_->GetStats().syncs, 0u);
  loop.AdvanceBy(1);
  EXPECT_EQ(engine_->GetStats().syncs, 1u);
  loop.AdvanceBy(100);  // nothing written since: no sync
  EXPECT_EQ(engine_->GetStats().syncs, 1u);
  ASSERT_TRUE(engine_->Close());
  EXPECT_EQ(loop.pending_timers(), 0u);
}

TEST_F(RocksDbEngineTest, IntervalSyncsFromTickWithoutALoop) {
  options_.sync = SyncPolicy::kInterval;
  options_.sync_interval_ms = 100;
  Open();
  ASSERT_TRUE(engine_->Put("a", "1"));
  ASSERT_TRUE(engine_->Tick(50));
  EXPECT_EQ(engine_->GetStats().syncs, 0u);
  ASSERT_TRUE(engine_->Tick(100));
  EXPECT_EQ(engine_->GetStats().syncs, 1u);
}

TEST_F(RocksDbEngineTest, NoneSyncsOnlyOnRequest) {
  options_.sync = SyncPolicy::kNone;
  Open();
  ASSERT_TRUE(engine_->Put("a", "1"));
  ASSERT_TRUE(engine_->Tick(1'000'000));
  EXPECT_EQ(engine_->GetStats().syncs, 0u);
  ASSERT_TRUE(engine_->Sync());
  EXPECT_EQ(engine_->GetStats().syncs, 1u);
}

TEST_F(RocksDbEngineTest, ScanBoundsWorkForPrefixesEndingInFF) {
  Open();
  for (std::string key : {std::string("a\xff"), std::string("a\xff\x01"), std::string("b"),
                          std::string("\xff\xff"), std::string("\xff\xff\x02")}) {
    ASSERT_TRUE(engine_->Put(key, "v"));
  }
  EXPECT_EQ(Keys("a\xff"), (std::vector<std::string>{"a\xff", "a\xff\x01"}));
  EXPECT_EQ(Keys("\xff\xff"), (std::vector<std::string>{"\xff\xff", "\xff\xff\x02"}));
  EXPECT_EQ(Keys("a").size(), 2u);
}

TEST_F(RocksDbEngineTest, StatsFollowTheQueueThroughCompaction) {
  Open();
  std::string value(200, 'm');
  for (uint32_t n = 0; n < 1000; ++n) ASSERT_TRUE(engine_->Put(SequenceKey(n), value));
  ASSERT_TRUE(engine_->CompactAll());
  Stats full = engine_->GetStats();
  EXPECT_EQ(full.live_keys, 1000u);  // exact once compacted with no deletes
  EXPECT_GE(full.files, 1u);
  EXPECT_GT(full.live_bytes, 0u);
  WriteBatch ack;
  for (uint32_t n = 0; n < 1000; ++n) ack.Delete(SequenceKey(n));
  ASSERT_TRUE(engine_->Write(ack));
  EXPECT_TRUE(Keys("q/").empty());
  ASSERT_TRUE(engine_->CompactAll());
  Stats empty = engine_->GetStats();
  EXPECT_EQ(empty.live_keys, 0u);
  EXPECT_EQ(empty.files, 0u);
}

TEST_F(RocksDbEngineTest, ClosedEngineRefusesCompaction) {
  Open();
  ASSERT_TRUE(engine_->Close());
  auto s = engine_->CompactAll();
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, Errc::kClosed);
  EXPECT_EQ(engine_->GetStats().live_keys, 0u);
}

}  // namespace
}  // namespace estuary::persistence
