#pragma once
// The merge manifest ("MERGE"): the commit point of a merge. While it
// exists, the merge's output files (still named *.merge) replace its
// obsolete inputs; recovery finishes the job (docs/bitcask_format.md).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace estuary::persistence::bitcask {

inline constexpr const char* kMergeManifestName = "MERGE";

struct MergeManifest {
  std::vector<uint32_t> outputs;
  std::vector<uint32_t> obsolete;
};

std::string EncodeMergeManifest(const MergeManifest& manifest);
// Nullopt when the text is incomplete or its CRC does not match.
std::optional<MergeManifest> DecodeMergeManifest(std::string_view text);

}  // namespace estuary::persistence::bitcask
