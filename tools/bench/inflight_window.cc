#include "tools/bench/inflight_window.h"

#include <algorithm>

namespace estuary::bench {
namespace {
constexpr uint32_t kMaxIds = 65535;
}

InflightWindow::InflightWindow(uint32_t capacity)
    : capacity_(std::clamp<uint32_t>(capacity, 1, kMaxIds)),
      stage_(kMaxIds + 1, Stage::kFree),
      sent_ns_(kMaxIds + 1, 0) {}

void InflightWindow::set_capacity(uint32_t capacity) {
  capacity_ = std::clamp<uint32_t>(capacity, 1, kMaxIds);
}

std::optional<uint16_t> InflightWindow::Acquire(int64_t sent_ns) {
  if (full()) return std::nullopt;
  // At most 65535 ids are in use, so a free one is found within a lap.
  while (stage_[next_] != Stage::kFree) next_ = next_ == kMaxIds ? 1 : next_ + 1;
  const uint16_t id = next_;
  next_ = next_ == kMaxIds ? 1 : next_ + 1;
  stage_[id] = Stage::kAwaitingAck;
  sent_ns_[id] = sent_ns;
  ++in_use_;
  return id;
}

void InflightWindow::MarkAwaitingComplete(uint16_t id) {
  if (stage_[id] == Stage::kAwaitingAck) stage_[id] = Stage::kAwaitingComplete;
}

std::optional<int64_t> InflightWindow::Release(uint16_t id) {
  if (id == 0 || stage_[id] == Stage::kFree) return std::nullopt;
  stage_[id] = Stage::kFree;
  --in_use_;
  return sent_ns_[id];
}

}  // namespace estuary::bench
