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
__attribute__((target("sse4.2"))) uint32_t HardwareKernel(std::string_view data, uint32_t crc) {
  const char* p = data.data();
  size_t n = data.size();
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
