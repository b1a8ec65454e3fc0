#pragma once
// Helpers for the Bitcask tests: open an engine on a SimFileSystem and read
// back everything it holds.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/file_system.h"
#include "persistence/bitcask/bitcask_engine.h"
#include "persistence/bitcask/format.h"

namespace estuary::persistence::bitcask {

inline constexpr char kDir[] = "db";

struct Harness {
  explicit Harness(uint64_t seed = 1) : fs(seed) {}

  BitcaskOptions Options() {
    BitcaskOptions o = options;
    o.log = [this](const std::string& line) { logs.push_back(line); };
    return o;
  }
  std::unique_ptr<BitcaskEngine> Open() {
    auto engine = BitcaskEngine::Open(fs, kDir, Options());
    EXPECT_TRUE(engine) << engine.error().message;
    return engine ? std::move(*engine) : nullptr;
  }
  bool Logged(const std::string& needle) const {
    for (const auto& line : logs) {
      if (line.find(needle) != std::string::npos) return true;
    }
    return false;
  }
  std::vector<std::string> DataFiles() {
    std::vector<std::string> out;
    auto names = fs.ListDir(kDir);
    EXPECT_TRUE(names);
    for (const auto& name : *names) {
      if (ParseDataFileName(name)) out.push_back(std::string(kDir) + "/" + name);
    }
    return out;
  }

  io::SimFileSystem fs;
  BitcaskOptions options;
  std::vector<std::string> logs;
};

inline std::map<std::string, std::string> Dump(StorageEngine& engine) {
  std::map<std::string, std::string> out;
  auto s = engine.Scan("", [&](std::string_view key, std::string_view value) {
    out.emplace(key, value);
    return true;
  });
  EXPECT_TRUE(s) << s.error().message;
  return out;
}

inline std::string Key(int i) { return "key" + std::to_string(i); }
inline std::string Value(int i) { return "value-" + std::to_string(i) + std::string(i % 50, 'v'); }

// Overwrites and deletes, with the expected final contents.
inline std::map<std::string, std::string> Churn(BitcaskEngine& engine) {
  std::map<std::string, std::string> model;
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 30; ++i) {
      std::string value = Value(i) + "/" + std::to_string(round);
      EXPECT_TRUE(engine.Put(Key(i), value));
      model[Key(i)] = value;
    }
    for (int i = round; i < 30; i += 4) {
      EXPECT_TRUE(engine.Delete(Key(i)));
      model.erase(Key(i));
    }
  }
  return model;
}

// Offset of the record for `key` in the first data file.
inline uint64_t OffsetOf(Harness& h, const std::string& file, const std::string& key) {
  for (const RecordEntry& entry : ScanDataFile(h.fs.Contents(file)).entries) {
    if (entry.key == key) return entry.offset;
  }
  ADD_FAILURE() << key << " not in " << file;
  return 0;
}

// Half of a record (as a crash in the middle of the write leaves it) is
// written after the first `good_end` bytes of `active` (appended, or in
// place over the zero-filled space when `in_place`) and synced; after power
// loss and a reopen the tail is logged as torn and truncated back to
// `good_end`, the `live` records are all there, and the store takes writes
// that survive another reopen. `engine` is reopened in place.
inline void ExpectHalfRecordTruncated(Harness& h, std::unique_ptr<BitcaskEngine>& engine, const std::string& active,
                                      uint64_t good_end, bool in_place, size_t live) {
  {
    std::string record;
    AppendRecord(&record, 99, 0, 0, "torn", "never acknowledged");
    const std::string half = record.substr(0, record.size() / 2);
    auto file = in_place ? h.fs.OpenWrite(active) : h.fs.OpenAppend(active);
    ASSERT_TRUE(file);
    ASSERT_TRUE(in_place ? (*file)->WriteAt(good_end, half) : (*file)->Append(half));
    ASSERT_TRUE((*file)->Sync());
  }
  h.fs.Crash(false);
  engine.reset();
  engine = h.Open();
  EXPECT_TRUE(h.Logged("torn or corrupt tail"));
  EXPECT_TRUE(h.Logged("truncated"));
  EXPECT_EQ(*h.fs.FileSize(active), good_end);
  EXPECT_EQ(Dump(*engine).size(), live);
  ASSERT_TRUE(engine->Put("more", "x"));
  engine.reset();
  engine = h.Open();
  EXPECT_EQ(Dump(*engine).size(), live + 1);
}

}  // namespace estuary::persistence::bitcask
