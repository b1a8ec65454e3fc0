// The active file under kAlways is zero-filled ahead of its data and written
// in place (format version 2, docs/bitcask_format.md, "Versions and
// preallocation"): the zero tail is the end of the data, never "torn"; torn
// records before it are; immutable files are trimmed; acknowledged writes
// survive power loss.
#include <gtest/gtest.h>

#include <random>

#include "persistence/bitcask/bitcask_test_util.h"

namespace estuary::persistence::bitcask {
namespace {

uint64_t DataEnd(Harness& h, const std::string& file) {
  return ScanDataFile(h.fs.Contents(file)).valid_end;
}

TEST(BitcaskFormatV2, ZeroHeaderEndsTheDataWithoutAProblem) {
  std::string data;
  AppendRecord(&data, 1, 0, 0, "a", "1");
  AppendRecord(&data, 2, 0, 0, "b", "2");
  size_t end = data.size();
  data.append(5000, '\0');
  DataScan scan = ScanDataFile(data);
  EXPECT_EQ(scan.entries.size(), 2u);
  EXPECT_EQ(scan.valid_end, end);
  EXPECT_TRUE(scan.zero_tail);
  EXPECT_TRUE(scan.problems.empty());
  // Fewer zero bytes than a header are an end too.
  DataScan short_tail = ScanDataFile(data.substr(0, end + 3));
  EXPECT_TRUE(short_tail.zero_tail);
  EXPECT_TRUE(short_tail.problems.empty());
}

TEST(BitcaskFormatV2, RecordsAfterAZeroGapAreDroppedAsTorn) {
  std::string data;
  AppendRecord(&data, 1, 0, 0, "a", "1");
  size_t end = data.size();
  data.append(100, '\0');
  AppendRecord(&data, 3, 0, 0, "c", "3");  // reached the disk before seq 2
  DataScan scan = ScanDataFile(data);
  EXPECT_EQ(scan.entries.size(), 1u);
  EXPECT_EQ(scan.valid_end, end);
  EXPECT_FALSE(scan.zero_tail);
  ASSERT_EQ(scan.problems.size(), 1u);
  EXPECT_NE(scan.problems[0].find("zero-filled gap"), std::string::npos);
}

TEST(BitcaskFormatV2, DamageWithAnUnwrittenBlockInItIsATornTail) {
  std::string data;
  AppendRecord(&data, 1, 0, 0, "a", "1");
  size_t end = data.size();
  // Seq 2 half written, an unwritten (zero) 4 KiB block, then seq 3 intact:
  // seq 3 was never synced before seq 2, so it must not survive alone.
  std::string second;
  AppendRecord(&second, 2, 0, 0, "b", std::string(10000, 'b'));
  data.append(second.substr(0, 100));
  data.append(9000, '\0');
  AppendRecord(&data, 3, 0, 0, "c", "3");
  DataScan scan = ScanDataFile(data);
  EXPECT_EQ(scan.entries.size(), 1u);
  EXPECT_EQ(scan.valid_end, end);
  // Without the zero block the same damage is skipped, as in version 1.
  std::string flipped;
  AppendRecord(&flipped, 1, 0, 0, "a", "1");
  std::string bad;
  AppendRecord(&bad, 2, 0, 0, "b", std::string(100, 'b'));
  bad[40] ^= 1;
  flipped.append(bad);
  AppendRecord(&flipped, 3, 0, 0, "c", "3");
  EXPECT_EQ(ScanDataFile(flipped).entries.size(), 2u);
}

TEST(BitcaskPreallocation, ActiveFileIsZeroFilledAheadAndTrimmedOnClose) {
  Harness h;
  auto engine = h.Open();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(engine->Put(Key(i), Value(i)));
  std::string active = h.DataFiles().back();
  uint64_t end = DataEnd(h, active);
  EXPECT_GE(*h.fs.FileSize(active), end + h.options.preallocate_bytes);
  ASSERT_TRUE(engine->Close());
  EXPECT_EQ(*h.fs.FileSize(active), end);
  engine = h.Open();
  EXPECT_FALSE(h.Logged("scanning"));
  EXPECT_FALSE(h.Logged("trimmed"));
  EXPECT_EQ(Dump(*engine).size(), 3u);
}

TEST(BitcaskPreallocation, ZeroedTailIsNotTorn) {
  Harness h;
  auto engine = h.Open();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(engine->Put(Key(i), Value(i)));
  std::string active = h.DataFiles().back();
  uint64_t end = DataEnd(h, active);
  h.fs.Crash(true);
  engine.reset();
  engine = h.Open();
  EXPECT_FALSE(h.Logged("torn"));
  EXPECT_TRUE(h.Logged("trimmed the zero-filled tail"));
  EXPECT_EQ(*h.fs.FileSize(active), end);
  EXPECT_EQ(Dump(*engine).size(), 3u);
}

TEST(BitcaskPreallocation, TornRecordFollowedByZerosIsTruncatedAndLogged) {
  Harness h;
  auto engine = h.Open();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(engine->Put(Key(i), Value(i)));
  std::string active = h.DataFiles().back();
  // Half of a record written in place, with the zero-filled space after it.
  ExpectHalfRecordTruncated(h, engine, active, DataEnd(h, active), /*in_place=*/true, 3);
}

// The process dies at every file-system call of a run of small writes that
// cross the zero-filled space many times (4 KiB steps): after power loss
// every acknowledged write is back, the survivors are a prefix of the
// writes, and the store takes writes again.
TEST(BitcaskPreallocation, CrashAtEveryCallAroundPreallocationKeepsAcknowledgedWrites) {
  for (int64_t crash_at = 0; crash_at < 120; ++crash_at) {
    Harness h(static_cast<uint64_t>(crash_at) + 1);
    h.options.preallocate_bytes = 4096;
    h.options.max_file_size = 16384;
    auto engine = h.Open();
    h.fs.CrashAfter(crash_at);
    int acknowledged = 0;
    int attempted = 0;
    for (int i = 0; i < 200 && !h.fs.dead(); ++i) {
      ++attempted;
      if (!engine->Put(Key(i), std::string(300, static_cast<char>('a' + i % 26)))) break;
      acknowledged = i + 1;
    }
    h.fs.Crash(true);
    engine.reset();
    engine = h.Open();
    ASSERT_TRUE(engine) << "crash_at " << crash_at;
    auto all = Dump(*engine);
    ASSERT_GE(static_cast<int>(all.size()), acknowledged) << "crash_at " << crash_at;
    ASSERT_LE(static_cast<int>(all.size()), attempted) << "crash_at " << crash_at;
    for (int i = 0; i < static_cast<int>(all.size()); ++i) {
      ASSERT_TRUE(all.count(Key(i))) << "not a prefix, crash_at " << crash_at;
    }
    ASSERT_TRUE(engine->Put("after", "crash"));
    ASSERT_TRUE(engine->Close());
    engine = h.Open();
    EXPECT_EQ(Dump(*engine).size(), all.size() + 1) << "crash_at " << crash_at;
  }
}

TEST(BitcaskPreallocation, CrashRightAfterPreallocatingLosesNothingAcknowledged) {
  Harness h;
  auto engine = h.Open();
  ASSERT_TRUE(engine->Put("a", "1"));
  // The first write into a fresh file writes its record and zero-fills the
  // first step (in 64 KiB writes): the process dies at the sync after them.
  ASSERT_TRUE(engine->Rotate());
  const int64_t fill_calls = static_cast<int64_t>(h.options.preallocate_bytes / (64u << 10));
  h.fs.CrashAfter(1 + fill_calls);
  EXPECT_FALSE(engine->Put("b", "2"));
  h.fs.Crash(false);
  engine.reset();
  engine = h.Open();
  EXPECT_FALSE(h.Logged("torn"));
  EXPECT_EQ(Dump(*engine), (std::map<std::string, std::string>{{"a", "1"}}));
  // Now the same write acknowledged, and power lost right after it: the
  // preallocated tail is durable, and trimmed at the next start.
  ASSERT_TRUE(engine->Put("b", "2"));
  h.fs.Crash(true);
  engine.reset();
  engine = h.Open();
  EXPECT_FALSE(h.Logged("torn"));
  EXPECT_TRUE(h.Logged("trimmed the zero-filled tail"));
  EXPECT_EQ(Dump(*engine), (std::map<std::string, std::string>{{"a", "1"}, {"b", "2"}}));
}

TEST(BitcaskPreallocation, RotationTrimsTheImmutableFileSoItsHintBoundsIt) {
  Harness h;
  h.options.max_file_size = 2048;
  auto engine = h.Open();
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(engine->Put(Key(i), Value(i)));
  ASSERT_TRUE(engine->Rotate());
  auto files = h.DataFiles();
  ASSERT_GT(files.size(), 2u);
  for (size_t i = 0; i + 1 < files.size(); ++i) {  // every immutable file
    std::string data = h.fs.Contents(files[i]);
    DataScan scan = ScanDataFile(data);
    EXPECT_EQ(scan.valid_end, data.size()) << files[i];
    EXPECT_FALSE(scan.zero_tail) << files[i];
  }
  h.fs.Crash(true);  // everything was synced by Rotate
  engine.reset();
  engine = h.Open();
  EXPECT_FALSE(h.Logged("is bad; scanning"));
  EXPECT_FALSE(h.Logged("truncated"));
  EXPECT_EQ(Dump(*engine).size(), 100u);
}

TEST(BitcaskPreallocation, VersionOneFilesAreReadAsTheyAre) {
  Harness h;
  h.options.preallocate_bytes = 0;  // appends: a version 1 layout
  auto engine = h.Open();
  auto model = Churn(*engine);
  h.fs.Crash(true);  // every write was synced (kAlways)
  engine.reset();
  h.options.preallocate_bytes = 1u << 20;
  engine = h.Open();
  EXPECT_EQ(Dump(*engine), model);
  EXPECT_FALSE(h.Logged("torn"));
  EXPECT_FALSE(h.Logged("skipped"));
}

TEST(BitcaskPreallocation, NoSpaceForTheTailStillWritesAndAWriteThatDoesNotFitFails) {
  Harness h;
  h.options.preallocate_bytes = 64u << 10;
  auto engine = h.Open();
  h.fs.SetCapacity(1000);  // no room for the zero-filled step
  ASSERT_TRUE(engine->Put("a", "1"));
  auto full = engine->Put("b", std::string(2000, 'x'));
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code, Errc::kNoSpace);
  EXPECT_EQ(*engine->Get("b"), std::nullopt);
  h.fs.SetCapacity(-1);
  ASSERT_TRUE(engine->Put("c", "3"));
  h.fs.Crash();
  engine.reset();
  engine = h.Open();
  EXPECT_EQ(Dump(*engine), (std::map<std::string, std::string>{{"a", "1"}, {"c", "3"}}));
}

}  // namespace
}  // namespace estuary::persistence::bitcask
