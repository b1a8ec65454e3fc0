#include "tools/bench/histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace estuary::bench {
namespace {

constexpr int kSubBucketBits = 7;  // 128 sub-buckets per power of two
constexpr uint64_t kSubBuckets = uint64_t{1} << kSubBucketBits;
constexpr uint64_t kExactLimit = kSubBuckets * 2;  // values below are exact

}  // namespace

LatencyHistogram::LatencyHistogram() : counts_(kBucketCount, 0) {}

size_t LatencyHistogram::BucketIndex(uint64_t value) {
  if (value < kExactLimit) return static_cast<size_t>(value);
  // value has its top bit at msb >= 8; keep its top 8 bits (128..255).
  const int msb = 63 - std::countl_zero(value);
  const int shift = msb - kSubBucketBits;
  const uint64_t sub = value >> shift;
  return static_cast<size_t>(kExactLimit + static_cast<uint64_t>(shift - 1) * kSubBuckets +
                             (sub - kSubBuckets));
}

uint64_t LatencyHistogram::BucketLowest(size_t index) {
  if (index < kExactLimit) return index;
  const uint64_t k = index - kExactLimit;
  const int shift = static_cast<int>(k / kSubBuckets) + 1;
  const uint64_t sub = k % kSubBuckets + kSubBuckets;
  return sub << shift;
}

uint64_t LatencyHistogram::BucketHighest(size_t index) {
  if (index < kExactLimit) return index;
  if (index + 1 == kBucketCount) return UINT64_MAX;
  return BucketLowest(index + 1) - 1;
}

void LatencyHistogram::Record(uint64_t value) {
  ++counts_[BucketIndex(value)];
  ++count_;
  min_ = std::min(min_, value);
  max_ = std::max(max_, value);
  sum_ += static_cast<double>(value);
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  for (size_t i = 0; i < kBucketCount; ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
  sum_ += other.sum_;
}

uint64_t LatencyHistogram::ValueAtPercentile(double percentile) const {
  if (count_ == 0) return 0;
  percentile = std::clamp(percentile, 0.0, 100.0);
  const double wanted = std::ceil(percentile / 100.0 * static_cast<double>(count_));
  const uint64_t target = std::max<uint64_t>(1, static_cast<uint64_t>(wanted));
  uint64_t seen = 0;
  for (size_t i = 0; i < kBucketCount; ++i) {
    seen += counts_[i];
    if (seen >= target) return std::clamp(BucketHighest(i), min_, max_);
  }
  return max_;
}

}  // namespace estuary::bench
