// Measures the key directory's heap bytes per key (docs/bitcask_format.md,
// "Memory per key"). Prints the figure; fails only if it regresses badly.
//   build-persist/tests/persistence_test --gtest_filter='BitcaskMemory*'
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "persistence/bitcask/bitcask_engine.h"
#include "persistence/bitcask/bitcask_test_util.h"
#include "persistence/bitcask/key_dir_key.h"

namespace estuary::persistence::bitcask {
namespace {

double HeapBytesPerKey(size_t key_length, int keys) {
  char tmpl[] = "/tmp/estuary_keydir_XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return -1;
  BitcaskOptions options;
  options.sync = SyncPolicy::kNone;
  options.log = [](const std::string&) {};
  auto engine = BitcaskEngine::Open(io::PosixFileSystem::Instance(), tmpl, options);
  if (!engine) return -1;
  size_t before = mallinfo2().uordblks;
  char key[64];
  for (int i = 0; i < keys; ++i) {
    std::snprintf(key, sizeof(key), "%0*d", static_cast<int>(key_length), i);
    if (!(*engine)->Put(key, "v")) return -1;
  }
  size_t after = mallinfo2().uordblks;
  (*engine).reset();
  std::filesystem::remove_all(tmpl);
  return static_cast<double>(after - before) / keys;
}

TEST(BitcaskMemory, KeyDirectoryBytesPerKey) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer replaces malloc; mallinfo2 measures nothing";
#endif
  constexpr int kKeys = 100000;
  for (size_t length : {8, 15, 16, 24, 40}) {
    double per_key = HeapBytesPerKey(length, kKeys);
    std::printf("keydir heap bytes per key, %zu-byte keys: %.1f\n", length, per_key);
    EXPECT_GT(per_key, 0);
    EXPECT_LT(per_key, 96 + static_cast<double>(length) + 48);
    // Keys up to 28 bytes live in the node: one 96-byte chunk per key.
    if (length <= KeyDirKey::kInlineBytes) {
      EXPECT_LE(per_key, 97);
    }
  }
}

TEST(BitcaskMemory, KeyDirKeyHoldsShortKeysInPlaceAndLongOnesOnTheHeap) {
  for (size_t length : {0, 1, 27, 28, 29, 100, 5000}) {
    std::string bytes(length, '\0');
    for (size_t i = 0; i < length; ++i) bytes[i] = static_cast<char>(i * 7 + length);
    KeyDirKey key(bytes);
    EXPECT_EQ(key.view(), bytes);
    KeyDirKey copy(key);
    EXPECT_EQ(copy.view(), bytes);
    KeyDirKey assigned(std::string_view("x"));
    assigned = key;
    EXPECT_EQ(assigned.view(), bytes);
    assigned = KeyDirKey(std::string(40, 'y'));
    EXPECT_EQ(assigned.view(), std::string(40, 'y'));
    EXPECT_EQ(key.size(), length);
  }
  KeyDirLess less;
  EXPECT_TRUE(less(KeyDirKey(std::string_view("ab")), std::string_view("abc")));
  EXPECT_TRUE(less(std::string(30, 'a'), KeyDirKey(std::string(29, 'a') + "b")));
  EXPECT_FALSE(less(KeyDirKey(std::string_view("\xff")), std::string_view("\x01")));
}

// Keys longer than the in-place 28 bytes, through every path that copies or
// compares them: overwrite, delete, scan by prefix, merge, reopen from hints
// and by scanning.
TEST(BitcaskMemory, LongKeysSurviveMergeAndRestart) {
  Harness h;
  h.options.sync = SyncPolicy::kNone;
  h.options.max_file_size = 4096;
  auto engine = h.Open();
  std::map<std::string, std::string> model;
  auto long_key = [](int i) { return std::string(40, 'p') + "/" + std::to_string(i); };
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 60; ++i) {
      std::string key = i % 2 ? long_key(i) : Key(i);
      std::string value = Value(i) + std::to_string(round);
      ASSERT_TRUE(engine->Put(key, value));
      model[key] = value;
    }
    for (int i = round; i < 60; i += 5) {
      std::string key = i % 2 ? long_key(i) : Key(i);
      ASSERT_TRUE(engine->Delete(key));
      model.erase(key);
    }
  }
  EXPECT_EQ(Dump(*engine), model);
  size_t long_keys = 0;
  ASSERT_TRUE(engine->Scan(std::string(40, 'p'), [&](std::string_view key, std::string_view) {
    EXPECT_EQ(key.substr(0, 40), std::string(40, 'p'));
    ++long_keys;
    return true;
  }));
  EXPECT_EQ(long_keys, static_cast<size_t>(std::count_if(
                           model.begin(), model.end(),
                           [](const auto& kv) { return kv.first[0] == 'p'; })));
  ASSERT_TRUE(engine->Merge());
  EXPECT_EQ(Dump(*engine), model);
  ASSERT_TRUE(engine->Close());
  engine = h.Open();
  EXPECT_EQ(Dump(*engine), model);
  for (const std::string& file : h.DataFiles()) {
    (void)h.fs.Remove(file.substr(0, file.size() - 5) + ".hint");
  }
  engine.reset();
  engine = h.Open();
  EXPECT_EQ(Dump(*engine), model);
}

}  // namespace
}  // namespace estuary::persistence::bitcask
