#include "tools/bench/payload.h"

#include <time.h>

namespace estuary::bench {
namespace {

void PutLittleEndian(uint64_t value, int bytes, char* out) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
}

uint64_t GetLittleEndian(const char* in, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= uint64_t{static_cast<uint8_t>(in[i])} << (8 * i);
  return value;
}

}  // namespace

void WritePayloadHeader(const PayloadHeader& header, std::string& payload) {
  char* out = payload.data();
  PutLittleEndian(header.run_id, 4, out);
  PutLittleEndian(header.publisher, 4, out + 4);
  PutLittleEndian(header.sequence, 8, out + 8);
  PutLittleEndian(static_cast<uint64_t>(header.sent_ns), 8, out + 16);
}

std::optional<PayloadHeader> ReadPayloadHeader(std::string_view payload) {
  if (payload.size() < kPayloadHeaderSize) return std::nullopt;
  const char* in = payload.data();
  PayloadHeader header;
  header.run_id = static_cast<uint32_t>(GetLittleEndian(in, 4));
  header.publisher = static_cast<uint32_t>(GetLittleEndian(in + 4, 4));
  header.sequence = GetLittleEndian(in + 8, 8);
  header.sent_ns = static_cast<int64_t>(GetLittleEndian(in + 16, 8));
  return header;
}

int64_t MonotonicNowNs() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

}  // namespace estuary::bench
