#include "persistence/memory_engine.h"

namespace estuary::persistence {

Status MemoryEngine::Write(const WriteBatch& batch) {
  if (closed_) return Fail(Errc::kClosed, "engine closed");
  for (const WriteBatch::Op& op : batch.ops()) {
    auto it = map_.find(op.key);
    if (it != map_.end()) {
      live_bytes_ -= it->first.size() + it->second.size();
      if (op.is_delete) {
        map_.erase(it);
      } else {
        it->second = op.value;
        live_bytes_ += op.key.size() + op.value.size();
      }
    } else if (!op.is_delete) {
      map_.emplace(op.key, op.value);
      live_bytes_ += op.key.size() + op.value.size();
    }
  }
  return {};
}

Result<std::optional<std::string>> MemoryEngine::Get(std::string_view key) {
  if (closed_) return Fail(Errc::kClosed, "engine closed");
  auto it = map_.find(key);
  if (it == map_.end()) return std::optional<std::string>();
  return std::optional<std::string>(it->second);
}

Status MemoryEngine::Scan(std::string_view prefix, std::string_view start,
                          const ScanVisitor& visit) {
  if (closed_) return Fail(Errc::kClosed, "engine closed");
  std::string_view from = start < prefix ? prefix : start;
  for (auto it = map_.lower_bound(from); it != map_.end(); ++it) {
    if (std::string_view(it->first).substr(0, prefix.size()) != prefix) break;
    if (!visit(it->first, it->second)) break;
  }
  return {};
}

Status MemoryEngine::Sync() {
  if (closed_) return Fail(Errc::kClosed, "engine closed");
  return {};
}

Status MemoryEngine::Tick(int64_t /*now_ms*/) { return Sync(); }

Stats MemoryEngine::GetStats() const {
  Stats stats;
  stats.live_keys = map_.size();
  stats.live_bytes = live_bytes_;
  return stats;
}

Status MemoryEngine::Close() {
  if (closed_) return Fail(Errc::kClosed, "engine closed");
  closed_ = true;
  return {};
}

}  // namespace estuary::persistence
