#pragma once
// MemoryEngine: a StorageEngine on a std::map, for tests and for the raft
// work. Nothing is persisted; every write is "durable" at once. Stats count
// key and value bytes as live bytes and never report dead bytes.
// Threading: one owner thread, as StorageEngine.
#include <map>
#include <string>

#include "persistence/storage_engine.h"

namespace estuary::persistence {

class MemoryEngine final : public StorageEngine {
 public:
  Status Write(const WriteBatch& batch) override;
  Result<std::optional<std::string>> Get(std::string_view key) override;
  Status Scan(std::string_view prefix, std::string_view start, const ScanVisitor& visit) override;
  using StorageEngine::Scan;
  Status Sync() override;
  Status Tick(int64_t now_ms) override;
  Stats GetStats() const override;
  Status Close() override;

 private:
  std::map<std::string, std::string, std::less<>> map_;
  uint64_t live_bytes_ = 0;
  bool closed_ = false;
};

}  // namespace estuary::persistence
