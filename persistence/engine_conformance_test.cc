// The StorageEngine contract, run against every engine (typed tests).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "io/file_system.h"
#include "persistence/bitcask/bitcask_engine.h"
#include "persistence/memory_engine.h"
#include "persistence/rocksdb/rocksdb_engine.h"

namespace estuary::persistence {
namespace {

// kExactStats: live_keys is an exact count. RocksDB reports
// rocksdb.estimate-num-keys (entries minus twice the deletes), so the tests
// count its keys by scanning instead.
struct MemoryFactory {
  static constexpr bool kExactStats = true;
  std::unique_ptr<StorageEngine> Open() { return std::make_unique<MemoryEngine>(); }
};

struct BitcaskFactory {
  static constexpr bool kExactStats = true;
  io::SimFileSystem fs{42};
  std::unique_ptr<StorageEngine> Open() {
    bitcask::BitcaskOptions options;
    options.max_file_size = 4096;  // small, so tests cross file rotations
    options.log = [](const std::string&) {};
    auto engine = bitcask::BitcaskEngine::Open(fs, "db", options);
    EXPECT_TRUE(engine) << engine.error().message;
    return std::move(*engine);
  }
};

// The same engine on the real file system, in a fresh temporary directory.
struct PosixBitcaskFactory {
  static constexpr bool kExactStats = true;
  std::string dir;
  PosixBitcaskFactory() {
    char tmpl[] = "/tmp/estuary_bitcask_XXXXXX";
    EXPECT_NE(::mkdtemp(tmpl), nullptr);
    dir = tmpl;
  }
  ~PosixBitcaskFactory() { std::filesystem::remove_all(dir); }
  std::unique_ptr<StorageEngine> Open() {
    bitcask::BitcaskOptions options;
    options.max_file_size = 4096;
    options.log = [](const std::string&) {};
    auto engine = bitcask::BitcaskEngine::Open(io::PosixFileSystem::Instance(), dir + "/db",
                                               options);
    EXPECT_TRUE(engine) << engine.error().message;
    return std::move(*engine);
  }
};

// RocksDB on a fresh temporary directory. RocksDB does its own file IO (its
// Env), not through io::FileSystem, so it has no SimFileSystem variant: the
// crash and fault tests on SimFileSystem stay Bitcask-only, and its
// durability is checked by kill -9 in process_durability_test.cc.
struct RocksDbFactory {
  static constexpr bool kExactStats = false;
  std::string dir;
  RocksDbFactory() {
    char tmpl[] = "/tmp/estuary_rocksdb_XXXXXX";
    EXPECT_NE(::mkdtemp(tmpl), nullptr);
    dir = tmpl;
  }
  ~RocksDbFactory() { std::filesystem::remove_all(dir); }
  std::unique_ptr<StorageEngine> Open() {
    RocksDbOptions options;
    options.log = [](const std::string&) {};
    auto engine = RocksDbEngine::Open(dir + "/db", options);
    EXPECT_TRUE(engine) << engine.error().message;
    return std::move(*engine);
  }
};

template <typename Factory>
class EngineConformance : public ::testing::Test {
 protected:
  void SetUp() override { engine_ = factory_.Open(); }
  std::optional<std::string> Get(std::string_view key) {
    auto value = engine_->Get(key);
    EXPECT_TRUE(value);
    return value ? *value : std::nullopt;
  }
  std::vector<std::string> Keys(std::string_view prefix, std::string_view start = {}) {
    std::vector<std::string> keys;
    auto s = engine_->Scan(prefix, start.empty() ? prefix : start,
                           [&](std::string_view key, std::string_view) {
                             keys.emplace_back(key);
                             return true;
                           });
    EXPECT_TRUE(s);
    return keys;
  }
  // The engine's key count: Stats where exact, else a scan.
  uint64_t LiveKeys() {
    if constexpr (Factory::kExactStats) {
      return engine_->GetStats().live_keys;
    } else {
      return Keys("").size();
    }
  }
  Factory factory_;
  std::unique_ptr<StorageEngine> engine_;
};

using Engines =
    ::testing::Types<MemoryFactory, BitcaskFactory, PosixBitcaskFactory, RocksDbFactory>;
TYPED_TEST_SUITE(EngineConformance, Engines);

TYPED_TEST(EngineConformance, PutThenGetReturnsTheLatestValue) {
  ASSERT_TRUE(this->engine_->Put("a", "1"));
  ASSERT_TRUE(this->engine_->Put("a", "2"));
  EXPECT_EQ(this->Get("a"), "2");
  EXPECT_EQ(this->Get("missing"), std::nullopt);
}

TYPED_TEST(EngineConformance, EmptyValueAndBinaryBytesRoundTrip) {
  std::string binary("\0\xff\x01key", 6);
  ASSERT_TRUE(this->engine_->Put(binary, std::string("\0\0", 2)));
  ASSERT_TRUE(this->engine_->Put("empty", ""));
  EXPECT_EQ(this->Get(binary), std::string("\0\0", 2));
  EXPECT_EQ(this->Get("empty"), "");
}

TYPED_TEST(EngineConformance, DeleteRemovesAndDeletingMissingKeyIsOk) {
  ASSERT_TRUE(this->engine_->Put("a", "1"));
  ASSERT_TRUE(this->engine_->Delete("a"));
  ASSERT_TRUE(this->engine_->Delete("never"));
  EXPECT_EQ(this->Get("a"), std::nullopt);
  EXPECT_EQ(this->LiveKeys(), 0u);
}

TYPED_TEST(EngineConformance, WriteBatchAppliesInOrder) {
  WriteBatch batch;
  batch.Put("k1", "a");
  batch.Put("k2", "b");
  batch.Delete("k1");
  batch.Put("k3", "c");
  batch.Put("k3", "d");
  ASSERT_TRUE(this->engine_->Write(batch));
  EXPECT_EQ(this->Get("k1"), std::nullopt);
  EXPECT_EQ(this->Get("k2"), "b");
  EXPECT_EQ(this->Get("k3"), "d");
  EXPECT_EQ(this->LiveKeys(), 2u);
}

TYPED_TEST(EngineConformance, ScanIsOrderedAndLimitedToThePrefix) {
  for (const char* key : {"q/2", "q/10", "p/1", "q/1", "r", "q"}) {
    ASSERT_TRUE(this->engine_->Put(key, key));
  }
  EXPECT_EQ(this->Keys("q/"), (std::vector<std::string>{"q/1", "q/10", "q/2"}));
  EXPECT_EQ(this->Keys(""), (std::vector<std::string>{"p/1", "q", "q/1", "q/10", "q/2", "r"}));
  EXPECT_EQ(this->Keys("q/", "q/10"), (std::vector<std::string>{"q/10", "q/2"}));
  EXPECT_TRUE(this->Keys("none").empty());
}

TYPED_TEST(EngineConformance, ScanStopsWhenTheVisitorSaysSo) {
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(this->engine_->Put("k" + std::to_string(i), "v"));
  int seen = 0;
  ASSERT_TRUE(this->engine_->Scan("k", [&](std::string_view, std::string_view value) {
    EXPECT_EQ(value, "v");
    return ++seen < 3;
  }));
  EXPECT_EQ(seen, 3);
}

TYPED_TEST(EngineConformance, BigEndianSequenceKeysScanInNumericOrder) {
  auto key = [](uint32_t n) {
    std::string out = "queue/";
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(n >> shift));
    return out;
  };
  for (uint32_t n : {300u, 2u, 70000u, 1u}) ASSERT_TRUE(this->engine_->Put(key(n), "m"));
  EXPECT_EQ(this->Keys("queue/"),
            (std::vector<std::string>{key(1), key(2), key(300), key(70000)}));
}

TYPED_TEST(EngineConformance, ManyValuesAcrossFilesStayReadable) {
  std::string big(700, 'x');
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(this->engine_->Put("key" + std::to_string(i), big + std::to_string(i)));
  }
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(this->Get("key" + std::to_string(i)), big + std::to_string(i));
  }
  Stats stats = this->engine_->GetStats();
  EXPECT_EQ(this->LiveKeys(), 50u);
  EXPECT_GT(stats.live_bytes, 50u * 700);
}

