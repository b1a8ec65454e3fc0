#pragma once
// LatencyHistogram: an HDR-style log-bucketed histogram of non-negative
// integer values (nanoseconds in estuary-bench), with bounded memory.
//
// Values below 256 are counted exactly; above, each power-of-two range is
// split into 128 linear sub-buckets, so a reported value is within 1/128
// (0.8%) of a recorded one. The whole uint64 range is covered by a fixed
// 7,424 counters (58 KiB): recording never allocates. Not thread-safe: one
// histogram per thread, merged at the end.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace estuary::bench {

class LatencyHistogram {
 public:
  LatencyHistogram();

  void Record(uint64_t value);
  void Merge(const LatencyHistogram& other);

  uint64_t count() const { return count_; }
  uint64_t min() const { return count_ == 0 ? 0 : min_; }
  uint64_t max() const { return max_; }
  double mean() const { return count_ == 0 ? 0.0 : sum_ / static_cast<double>(count_); }
  // The smallest value v such that at least `percentile`% of the recorded
  // values are <= v (within the bucket precision, never above max()).
  // 0 for an empty histogram; percentile is clamped to [0, 100].
  uint64_t ValueAtPercentile(double percentile) const;

  // Bucket arithmetic, public for tests.
  static size_t BucketIndex(uint64_t value);
  static uint64_t BucketLowest(size_t index);
  static uint64_t BucketHighest(size_t index);
  static constexpr size_t kBucketCount = 256 + 56 * 128;

 private:
  std::vector<uint64_t> counts_;
  uint64_t count_ = 0;
  uint64_t min_ = UINT64_MAX;
  uint64_t max_ = 0;
  double sum_ = 0;
};

}  // namespace estuary::bench
