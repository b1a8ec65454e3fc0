#pragma once
// SequenceTracker: per (subscriber, publisher) accounting of the sequence
// numbers a subscriber received, in bounded memory.
//
// Remembers which of the last kWindow sequence numbers below the highest one
// seen have arrived, so a repeat inside that window is a duplicate and a
// first arrival below the highest is out of order. A message older than the
// window is counted as new and out of order (and `too_old`): duplicates that
// late cannot be told apart, which a reorder distance of 8,192 messages
// makes improbable. Not thread-safe (owned by the subscriber's loop thread).
#include <cstdint>
#include <vector>

namespace estuary::bench {

class SequenceTracker {
 public:
  enum class Outcome { kInOrder, kOutOfOrder, kDuplicate };
  static constexpr uint64_t kWindow = 8192;

  Outcome Record(uint64_t sequence);

  uint64_t unique() const { return unique_; }  // distinct messages received
  uint64_t duplicates() const { return duplicates_; }
  uint64_t out_of_order() const { return out_of_order_; }
  uint64_t too_old() const { return too_old_; }

 private:
  bool Test(uint64_t sequence) const;
  void Set(uint64_t sequence);
  void Clear(uint64_t sequence);
  void AdvanceTo(uint64_t sequence);

  std::vector<uint64_t> seen_;  // ring of kWindow bits, allocated on first use
  uint64_t highest_ = 0;
  uint64_t unique_ = 0;
  uint64_t duplicates_ = 0;
  uint64_t out_of_order_ = 0;
  uint64_t too_old_ = 0;
};

}  // namespace estuary::bench
