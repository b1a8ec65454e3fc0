#pragma once
// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), no dependencies.
// Uses the SSE 4.2 crc32 instruction where the CPU has it, a table
// otherwise. Crc32c("123456789") == 0xE3069283.
#include <cstdint>
#include <string_view>

namespace estuary::persistence::bitcask {

// Continues a CRC: Crc32c(b, Crc32c(a)) == Crc32c(a + b).
uint32_t Crc32c(std::string_view data, uint32_t crc = 0);

// The table-driven kernel alone (the reference the fast path is tested against).
uint32_t Crc32cPortable(std::string_view data, uint32_t crc = 0);

}  // namespace estuary::persistence::bitcask