TYPED_TEST(EngineConformance, StatsCountDeadBytesForEnginesThatKeepThem) {
  ASSERT_TRUE(this->engine_->Put("a", std::string(100, 'x')));
  ASSERT_TRUE(this->engine_->Put("a", std::string(100, 'y')));
  Stats stats = this->engine_->GetStats();
  EXPECT_EQ(this->LiveKeys(), 1u);
  EXPECT_GE(stats.live_bytes, 101u);
}

TYPED_TEST(EngineConformance, SyncTickAndCloseThenCallsFail) {
  ASSERT_TRUE(this->engine_->Put("a", "1"));
  EXPECT_TRUE(this->engine_->Sync());
  EXPECT_TRUE(this->engine_->Tick(0));
  EXPECT_TRUE(this->engine_->Close());
  auto again = this->engine_->Close();
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, Errc::kClosed);
  EXPECT_FALSE(this->engine_->Put("b", "2"));
  EXPECT_FALSE(this->engine_->Get("a"));
}

TYPED_TEST(EngineConformance, WriteAsyncCallsDone) {
  WriteBatch batch;
  batch.Put("a", "1");
  bool called = false;
  this->engine_->WriteAsync(batch, [&](Status s) {
    EXPECT_TRUE(s);
    called = true;
  });
  EXPECT_TRUE(called);
  EXPECT_EQ(this->Get("a"), "1");
}

TYPED_TEST(EngineConformance, ReopenKeepsDataForPersistentEngines) {
  if constexpr (!std::is_same_v<TypeParam, MemoryFactory>) {
    for (int i = 0; i < 100; ++i) {
      ASSERT_TRUE(this->engine_->Put("k" + std::to_string(i), std::string(i, 'x')));
    }
    ASSERT_TRUE(this->engine_->Delete("k7"));
    ASSERT_TRUE(this->engine_->Close());
    this->engine_ = this->factory_.Open();
    EXPECT_EQ(this->Keys("k").size(), 99u);
    EXPECT_EQ(this->Get("k42"), std::string(42, 'x'));
    EXPECT_EQ(this->Get("k7"), std::nullopt);
  }
}

}  // namespace
}  // namespace estuary::persistence
