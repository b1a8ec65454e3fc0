#include "tools/bench/subscriber_tally.h"

#include <algorithm>

#include "tools/bench/payload.h"

namespace estuary::bench {

SubscriberTally::SubscriberTally(uint32_t index, uint32_t run_id, uint32_t publishers,
                                 WorkerResult& result, LiveCounters& live)
    : index_(index), run_id_(run_id), result_(result), live_(live), by_publisher_(publishers) {}

void SubscriberTally::OnMessage(std::string_view payload, int64_t arrival_ns) {
  const auto header = ReadPayloadHeader(payload);
  if (!header || header->run_id != run_id_ || header->publisher >= by_publisher_.size()) {
    ++result_.foreign;
    return;
  }
  ++result_.received;
  live_.received.fetch_add(1, std::memory_order_relaxed);
  result_.last_receive_ns = std::max(result_.last_receive_ns, arrival_ns);
  switch (by_publisher_[header->publisher].Record(header->sequence)) {
    case SequenceTracker::Outcome::kDuplicate:
      ++result_.duplicates;
      return;
    case SequenceTracker::Outcome::kOutOfOrder:
      ++result_.out_of_order;
      break;
    case SequenceTracker::Outcome::kInOrder:
      break;
  }
  live_.unique_received.fetch_add(1, std::memory_order_relaxed);
  const auto latency = static_cast<uint64_t>(std::max<int64_t>(0, arrival_ns - header->sent_ns));
  result_.latency.Record(latency);
  if (result_.keep_timeline) {
    const int64_t since_start = arrival_ns - result_.timeline_start_ns;
    const int64_t second = since_start >= 0 ? since_start / 1'000'000'000 : -1;
    result_.latency_by_second[second].Record(latency);
  }
}

SubscriberResult SubscriberTally::Result() const {
  SubscriberResult result;
  result.index = index_;
  result.unique_by_publisher.reserve(by_publisher_.size());
  for (const SequenceTracker& tracker : by_publisher_) result.unique_by_publisher.push_back(tracker.unique());
  return result;
}

}  // namespace estuary::bench
