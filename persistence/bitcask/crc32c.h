#pragma once
// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), table driven, no
// dependencies. Crc32c("123456789") == 0xE3069283.
#include <cstdint>
#include <string_view>

namespace estuary::persistence::bitcask {

// Continues a CRC: Crc32c(b, Crc32c(a)) == Crc32c(a + b).
uint32_t Crc32c(std::string_view data, uint32_t crc = 0);

}  // namespace estuary::persistence::bitcask
