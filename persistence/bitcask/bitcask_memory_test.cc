// Measures the key directory's heap bytes per key (docs/bitcask_format.md,
// "Memory per key"). Prints the figure; fails only if it regresses badly.
//   build-persist/tests/persistence_test --gtest_filter='BitcaskMemory*'
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "persistence/bitcask/bitcask_engine.h"

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
  }
}

}  // namespace
}  // namespace estuary::persistence::bitcask
