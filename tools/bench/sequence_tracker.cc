#include "tools/bench/sequence_tracker.h"

namespace estuary::bench {

bool SequenceTracker::Test(uint64_t sequence) const {
  const uint64_t bit = sequence % kWindow;
  return (seen_[bit / 64] >> (bit % 64)) & 1;
}

void SequenceTracker::Set(uint64_t sequence) {
  const uint64_t bit = sequence % kWindow;
  seen_[bit / 64] |= uint64_t{1} << (bit % 64);
}

void SequenceTracker::Clear(uint64_t sequence) {
  const uint64_t bit = sequence % kWindow;
  seen_[bit / 64] &= ~(uint64_t{1} << (bit % 64));
}

// Slides the window up so `sequence` becomes the highest; the slots it
// uncovers belong to sequence numbers not received yet.
void SequenceTracker::AdvanceTo(uint64_t sequence) {
  if (sequence - highest_ >= kWindow) {
    seen_.assign(kWindow / 64, 0);
  } else {
    for (uint64_t s = highest_ + 1; s <= sequence; ++s) Clear(s);
  }
  highest_ = sequence;
}

SequenceTracker::Outcome SequenceTracker::Record(uint64_t sequence) {
  if (seen_.empty()) {
    seen_.assign(kWindow / 64, 0);
    highest_ = sequence;
    Set(sequence);
    ++unique_;
    return Outcome::kInOrder;
  }
  if (sequence > highest_) {
    AdvanceTo(sequence);
    Set(sequence);
    ++unique_;
    return Outcome::kInOrder;
  }
  if (highest_ - sequence >= kWindow) {
    ++too_old_;
    ++out_of_order_;
    ++unique_;
    return Outcome::kOutOfOrder;
  }
  if (Test(sequence)) {
    ++duplicates_;
    return Outcome::kDuplicate;
  }
  Set(sequence);
  ++unique_;
  ++out_of_order_;
  return Outcome::kOutOfOrder;
}

}  // namespace estuary::bench
