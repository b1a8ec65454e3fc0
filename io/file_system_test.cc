#include "io/file_system.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace estuary::io {
namespace {

TEST(SimFileSystem, AppendReadAndSize) {
  SimFileSystem fs;
  ASSERT_TRUE(fs.CreateDir("d"));
  auto file = fs.OpenAppend("d/a");
  ASSERT_TRUE(file);
  ASSERT_TRUE((*file)->Append("hello "));
  ASSERT_TRUE((*file)->Append("world"));
  EXPECT_EQ(*(*file)->ReadAt(6, 100), "world");
  EXPECT_EQ(*(*file)->Size(), 11u);
  EXPECT_EQ(*fs.FileSize("d/a"), 11u);
  EXPECT_EQ(*fs.ListDir("d"), std::vector<std::string>{"a"});
}

TEST(SimFileSystem, CrashKeepsOnlySyncedBytesAndEntries) {
  SimFileSystem fs(7);
  ASSERT_TRUE(fs.CreateDir("d"));
  auto a = fs.OpenAppend("d/a");
  ASSERT_TRUE((*a)->Append("synced"));
  ASSERT_TRUE((*a)->Sync());
  ASSERT_TRUE(fs.SyncDir("d"));
  ASSERT_TRUE((*a)->Append("-lost"));
  auto b = fs.OpenAppend("d/b");  // entry never made durable
  ASSERT_TRUE((*b)->Append("x"));
  ASSERT_TRUE((*b)->Sync());
  fs.Crash(/*torn_tail=*/false);
  EXPECT_EQ(fs.Contents("d/a"), "synced");
  EXPECT_FALSE(fs.Exists("d/b"));
  EXPECT_FALSE((*a)->Append("more"));  // handles from before the crash are dead
}

TEST(SimFileSystem, TornTailKeepsAPrefixOfUnsyncedBytes) {
  bool saw_partial = false;
  for (uint64_t seed = 1; seed < 20; ++seed) {
    SimFileSystem fs(seed);
    auto a = fs.OpenAppend("a");
    ASSERT_TRUE((*a)->Append("base"));
    ASSERT_TRUE((*a)->Sync());
    ASSERT_TRUE(fs.SyncDir(""));
    ASSERT_TRUE((*a)->Append("0123456789"));
    fs.Crash(true);
    std::string got = fs.Contents("a");
    ASSERT_EQ(got.substr(0, 4), "base");
    EXPECT_EQ(std::string("base0123456789").substr(0, got.size()), got);
    saw_partial |= got.size() > 4 && got.size() < 14;
  }
  EXPECT_TRUE(saw_partial);
}

TEST(SimFileSystem, OverwriteKeepsSyncedBytesAndTearsTheChangedRangeInOrder) {
  bool saw_partial = false;
  for (uint64_t seed = 1; seed < 20; ++seed) {
    SimFileSystem fs(seed);
    auto a = fs.OpenWrite("a");
    ASSERT_TRUE(a);
    ASSERT_TRUE((*a)->Append(std::string(12, '\0')));  // a zero-filled tail
    ASSERT_TRUE((*a)->WriteAt(0, "base"));
    ASSERT_TRUE((*a)->Sync());
    ASSERT_TRUE(fs.SyncDir(""));
    ASSERT_TRUE((*a)->WriteAt(4, "0123"));
    ASSERT_TRUE((*a)->WriteAt(8, "4567"));
    EXPECT_EQ(*(*a)->Size(), 12u);
    fs.Crash(true);
    std::string got = fs.Contents("a");
    ASSERT_EQ(got.size(), 12u);
    ASSERT_EQ(got.substr(0, 4), "base");
    size_t kept = got.find_first_of('\0') == std::string::npos ? 12 : got.find_first_of('\0');
    EXPECT_EQ(got, std::string("base01234567").substr(0, kept) + std::string(12 - kept, '\0'));
    saw_partial |= kept > 4 && kept < 12;
  }
  EXPECT_TRUE(saw_partial);
}

TEST(SimFileSystem, RenameIsDurableOnlyAfterSyncDir) {
  SimFileSystem fs;
  auto a = fs.OpenAppend("a.tmp");
  ASSERT_TRUE((*a)->Append("v"));
  ASSERT_TRUE((*a)->Sync());
  ASSERT_TRUE(fs.SyncDir(""));
  ASSERT_TRUE(fs.Rename("a.tmp", "a"));
  fs.Crash();
  EXPECT_TRUE(fs.Exists("a.tmp"));
  EXPECT_FALSE(fs.Exists("a"));
  ASSERT_TRUE(fs.Rename("a.tmp", "a"));
  ASSERT_TRUE(fs.SyncDir(""));
  fs.Crash();
  EXPECT_EQ(fs.Contents("a"), "v");
}

TEST(SimFileSystem, NoSpaceFlipBitAndCrashAfter) {
  SimFileSystem fs;
  fs.SetCapacity(8);
  auto a = fs.OpenAppend("a");
  ASSERT_TRUE((*a)->Append("12345"));
  auto full = (*a)->Append("6789");
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code, FsErrc::kNoSpace);
  ASSERT_TRUE(fs.FlipBit("a", 0, 0));
  EXPECT_EQ(fs.Contents("a")[0], '0');
  fs.CrashAfter(1);
  EXPECT_TRUE((*a)->Sync());
  EXPECT_FALSE((*a)->Append("x"));
  EXPECT_TRUE(fs.dead());
}

TEST(PosixFileSystem, RoundTripInTempDir) {
  char tmpl[] = "/tmp/estuary_fs_XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  PosixFileSystem& fs = PosixFileSystem::Instance();
  ASSERT_TRUE(fs.CreateDir(dir + "/sub"));
  auto f = fs.OpenAppend(dir + "/sub/x");
  ASSERT_TRUE(f);
  ASSERT_TRUE((*f)->Append("abcdef"));
  ASSERT_TRUE((*f)->Sync());
  EXPECT_EQ(*(*f)->ReadAt(2, 3), "cde");
  ASSERT_TRUE((*f)->Truncate(4));
  EXPECT_EQ(*(*f)->Size(), 4u);
  ASSERT_TRUE(fs.Rename(dir + "/sub/x", dir + "/sub/y"));
  ASSERT_TRUE(fs.SyncDir(dir + "/sub"));
  EXPECT_EQ(*fs.ListDir(dir + "/sub"), std::vector<std::string>{"y"});
  EXPECT_EQ(*fs.FileSize(dir + "/sub/y"), 4u);
  auto r = fs.OpenRead(dir + "/sub/y");
  ASSERT_TRUE(r);
  EXPECT_FALSE((*r)->Append("no"));
  ASSERT_TRUE(fs.Remove(dir + "/sub/y"));
  EXPECT_FALSE(fs.Exists(dir + "/sub/y"));
  EXPECT_EQ(fs.OpenRead(dir + "/nope").error().code, FsErrc::kNotFound);
  auto w = fs.OpenWrite(dir + "/sub/z");
  ASSERT_TRUE(w);
  ASSERT_TRUE((*w)->WriteAt(0, std::string(8, '0')));
  ASSERT_TRUE((*w)->WriteAt(2, "ab"));
  ASSERT_TRUE((*w)->Append("tail"));
  ASSERT_TRUE((*w)->Sync());
  EXPECT_EQ(*(*w)->ReadAt(0, 100), "00ab0000tail");
  auto appending = fs.OpenAppend(dir + "/sub/z");
  EXPECT_EQ((*appending)->WriteAt(0, "x").error().code, FsErrc::kInvalid);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace estuary::io
