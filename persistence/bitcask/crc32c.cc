#include "persistence/bitcask/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace estuary::persistence::bitcask {
namespace {

constexpr std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1) ? 0x82F63B78u : 0u);
    table[i] = crc;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kTable = MakeTable();

// `crc` is the inverted running value in both kernels.
uint32_t SoftwareKernel(std::string_view data, uint32_t crc) {
  for (unsigned char byte : data) crc = kTable[(crc ^ byte) & 0xFF] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
// SSE 4.2's crc32 instruction computes exactly CRC-32C (Castagnoli), eight
// bytes per instruction: recovery of a large data set spends most of its
// time here (docs/benchmarks.md), so it is worth the second kernel.
//
// The instruction's latency is three cycles and one can start every cycle,
// so large inputs run three independent streams over adjacent blocks and
// join them: a raw CRC is linear, so crc(a|b|c) = Z2(crc(a)) ^ Z1(crc(b)) ^
// crc(c), where crc(b) and crc(c) start from 0 and Z1/Z2 append kBlock /
// 2 * kBlock zero bytes (a 32x32 bit matrix, applied with four byte tables).
constexpr size_t kBlock = 256;

struct ShiftTable {
  uint32_t bytes[4][256];
  uint32_t Apply(uint32_t crc) const {
    return bytes[0][crc & 0xFF] ^ bytes[1][(crc >> 8) & 0xFF] ^ bytes[2][(crc >> 16) & 0xFF] ^
           bytes[3][crc >> 24];
  }
};

__attribute__((target("sse4.2"))) uint32_t AppendZeros(uint32_t crc, size_t n) {
  uint64_t wide = crc;
  for (size_t i = 0; i < n / 8; ++i) wide = _mm_crc32_u64(wide, 0);
  return static_cast<uint32_t>(wide);
}

ShiftTable MakeShiftTable(size_t zeros) {
  uint32_t basis[32];
  for (int bit = 0; bit < 32; ++bit) basis[bit] = AppendZeros(1u << bit, zeros);
  ShiftTable table{};
  for (int k = 0; k < 4; ++k) {
    for (uint32_t v = 0; v < 256; ++v) {
      uint32_t image = 0;
      for (int bit = 0; bit < 8; ++bit) {
        if (v & (1u << bit)) image ^= basis[8 * k + bit];
      }
      table.bytes[k][v] = image;
    }
  }
  return table;
}

__attribute__((target("sse4.2"))) uint32_t ThreeStreams(const char*& p, size_t& n, uint32_t crc) {
  static const ShiftTable kOne = MakeShiftTable(kBlock);
  static const ShiftTable kTwo = MakeShiftTable(2 * kBlock);
  while (n >= 3 * kBlock) {
    uint64_t a = crc;
    uint64_t b = 0;
    uint64_t c = 0;
    for (size_t i = 0; i < kBlock; i += 8) {
      uint64_t wa, wb, wc;
      std::memcpy(&wa, p + i, 8);
      std::memcpy(&wb, p + kBlock + i, 8);
      std::memcpy(&wc, p + 2 * kBlock + i, 8);
      a = _mm_crc32_u64(a, wa);
      b = _mm_crc32_u64(b, wb);
      c = _mm_crc32_u64(c, wc);
    }
    crc = kTwo.Apply(static_cast<uint32_t>(a)) ^ kOne.Apply(static_cast<uint32_t>(b)) ^
          static_cast<uint32_t>(c);
    p += 3 * kBlock;
    n -= 3 * kBlock;
  }
  return crc;
}

__attribute__((target("sse4.2"))) uint32_t HardwareKernel(std::string_view data, uint32_t crc) {
  const char* p = data.data();
  size_t n = data.size();
  if (n >= 3 * kBlock) crc = ThreeStreams(p, n, crc);
  uint64_t wide = crc;
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    wide = _mm_crc32_u64(wide, word);
    p += 8;
    n -= 8;
  }
  crc = static_cast<uint32_t>(wide);
  while (n > 0) {
    crc = _mm_crc32_u8(crc, static_cast<unsigned char>(*p));
    ++p;
    --n;
  }
  return crc;
}

bool HasHardwareCrc() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#endif

}  // namespace

uint32_t Crc32c(std::string_view data, uint32_t crc) {
#if defined(__x86_64__)
  if (HasHardwareCrc()) return ~HardwareKernel(data, ~crc);
#endif
  return ~SoftwareKernel(data, ~crc);
}

uint32_t Crc32cPortable(std::string_view data, uint32_t crc) { return ~SoftwareKernel(data, ~crc); }

}  // namespace estuary::persistence::bitcask
