#pragma once
// Stable hashes: the same value on every build, platform and process,
// which std::hash does not promise. Placement (which partition a key is
// in, cluster-core/ring), the shard a client id lives on and the sticky
// shared-subscription pick all depend on them, so changing one moves
// data: these functions are part of the cluster's persistent contract
// (docs/placement.md). All are constexpr and byte-wise (no alignment or
// endianness dependence).
#include <cstdint>
#include <string_view>

namespace estuary::base {

inline constexpr std::uint32_t kFnv1a32Offset = 2166136261u;
inline constexpr std::uint64_t kFnv1a64Offset = 0xcbf29ce484222325ULL;

// FNV-1a, 32-bit. `hash` continues an earlier call (hashing a then b is
// Fnv1a32(b, Fnv1a32(a))).
constexpr std::uint32_t Fnv1a32(std::string_view bytes, std::uint32_t hash = kFnv1a32Offset) {
  for (char c : bytes) {
    hash ^= static_cast<std::uint8_t>(c);
    hash *= 16777619u;
  }
  return hash;
}

// FNV-1a, 64-bit; `hash` continues an earlier call, as for Fnv1a32.
constexpr std::uint64_t Fnv1a64(std::string_view bytes, std::uint64_t hash = kFnv1a64Offset) {
  for (char c : bytes) {
    hash ^= static_cast<std::uint8_t>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

// SplitMix64 finaliser: spreads every input bit over every output bit,
// which FNV alone does poorly for the low bits that `mod P` keeps.
constexpr std::uint64_t Mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// FNV-1a 64 then the finaliser: the well-spread stable hash.
constexpr std::uint64_t StableHash(std::string_view bytes) { return Mix64(Fnv1a64(bytes)); }

}  // namespace estuary::base
