#include "cluster-core/partition/queue_machine.h"

#include <algorithm>
#include <utility>

#include "base/bytes.h"
#include "cluster-core/store/record_codec.h"
#include "model/hlc.h"

namespace estuary::partition {

namespace {

constexpr uint8_t kAppend = 0x40;
constexpr uint8_t kAck = 0x41;
constexpr uint8_t kAssign = 0x42;
constexpr uint8_t kDrop = 0x43;
constexpr uint8_t kHand = 0x44;
constexpr uint8_t kUnhand = 0x45;
constexpr uint8_t kSettle = 0x46;
constexpr uint8_t kRead = 0x40;
constexpr uint8_t kStats = 0x41;
constexpr uint8_t kSnapshotVersion = 1;
constexpr uint8_t kSnapshotVersionHands = 2;
constexpr std::string_view kFull = "full";

std::string_view View(const std::vector<uint8_t>& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

bool Expired(const std::optional<int64_t>& expiry_at_ms, int64_t now_ms) {
  return expiry_at_ms && *expiry_at_ms <= now_ms;
}

}  // namespace

std::string EncodeQueueAppend(std::string_view queue, const Message& message) {
  base::LittleEndianWriter out;
  out.U8(kAppend);
  out.Bytes(queue);
  out.Bytes(core::store::EncodeMessage(message));
  return out.Take();
}

std::string EncodeQueueAck(std::string_view queue, uint64_t epoch, const std::vector<uint64_t>& offsets) {
  base::LittleEndianWriter out;
  out.U8(kAck);
  out.Bytes(queue);
  out.U64(epoch);
  out.U32(static_cast<uint32_t>(offsets.size()));
  for (uint64_t offset : offsets) out.U64(offset);
  return out.Take();
}

std::string EncodeQueueAssign(std::string_view queue, NodeId consumer, uint64_t epoch) {
  base::LittleEndianWriter out;
  out.U8(kAssign);
  out.Bytes(queue);
  out.U32(consumer);
  out.U64(epoch);
  return out.Take();
}

std::string EncodeQueueDrop(std::string_view queue) {
  base::LittleEndianWriter out;
  out.U8(kDrop);
  out.Bytes(queue);
  return out.Take();
}

namespace {
std::string EncodeHand(uint8_t tag, std::string_view queue, uint64_t offset, const QueueHand& hand) {
  base::LittleEndianWriter out;
  out.U8(tag);
  out.Bytes(queue);
  out.U64(offset);
  out.Bytes(hand.session);
  out.U32(hand.node);
  out.U64(hand.incarnation);
  out.U64(hand.token);
  return out.Take();
}
}  // namespace

std::string EncodeQueueHand(std::string_view queue, uint64_t offset, const QueueHand& hand) {
  return EncodeHand(kHand, queue, offset, hand);
}

std::string EncodeQueueUnhand(std::string_view queue, uint64_t offset, const QueueHand& hand) {
  return EncodeHand(kUnhand, queue, offset, hand);
}

std::string EncodeQueueSettle(std::string_view queue, const QueueHand& keep, const std::vector<MessageId>& held) {
  base::LittleEndianWriter out;
  out.U8(kSettle);
  out.Bytes(queue);
  out.Bytes(keep.session);
  out.U32(keep.node);
  out.U64(keep.incarnation);
  out.U32(static_cast<uint32_t>(held.size()));
  for (const MessageId& id : held) {
    out.U32(id.node);
    out.U64(id.timestamp);
    out.U32(id.sequence);
  }
  return out.Take();
}

std::optional<QueueSettleResult> DecodeQueueSettleResult(std::string_view bytes) {
  base::LittleEndianReader in(bytes);
  QueueSettleResult result;
  result.removed = in.U32();
  result.handed_back = in.U32();
  if (!in.done()) return std::nullopt;
  return result;
}

std::string EncodeQueueRead(std::string_view queue, uint64_t from, uint32_t max_count, uint32_t max_bytes) {
  base::LittleEndianWriter out;
  out.U8(kRead);
  out.Bytes(queue);
  out.U64(from);
  out.U32(max_count);
  out.U32(max_bytes);
  return out.Take();
}

std::string EncodeQueueStats() { return std::string(1, static_cast<char>(kStats)); }

std::optional<QueueAppendResult> DecodeQueueAppendResult(std::string_view bytes) {
  if (bytes == kFull) return QueueAppendResult{true, 0};
  base::LittleEndianReader in(bytes);
  const uint64_t offset = in.U64();
  if (!in.done()) return std::nullopt;
  return QueueAppendResult{false, offset};
}

std::optional<uint32_t> DecodeQueueAckResult(std::string_view bytes) {
  base::LittleEndianReader in(bytes);
  const uint32_t removed = in.U32();
  if (!in.done()) return std::nullopt;
  return removed;
}

std::optional<QueueReadResult> DecodeQueueReadResult(std::string_view bytes) {
  base::LittleEndianReader in(bytes);
  QueueReadResult result;
  result.next_offset = in.U64();
  const uint32_t count = in.Count(12);
  for (uint32_t i = 0; i < count && in.ok(); ++i) {
    QueuedMessage message;
    message.offset = in.U64();
    message.record = std::string(in.Bytes());
    result.messages.push_back(std::move(message));
  }
  if (!in.done()) return std::nullopt;
  return result;
}

std::optional<std::vector<QueueStats>> DecodeQueueStats(std::string_view bytes) {
  base::LittleEndianReader in(bytes);
  std::vector<QueueStats> stats;
  const uint32_t count = in.Count(48);
  for (uint32_t i = 0; i < count && in.ok(); ++i) {
    QueueStats queue;
    queue.name = std::string(in.Bytes());
    queue.depth = in.U64();
    queue.bytes = in.U64();
    queue.first_offset = in.U64();
    queue.next_offset = in.U64();
    const uint32_t consumer = in.U32();
    if (consumer > 0xFFFF) in.Fail();
    queue.consumer = static_cast<NodeId>(consumer);
    queue.epoch = in.U64();
    stats.push_back(std::move(queue));
  }
  if (!in.done()) return std::nullopt;
  return stats;
}

QueueMachine::QueueMachine(std::function<int64_t()> wall_ms, QueueLimits limits)
    : wall_ms_(std::move(wall_ms)), limits_(limits) {}

std::string QueueMachine::Apply(const raft::Entry& entry) {
  // Sweeps follow entry time, so every replica drops the same messages at
  // the same point of the log.
  const uint64_t entry_ms = HybridLogicalClock::PhysicalMs(entry.timestamp);
  if (entry_ms >= last_sweep_ms_ + kSweepEveryMs) {
    for (auto& [name, queue] : queues_) Sweep(queue, static_cast<int64_t>(entry_ms));
    last_sweep_ms_ = entry_ms;
  }
  const std::string_view bytes = View(entry.data);
  if (bytes.empty()) return Malformed();
  const std::string_view body = bytes.substr(1);
  switch (static_cast<uint8_t>(bytes.front())) {
    case kAppend:
      return ApplyAppend(body, static_cast<int64_t>(entry_ms));
    case kAck:
      return ApplyAck(body);
    case kAssign:
      return ApplyAssign(body);
    case kDrop:
      return ApplyDrop(body);
    case kHand:
      return ApplyHand(body, true);
    case kUnhand:
      return ApplyHand(body, false);
    case kSettle:
      return ApplySettle(body);
    default:
      return Malformed();
  }
}

std::string QueueMachine::Malformed() {
  ++malformed_;
  return "0";
}

std::string QueueMachine::ApplyAppend(std::string_view body, int64_t entry_ms) {
  base::LittleEndianReader in(body);
  const std::string_view name = in.Bytes();
  const std::string_view record = in.Bytes();
  if (!in.done()) return Malformed();
  auto message = core::store::DecodeMessage(record);
  if (!message || (*message)->topic.empty()) return Malformed();
  const std::optional<int64_t> expiry = (*message)->properties.expiry_at_ms;
  auto it = queues_.find(name);
  if (it == queues_.end()) {
    if (record.size() > limits_.max_bytes || limits_.max_messages == 0) return std::string(kFull);
    it = queues_.emplace(std::string(name), Queue{}).first;
  }
  Queue& queue = it->second;
  auto fits = [&] {
    return queue.messages.size() < limits_.max_messages && queue.bytes + record.size() <= limits_.max_bytes;
  };
  if (!fits()) {
    // Room taken by messages nobody may receive any more is not room.
    Sweep(queue, entry_ms);
    if (!fits()) return std::string(kFull);
  }
  const uint64_t offset = next_offset_++;
  queue.next_offset = offset + 1;
  if (Expired(expiry, entry_ms)) {
    // Expired on its way here: acknowledged to the publisher, never served.
    ++expired_;
  } else {
    queue.messages.emplace(offset, Stored{std::string(record), expiry, std::nullopt});
    queue.bytes += record.size();
    if (expiry) ++queue.expiring;
    if (hooks_.appended) hooks_.appended(name, offset);
  }
  base::LittleEndianWriter out;
  out.U64(offset);
  return out.Take();
}

std::string QueueMachine::ApplyAck(std::string_view body) {
  base::LittleEndianReader in(body);
  const std::string_view name = in.Bytes();
  const uint64_t epoch = in.U64();
  const uint32_t count = in.Count(8);
  std::vector<uint64_t> offsets;
  offsets.reserve(count);
  for (uint32_t i = 0; i < count && in.ok(); ++i) offsets.push_back(in.U64());
  if (!in.done()) return Malformed();
  uint32_t removed = 0;
  if (auto it = queues_.find(name); it != queues_.end()) {
    Queue& queue = it->second;
    if (epoch < queue.epoch) ++stale_acks_;  // applied all the same (see the header)
    for (uint64_t offset : offsets) {
      auto message = queue.messages.find(offset);
      if (message == queue.messages.end()) continue;
      Remove(queue, message);
      ++removed;
    }
    if (hooks_.acked) hooks_.acked(name, offsets);
  }
  base::LittleEndianWriter out;
  out.U32(removed);
  return out.Take();
}

std::string QueueMachine::ApplyAssign(std::string_view body) {
  base::LittleEndianReader in(body);
  const std::string_view name = in.Bytes();
  const uint32_t consumer = in.U32();
  const uint64_t epoch = in.U64();
  if (!in.done() || consumer > 0xFFFF) return Malformed();
  auto it = queues_.find(name);
  if (it == queues_.end()) {
    if (epoch == 0) return "0";  // refused: no queue made for it
    it = queues_.emplace(std::string(name), Queue{}).first;
  }
  Queue& queue = it->second;
  if (epoch <= queue.epoch) return "0";
  queue.consumer = static_cast<NodeId>(consumer);
  queue.epoch = epoch;
  return "1";
}

std::string QueueMachine::ApplyDrop(std::string_view body) {
  base::LittleEndianReader in(body);
  const std::string_view name = in.Bytes();
  if (!in.done()) return Malformed();
  auto it = queues_.find(name);
  if (it == queues_.end()) return "0";
  queues_.erase(it);
  return "1";
}

std::string QueueMachine::ApplyHand(std::string_view body, bool hand) {
  base::LittleEndianReader in(body);
  const std::string_view name = in.Bytes();
  const uint64_t offset = in.U64();
  QueueHand to;
  to.session = std::string(in.Bytes());
  const uint32_t node = in.U32();
  to.incarnation = in.U64();
  to.token = in.U64();
  if (!in.done() || node > 0xFFFF || node == 0) return Malformed();
  to.node = static_cast<NodeId>(node);
  auto it = queues_.find(name);
  if (it == queues_.end()) return "0";
  auto message = it->second.messages.find(offset);
  if (message == it->second.messages.end()) return "0";
  std::optional<QueueHand>& current = message->second.hand;
  if (hand) {
    // Handed once: a second attempt (another consumer, or this one's for
    // an earlier assignment) must not put it into a second session.
    if (current) return *current == to ? "1" : "0";
    current = std::move(to);
    return "1";
  }
  if (current != to) return "0";
  current.reset();
  if (hooks_.released) hooks_.released(name, {offset});
  return "1";
}

std::string QueueMachine::ApplySettle(std::string_view body) {
  base::LittleEndianReader in(body);
  const std::string_view name = in.Bytes();
  const std::string_view session = in.Bytes();
  const uint32_t keep_node = in.U32();
  const uint64_t keep_incarnation = in.U64();
  const uint32_t count = in.Count(16);
  std::vector<MessageId> held;
  held.reserve(count);
  for (uint32_t i = 0; i < count && in.ok(); ++i) {
    MessageId id;
    const uint32_t node = in.U32();
    if (node > 0xFFFF) in.Fail();
    id.node = static_cast<uint16_t>(node);
    id.timestamp = in.U64();
    id.sequence = in.U32();
    held.push_back(id);
  }
  if (!in.done()) return Malformed();
  std::vector<uint64_t> removed;
  std::vector<uint64_t> released;
  if (auto it = queues_.find(name); it != queues_.end()) {
    Queue& queue = it->second;
    for (auto message = queue.messages.begin(); message != queue.messages.end();) {
      auto next = std::next(message);
      const std::optional<QueueHand>& hand = message->second.hand;
      if (hand && hand->session == session && (hand->node != keep_node || hand->incarnation != keep_incarnation)) {
        // The record decoded when it was appended or restored: it decodes.
        auto decoded = core::store::DecodeMessage(message->second.record);
        const bool holds = decoded && std::find(held.begin(), held.end(), (*decoded)->id) != held.end();
        if (holds) {
          removed.push_back(message->first);
          Remove(queue, message);
        } else {
          released.push_back(message->first);
          message->second.hand.reset();
        }
      }
      message = next;
    }
    if (!removed.empty() && hooks_.acked) hooks_.acked(name, removed);
    if (!released.empty() && hooks_.released) hooks_.released(name, released);
  }
  base::LittleEndianWriter out;
  out.U32(static_cast<uint32_t>(removed.size()));
  out.U32(static_cast<uint32_t>(released.size()));
  return out.Take();
}

uint64_t QueueMachine::handed() const {
  uint64_t count = 0;
  for (const auto& [name, queue] : queues_) {
    for (const auto& [offset, stored] : queue.messages) count += stored.hand ? 1 : 0;
  }
  return count;
}

void QueueMachine::Remove(Queue& queue, std::map<uint64_t, Stored>::iterator it) {
  queue.bytes -= it->second.record.size();
  if (it->second.expiry_at_ms) --queue.expiring;
  queue.messages.erase(it);
}

void QueueMachine::Sweep(Queue& queue, int64_t now_ms) {
  if (queue.expiring == 0) return;
  for (auto it = queue.messages.begin(); it != queue.messages.end();) {
    auto next = std::next(it);
    if (Expired(it->second.expiry_at_ms, now_ms)) {
      Remove(queue, it);
      ++expired_;
    }
    it = next;
  }
}

std::string QueueMachine::Query(std::string_view query) const {
  if (query.empty()) return {};
  const std::string_view body = query.substr(1);
  switch (static_cast<uint8_t>(query.front())) {
    case kRead:
      return QueryRead(body);
    case kStats: {
      if (!body.empty()) return {};
      const std::vector<QueueStats> stats = Stats();
      base::LittleEndianWriter out;
      out.U32(static_cast<uint32_t>(stats.size()));
      for (const QueueStats& queue : stats) {
        out.Bytes(queue.name);
        out.U64(queue.depth);
        out.U64(queue.bytes);
        out.U64(queue.first_offset);
        out.U64(queue.next_offset);
        out.U32(queue.consumer);
        out.U64(queue.epoch);
      }
      return out.Take();
    }
    default:
      return {};
  }
}

std::string QueueMachine::QueryRead(std::string_view body) const {
  base::LittleEndianReader in(body);
  const std::string_view name = in.Bytes();
  const uint64_t from = in.U64();
  const uint32_t max_count = in.U32();
  const uint32_t max_bytes = in.U32();
  if (!in.done()) return {};
  auto it = queues_.find(name);
  std::vector<std::pair<uint64_t, std::string_view>> found;
  if (it != queues_.end()) {
    // Read-time expiry by the leader's clock: a message the sweep has not
    // reached yet is still never served once expired.
    const int64_t now = wall_ms_ ? wall_ms_() : 0;
    uint64_t bytes = 0;
    for (auto message = it->second.messages.lower_bound(from);
         message != it->second.messages.end() && found.size() < max_count; ++message) {
      if (Expired(message->second.expiry_at_ms, now) || message->second.hand) continue;
      const std::string& record = message->second.record;
      if (!found.empty() && bytes + record.size() > max_bytes) break;
      bytes += record.size();
      found.emplace_back(message->first, record);
    }
  }
  base::LittleEndianWriter out;
  out.U64(it == queues_.end() ? 0 : it->second.next_offset);
  out.U32(static_cast<uint32_t>(found.size()));
  for (const auto& [offset, record] : found) {
    out.U64(offset);
    out.Bytes(record);
  }
  return out.Take();
}

std::vector<QueueStats> QueueMachine::Stats() const {
  std::vector<QueueStats> stats;
  stats.reserve(queues_.size());
  for (const auto& [name, queue] : queues_) {
    const uint64_t first = queue.messages.empty() ? queue.next_offset : queue.messages.begin()->first;
    stats.push_back(
        QueueStats{name, queue.messages.size(), queue.bytes, first, queue.next_offset, queue.consumer, queue.epoch});
  }
  return stats;
}

std::vector<uint8_t> QueueMachine::Snapshot() const {
  const bool hands = handed() != 0;
  base::LittleEndianWriter out;
  out.U8(hands ? kSnapshotVersionHands : kSnapshotVersion);
  out.U64(next_offset_);
  out.U64(last_sweep_ms_);
  out.U32(static_cast<uint32_t>(queues_.size()));
  for (const auto& [name, queue] : queues_) {
    out.Bytes(name);
    out.U64(queue.next_offset);
    out.U32(queue.consumer);
    out.U64(queue.epoch);
    out.U32(static_cast<uint32_t>(queue.messages.size()));
    for (const auto& [offset, stored] : queue.messages) {
      out.U64(offset);
      out.Bytes(stored.record);
      if (!hands) continue;
      out.U8(stored.hand ? 1 : 0);
      if (!stored.hand) continue;
      out.Bytes(stored.hand->session);
      out.U32(stored.hand->node);
      out.U64(stored.hand->incarnation);
      out.U64(stored.hand->token);
    }
  }
  std::string bytes = out.Take();
  return {bytes.begin(), bytes.end()};
}

bool QueueMachine::Restore(const std::vector<uint8_t>& data) {
  std::map<std::string, Queue, std::less<>> queues;
  uint64_t next_offset = 0;
  uint64_t last_sweep_ms = 0;
  if (!data.empty()) {
    base::LittleEndianReader in(View(data));
    const uint8_t version = in.U8();
    if (version != kSnapshotVersion && version != kSnapshotVersionHands) return false;
    next_offset = in.U64();
    last_sweep_ms = in.U64();
    const uint32_t count = in.Count(24);
    for (uint32_t i = 0; i < count && in.ok(); ++i) {
      std::string name(in.Bytes());
      Queue queue;
      queue.next_offset = in.U64();
      const uint32_t consumer = in.U32();
      queue.epoch = in.U64();
      const uint32_t messages = in.Count(12);
      // Offsets must be what this machine could have written: increasing,
      // below the queue's and the partition's counters; else a later
      // Append could hand one out again.
      if (consumer > 0xFFFF || queue.next_offset > next_offset) return false;
      queue.consumer = static_cast<NodeId>(consumer);
      for (uint32_t m = 0; m < messages && in.ok(); ++m) {
        const uint64_t offset = in.U64();
        const std::string_view record = in.Bytes();
        std::optional<QueueHand> hand;
        if (version == kSnapshotVersionHands && in.Bool()) {
          hand.emplace();
          hand->session = std::string(in.Bytes());
          const uint32_t node = in.U32();
          hand->incarnation = in.U64();
          hand->token = in.U64();
          if (node == 0 || node > 0xFFFF) return false;
          hand->node = static_cast<NodeId>(node);
        }
        auto message = core::store::DecodeMessage(record);
        if (!in.ok() || !message || (*message)->topic.empty() || offset >= queue.next_offset) return false;
        if (!queue.messages.empty() && offset <= queue.messages.rbegin()->first) return false;
        const std::optional<int64_t> expiry = (*message)->properties.expiry_at_ms;
        queue.messages.emplace_hint(queue.messages.end(), offset, Stored{std::string(record), expiry, std::move(hand)});
        queue.bytes += record.size();
        if (expiry) ++queue.expiring;
      }
      if (!queues.emplace(std::move(name), std::move(queue)).second) return false;
    }
    if (!in.done()) return false;
  }
  queues_ = std::move(queues);
  next_offset_ = next_offset;
  last_sweep_ms_ = last_sweep_ms;
  return true;
}

}  // namespace estuary::partition
