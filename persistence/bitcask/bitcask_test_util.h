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

}  // namespace estuary::persistence::bitcask
