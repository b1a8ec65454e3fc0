#pragma once
// The Bitcask on-disk format (docs/bitcask_format.md): data-file records,
// batch headers, hint files and file names. Pure functions on bytes, no IO,
// so the readers can be fuzzed.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace estuary::persistence::bitcask {

// crc u32 | seq u64 | timestamp_ms i64 | key_size u32 | value_size u32 | flags u8
constexpr size_t kRecordHeaderSize = 29;
// seq u64 | timestamp_ms i64 | offset u32 | key_size u32 | value_size u32 | flags u8
constexpr size_t kHintEntryHeaderSize = 29;
// magic u32 | count u32 | data_size u64 | crc u32
constexpr size_t kHintTrailerSize = 20;
constexpr uint32_t kHintMagic = 0x544E4845;  // "EHNT" little-endian
// A batch header's value: member count u32 | member bytes u64.
constexpr size_t kBatchHeaderValueSize = 12;

enum RecordFlags : uint8_t {
  kTombstone = 1,    // a delete; value is empty
  kBatchHeader = 2,  // the next `count` records (`bytes` long) are one batch
};

// One put or tombstone, as found in a data file or a hint file.
struct RecordEntry {
  uint64_t seq = 0;
  int64_t timestamp_ms = 0;
  uint32_t offset = 0;  // of the record in its data file
  uint32_t value_size = 0;
  uint8_t flags = 0;
  std::string key;
};

inline uint64_t RecordSize(size_t key_size, uint64_t value_size) {
  return kRecordHeaderSize + key_size + value_size;
}

void AppendRecord(std::string* out, uint64_t seq, int64_t timestamp_ms, uint8_t flags,
                  std::string_view key, std::string_view value);
void AppendBatchHeader(std::string* out, uint64_t seq, int64_t timestamp_ms, uint32_t count,
                       uint64_t member_bytes);

enum class DecodeStatus { kOk, kIncomplete, kCorrupt };

struct DecodedRecord {
  DecodeStatus status = DecodeStatus::kCorrupt;
  uint64_t seq = 0;
  int64_t timestamp_ms = 0;
  uint8_t flags = 0;
  std::string_view key;
  std::string_view value;
  size_t size = 0;  // whole record
};

// Decodes the record starting at `data[offset]`, checking its CRC.
DecodedRecord DecodeRecord(std::string_view data, size_t offset);

struct DataScan {
  std::vector<RecordEntry> entries;  // complete records and complete batches
  uint64_t valid_end = 0;            // end of the last good record
  // The data ended at a zero header and only zeros follow: preallocated
  // space, not damage (the caller trims it without calling it torn).
  bool zero_tail = false;
  std::vector<std::string> problems; // skipped or torn regions, for the log
};

// Reads a whole data file. A bad record (CRC, sizes) followed by a good one
// is skipped (the scan resynchronises at the next offset that decodes); a
// bad region with nothing good after it, or with an aligned zero 4 KiB block
// in it (never-written preallocated space), ends the scan (a torn tail: the
// caller truncates at valid_end). A zero record header ends the data (format
// version 2): the zero-filled tail of a preallocated file. A batch whose
// members are not all intact is dropped whole.
DataScan ScanDataFile(std::string_view data);

std::string EncodeHint(const std::vector<RecordEntry>& entries, uint64_t data_size);
// EncodeHint in pieces, for a hint built while its data file is written:
// entries in file order, then the trailer (which checksums all of `out`).
void AppendHintEntry(std::string* out, const RecordEntry& entry);
void AppendHintEntry(std::string* out, uint64_t seq, int64_t timestamp_ms, uint32_t offset,
                     std::string_view key, uint32_t value_size, uint8_t flags);
void AppendHintTrailer(std::string* out, uint32_t count, uint64_t data_size);
// Nullopt if the hint is torn, corrupt, or describes a data file of another
// size than `data_size`.
std::optional<std::vector<RecordEntry>> DecodeHint(std::string_view hint, uint64_t data_size);

// "0000000042.data" and friends.
std::string DataFileName(uint32_t id);
std::string HintFileName(uint32_t id);
// The id of "NNNNNNNNNN.data", or nullopt for any other name.
std::optional<uint32_t> ParseDataFileName(std::string_view name);

}  // namespace estuary::persistence::bitcask
