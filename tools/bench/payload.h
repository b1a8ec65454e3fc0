#pragma once
// The 24 bytes estuary-bench puts at the start of every payload, so a
// subscriber can tell whose message it got, which one, and when it left:
//
//   offset 0  u32 run id    (random per run: messages of other runs are ignored)
//   offset 4  u32 publisher (0-based index)
//   offset 8  u64 sequence  (per publisher, from 0)
//   offset 16 i64 sent time (CLOCK_MONOTONIC ns of the sending process)
//
// All little-endian. The rest of the payload is filler.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace estuary::bench {

struct PayloadHeader {
  uint32_t run_id = 0;
  uint32_t publisher = 0;
  uint64_t sequence = 0;
  int64_t sent_ns = 0;
  friend bool operator==(const PayloadHeader&, const PayloadHeader&) = default;
};

inline constexpr size_t kPayloadHeaderSize = 24;

// Overwrites the first kPayloadHeaderSize bytes of `payload` (which must be
// at least that long).
void WritePayloadHeader(const PayloadHeader& header, std::string& payload);
// nullopt when the payload is too short to carry a header.
std::optional<PayloadHeader> ReadPayloadHeader(std::string_view payload);

// CLOCK_MONOTONIC in nanoseconds: the clock of the embedded timestamps.
int64_t MonotonicNowNs();

}  // namespace estuary::bench
