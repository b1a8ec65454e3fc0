#include "tools/bench/stats.h"

#include <algorithm>

namespace estuary::bench {
namespace {

void AddCounters(const WorkerResult& worker, Summary& summary) {
  summary.sent += worker.sent;
  summary.acked += worker.acked;
  summary.rejected += worker.rejected;
  summary.received += worker.received;
  summary.duplicates += worker.duplicates;
  summary.out_of_order += worker.out_of_order;
  summary.foreign += worker.foreign;
  summary.latency.Merge(worker.latency);
  summary.ack_latency.Merge(worker.ack_latency);
}

void CountExpectedAndLost(const std::vector<WorkerResult>& workers, const TopicPlan& plan,
                          uint32_t publishers, Summary& summary) {
  std::vector<uint64_t> sent_by_publisher(publishers, 0);
  for (const WorkerResult& worker : workers) {
    for (const PublisherResult& p : worker.publishers) {
      if (p.index < publishers) sent_by_publisher[p.index] = p.sent;
    }
  }
  for (const WorkerResult& worker : workers) {
    for (const SubscriberResult& s : worker.subscribers) {
      for (uint32_t p = 0; p < publishers; ++p) {
        if (!plan.Covers(s.index, p)) continue;
        const uint64_t got = p < s.unique_by_publisher.size() ? s.unique_by_publisher[p] : 0;
        summary.expected += sent_by_publisher[p];
        summary.lost += sent_by_publisher[p] - std::min(got, sent_by_publisher[p]);
      }
    }
  }
}

double Seconds(int64_t from_ns, int64_t to_ns) {
  return to_ns > from_ns ? static_cast<double>(to_ns - from_ns) / 1e9 : 0.0;
}

}  // namespace

// Every worker's histograms of one second merged, a point per second.
static std::vector<Summary::Second> Timeline(const std::vector<WorkerResult>& workers) {
  std::map<int64_t, LatencyHistogram> merged;
  for (const WorkerResult& worker : workers) {
    for (const auto& [second, histogram] : worker.latency_by_second) merged[second].Merge(histogram);
  }
  std::vector<Summary::Second> timeline;
  for (const auto& [second, histogram] : merged) {
    Summary::Second point;
    point.at_s = static_cast<double>(second) + 0.5;
    point.received = histogram.count();
    point.p50_ns = histogram.ValueAtPercentile(50);
    point.p90_ns = histogram.ValueAtPercentile(90);
    point.p99_ns = histogram.ValueAtPercentile(99);
    point.p999_ns = histogram.ValueAtPercentile(99.9);
    point.max_ns = histogram.max();
    timeline.push_back(point);
  }
  return timeline;
}

Summary Summarize(const std::vector<WorkerResult>& workers, const TopicPlan& plan,
                  uint32_t publishers, size_t payload_size, int64_t start_ns) {
  Summary summary;
  int64_t publish_end = start_ns;
  int64_t last_receive = start_ns;
  for (const WorkerResult& worker : workers) {
    AddCounters(worker, summary);
    publish_end = std::max(publish_end, worker.publish_end_ns);
    last_receive = std::max(last_receive, worker.last_receive_ns);
  }
  CountExpectedAndLost(workers, plan, publishers, summary);
  summary.timeline = Timeline(workers);
  summary.publish_seconds = Seconds(start_ns, publish_end);
  summary.receive_seconds = Seconds(start_ns, last_receive);
  const auto bytes = static_cast<double>(payload_size);
  if (summary.publish_seconds > 0) {
    summary.send_rate = static_cast<double>(summary.sent) / summary.publish_seconds;
    summary.send_mb_s = summary.send_rate * bytes / 1e6;
  }
  if (summary.receive_seconds > 0) {
    summary.receive_rate = static_cast<double>(summary.received) / summary.receive_seconds;
    summary.receive_mb_s = summary.receive_rate * bytes / 1e6;
  }
  return summary;
}

}  // namespace estuary::bench
