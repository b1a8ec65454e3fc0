#pragma once
// For tests that pin a wire or disk format: an exact, short fingerprint of
// encoded bytes ("<size> bytes fnv1a64=<hex>"). Any changed, added or lost
// byte changes it, so a refactor of an encoder that keeps the string equal
// kept the format; the test that pins it names the values encoded.
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "base/hash.h"

namespace estuary::base {

inline std::string PinnedBytes(std::string_view bytes) {
  char text[64];
  std::snprintf(text, sizeof text, "%zu bytes fnv1a64=%016llx", bytes.size(),
                static_cast<unsigned long long>(Fnv1a64(bytes)));
  return text;
}

inline std::string PinnedBytes(const std::vector<uint8_t>& bytes) {
  return PinnedBytes(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

}  // namespace estuary::base
