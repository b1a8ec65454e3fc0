#pragma once
// Stable hashes for placement. Every node must compute the same partition for
// a key and the same ring for a membership list, on every build and platform,
// so these are written here (FNV-1a 64 and the SplitMix64 finaliser) rather
// than taken from std::hash, which is allowed to differ between builds.
// Changing either function changes where every key lives: it is part of the
// cluster's persistent contract (docs/placement.md).
#include <cstdint>
#include <string_view>

namespace estuary::ring {

// FNV-1a, 64-bit: byte-wise, no alignment or endianness dependence.
constexpr std::uint64_t Fnv1a64(std::string_view bytes) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (char c : bytes) {
    hash ^= static_cast<std::uint8_t>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

// SplitMix64 finaliser: spreads every input bit over every output bit, which
// FNV alone does poorly for the low bits that `mod P` keeps.
constexpr std::uint64_t Mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

constexpr std::uint64_t StableHash(std::string_view bytes) { return Mix64(Fnv1a64(bytes)); }

}  // namespace estuary::ring
