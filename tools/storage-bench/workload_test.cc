// The queue workload end to end on both engines, small, in a temp dir.
#include "tools/storage-bench/workload.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace estuary::storage_bench {
namespace {

class WorkloadTest : public ::testing::TestWithParam<std::string> {
 protected:
  WorkloadTest() {
    char tmpl[] = "/tmp/estuary_storage_bench_test_XXXXXX";
    EXPECT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  ~WorkloadTest() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_P(WorkloadTest, AppendsReadsAcksAndReopensEveryMessage) {
  for (auto sync : {persistence::SyncPolicy::kAlways, persistence::SyncPolicy::kNone}) {
    RunConfig config{GetParam(), sync, 100, 7, 300, 100, 1, dir_ + "/" + GetParam()};
    RunResult run = RunQueueWorkload(config);
    ASSERT_TRUE(run.error.empty()) << run.error;
    EXPECT_EQ(run.append.messages, 300u);
    EXPECT_EQ(run.append.operations, 43u);  // ceil(300 / 7) write batches
    EXPECT_EQ(run.get.messages, 300u);
    EXPECT_EQ(run.read.messages, 300u);
    EXPECT_EQ(run.ack.operations, 43u);
    EXPECT_EQ(run.steady.messages, 300u);  // through a queue held at depth 1000
    EXPECT_EQ(run.steady.operations, 43u);
    EXPECT_GT(run.heap_bytes_per_key, 0);
    EXPECT_GT(run.disk_after_append, 300u * 100);
    EXPECT_LE(run.append.p50_us, run.append.p99_us);
    if (sync == persistence::SyncPolicy::kAlways) {
      EXPECT_GE(run.syncs, 43u);
    }
  }
}

TEST_P(WorkloadTest, StartupTimesOpenWithAndWithoutHints) {
  StartupConfig config{GetParam(), 1.0 / 1024, 1024, 1, dir_ + "/" + GetParam()};  // 1 MiB
  StartupResult run = RunStartup(config);
  ASSERT_TRUE(run.error.empty()) << run.error;
  EXPECT_EQ(run.messages, 1024u);
  EXPECT_GT(run.disk_bytes, 1024u * 1024);
  EXPECT_GT(run.open_ms, 0);
  EXPECT_EQ(run.open_without_hints_ms >= 0, GetParam() == "bitcask");
  EXPECT_FALSE(std::filesystem::exists(config.dir));
}

INSTANTIATE_TEST_SUITE_P(Engines, WorkloadTest, ::testing::Values("bitcask", "rocksdb"));

}  // namespace
}  // namespace estuary::storage_bench
