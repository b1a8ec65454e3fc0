#include "cluster-core/partition/queue_flow.h"

#include <algorithm>
#include <limits>

namespace estuary::partition {

QueuePusher::QueuePusher(NodeId consumer, uint64_t epoch, QueuePusherLimits limits)
    : consumer_(consumer), epoch_(epoch), limits_(limits) {}

bool QueuePusher::Grant(NodeId from, uint64_t epoch, uint32_t credit) {
  if (from != consumer_ || epoch != epoch_ || consumer_ == 0) return false;
  credit_ = static_cast<uint32_t>(
      std::min<uint64_t>(uint64_t{credit_} + credit, std::numeric_limits<uint32_t>::max()));
  return true;
}

void QueuePusher::OnAppended(uint64_t offset) { known_next_ = std::max(known_next_.value_or(0), offset + 1); }

std::optional<QueueReadRequest> QueuePusher::NextRead() {
  if (reading_ || credit_ == 0) return std::nullopt;
  if (again_ == 0) {
    if (in_flight_.size() >= limits_.max_in_flight) return std::nullopt;
    if (known_next_ && cursor_ >= *known_next_) return std::nullopt;
  }
  // Enough to find `credit_` messages to push behind those the read will
  // skip (in flight and not due, or acknowledged ahead).
  const uint64_t wanted = uint64_t{credit_} + in_flight_.size() + acked_ahead_.size();
  const auto count = static_cast<uint32_t>(std::min<uint64_t>(wanted, limits_.max_read_count));
  reading_ = QueueReadRequest{cursor_, count, limits_.max_read_bytes, next_token_++};
  return reading_;
}

QueuePusher::Verdict QueuePusher::Judge(uint64_t offset) const {
  if (auto it = in_flight_.find(offset); it != in_flight_.end()) {
    if (!it->second.again) return Verdict::kSkip;
    return credit_ > 0 ? Verdict::kPush : Verdict::kStop;
  }
  // Below the highest push and not in flight: pushed and acknowledged (a
  // read can return it until the ack has applied on this replica).
  if (offset < pushed_high_ || acked_ahead_.contains(offset)) return Verdict::kSkip;
  if (credit_ == 0 || in_flight_.size() >= limits_.max_in_flight) return Verdict::kStop;
  return Verdict::kPush;
}

std::vector<QueuedMessage> QueuePusher::OnRead(uint64_t token, const QueueReadResult& result, int64_t now_ms) {
  if (!reading_ || reading_->token != token) return {};
  const uint64_t from = reading_->from;
  reading_.reset();
  known_next_ = std::max(known_next_.value_or(0), result.next_offset);

  std::vector<QueuedMessage> push;
  std::set<uint64_t> seen;
  uint64_t end = from;
  bool stopped = false;
  for (const QueuedMessage& message : result.messages) {
    if (message.offset < end) continue;  // not in the order a Read answers: ignore
    const Verdict verdict = Judge(message.offset);
    if (verdict == Verdict::kStop) {
      stopped = true;
      break;
    }
    seen.insert(message.offset);
    end = message.offset + 1;
    if (verdict == Verdict::kSkip) continue;
    auto [it, fresh] = in_flight_.try_emplace(message.offset);
    if (!fresh && it->second.again) {
      --again_;
      ++repushed_;
    }
    it->second = Flight{now_ms, false};
    pushed_high_ = std::max(pushed_high_, message.offset + 1);
    --credit_;
    ++pushed_;
    push.push_back(message);
  }
  // An empty answer means nothing live from `from` up to the queue's end.
  if (!stopped && result.messages.empty()) end = std::max(end, result.next_offset);
  cursor_ = end;
  Forget(from, end, seen);
  return push;
}

void QueuePusher::Forget(uint64_t from, uint64_t to, const std::set<uint64_t>& seen) {
  // Every live message in [from, to) was in the answer: a flight there that
  // was not is gone from the machine and will never be acknowledged.
  for (auto it = in_flight_.lower_bound(from); it != in_flight_.end() && it->first < to;) {
    if (seen.contains(it->first)) {
      ++it;
      continue;
    }
    if (it->second.again) --again_;
    it = in_flight_.erase(it);
  }
  acked_ahead_.erase(acked_ahead_.begin(), acked_ahead_.lower_bound(pushed_high_));
}

void QueuePusher::OnReadFailed(uint64_t token) {
  if (reading_ && reading_->token == token) reading_.reset();
}

size_t QueuePusher::OnAck(const std::vector<uint64_t>& offsets) {
  size_t removed = 0;
  for (uint64_t offset : offsets) {
    if (auto it = in_flight_.find(offset); it != in_flight_.end()) {
      if (it->second.again) --again_;
      in_flight_.erase(it);
      ++removed;
    } else if (offset >= pushed_high_ && acked_ahead_.size() < limits_.max_in_flight) {
      acked_ahead_.insert(offset);
    }
  }
  return removed;
}

void QueuePusher::OnReleased(const std::vector<uint64_t>& offsets) {
  if (offsets.empty()) return;
  for (uint64_t offset : offsets) {
    // A read skipped it while it was handed, which forgot its flight: back
    // in flight, due now.
    auto [it, fresh] = in_flight_.try_emplace(offset);
    if (fresh || !it->second.again) ++again_;
    it->second.again = true;
    acked_ahead_.erase(offset);
  }
  cursor_ = std::min(cursor_, *std::min_element(offsets.begin(), offsets.end()));
  reading_.reset();  // its answer would start past the rewound cursor
}

void QueuePusher::Tick(int64_t now_ms) {
  std::optional<uint64_t> first;
  for (auto& [offset, flight] : in_flight_) {
    if (flight.again || flight.pushed_at_ms + limits_.redeliver_after_ms > now_ms) continue;
    flight.again = true;
    ++again_;
    if (!first) first = offset;
  }
  if (!first) return;
  cursor_ = std::min(cursor_, *first);
  reading_.reset();  // its answer would start past the rewound cursor
}

std::optional<int64_t> QueuePusher::NextDeadline() const {
  std::optional<int64_t> deadline;
  for (const auto& [offset, flight] : in_flight_) {
    if (flight.again) continue;
    const int64_t at = flight.pushed_at_ms + limits_.redeliver_after_ms;
    if (!deadline || at < *deadline) deadline = at;
  }
  return deadline;
}

void QueuePusher::Reset() {
  credit_ = 0;
  reading_.reset();
  for (auto& [offset, flight] : in_flight_) {
    if (!flight.again) ++again_;
    flight.again = true;
  }
  if (!in_flight_.empty()) cursor_ = std::min(cursor_, in_flight_.begin()->first);
}

void QueuePusher::OnConsumerChanged(NodeId consumer, uint64_t epoch) {
  epoch_ = epoch;
  if (consumer == consumer_) return;
  consumer_ = consumer;
  Reset();
}

QueuePuller::QueuePuller(uint64_t epoch, QueuePullerLimits limits) : epoch_(epoch), limits_(limits) {}

uint32_t QueuePuller::TakeGrant() {
  const uint64_t outstanding = held_.size() + uint64_t{unused_credit_};
  if (outstanding > limits_.low_water || outstanding >= limits_.window) return 0;
  const auto grant = static_cast<uint32_t>(limits_.window - outstanding);
  unused_credit_ += grant;
  return grant;
}

std::vector<QueuedMessage> QueuePuller::OnPush(const std::vector<QueuedMessage>& messages) {
  std::vector<QueuedMessage> fresh;
  for (const QueuedMessage& message : messages) {
    // Every pushed message spends a credit at the leader, a duplicate too.
    if (unused_credit_ > 0) {
      --unused_credit_;
    } else {
      ++over_credit_;
    }
    if (held_.contains(message.offset)) {
      ++duplicates_;
      continue;
    }
    if (acked_.contains(message.offset) || pending_set_.contains(message.offset)) {
      ++duplicates_;
      if (pending_set_.insert(message.offset).second) pending_acks_.push_back(message.offset);
      continue;
    }
    if (held_.size() >= limits_.window) {
      ++overflowed_;
      continue;
    }
    held_.insert(message.offset);
    fresh.push_back(message);
  }
  return fresh;
}

bool QueuePuller::Acked(uint64_t offset) {
  if (held_.erase(offset) == 0) return false;
  if (pending_set_.insert(offset).second) pending_acks_.push_back(offset);
  return true;
}

std::vector<uint64_t> QueuePuller::TakeAcks() {
  std::vector<uint64_t> batch;
  while (!pending_acks_.empty() && batch.size() < limits_.max_ack_batch) {
    const uint64_t offset = pending_acks_.front();
    pending_acks_.pop_front();
    pending_set_.erase(offset);
    batch.push_back(offset);
    Remember(offset);
  }
  return batch;
}

void QueuePuller::Remember(uint64_t offset) {
  if (limits_.remember_acked == 0 || !acked_.insert(offset).second) return;
  acked_order_.push_back(offset);
  while (acked_order_.size() > limits_.remember_acked) {
    acked_.erase(acked_order_.front());
    acked_order_.pop_front();
  }
}

void QueuePuller::Reset(uint64_t epoch) {
  epoch_ = epoch;
  unused_credit_ = 0;
}

void QueuePuller::SetWindow(uint32_t window, uint32_t low_water) {
  limits_.window = window;
  limits_.low_water = low_water;
}

}  // namespace estuary::partition
