// libFuzzer target for the readers of outside bytes: data files, hint files
// and the merge manifest (-DESTUARY_FUZZ=ON, clang).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "persistence/bitcask/format.h"
#include "persistence/bitcask/merge_manifest.h"

using namespace estuary::persistence::bitcask;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  DataScan scan = ScanDataFile(bytes);
  if (scan.valid_end > size) std::abort();
  for (const RecordEntry& entry : scan.entries) {
    if (entry.offset + RecordSize(entry.key.size(), entry.value_size) > size) std::abort();
  }
  // A hint of the scan must decode to the same entries.
  auto hint = DecodeHint(EncodeHint(scan.entries, size), size);
  if (!hint || hint->size() != scan.entries.size()) std::abort();
  // And arbitrary bytes as a hint must never describe records past the end.
  for (uint64_t data_size : {uint64_t{0}, uint64_t{size}, uint64_t{1} << 20}) {
    if (auto entries = DecodeHint(bytes, data_size)) {
      for (const RecordEntry& entry : *entries) {
        if (entry.offset + RecordSize(entry.key.size(), entry.value_size) > data_size) std::abort();
      }
    }
  }
  (void)DecodeMergeManifest(bytes);
  return 0;
}
