#include "persistence/bitcask/format.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>

#include "base/bytes.h"
#include "persistence/bitcask/crc32c.h"

namespace estuary::persistence::bitcask {
namespace {

// The format is little-endian on any host (base/bytes.h's Load/StoreLittle).
void PutRecordFields(std::string* out, uint64_t seq, int64_t timestamp_ms, uint8_t flags,
                     std::string_view key, std::string_view value) {
  // Appends (no per-byte push_back): with the caller's reserve() this is
  // three copies and one CRC pass per record.
  char header[kRecordHeaderSize];
  base::StoreLittle<uint64_t>(header + 4, seq);
  base::StoreLittle<int64_t>(header + 12, timestamp_ms);
  base::StoreLittle<uint32_t>(header + 20, static_cast<uint32_t>(key.size()));
  base::StoreLittle<uint32_t>(header + 24, static_cast<uint32_t>(value.size()));
  header[28] = static_cast<char>(flags);
  size_t start = out->size();
  out->append(header, kRecordHeaderSize);
  out->append(key);
  out->append(value);
  uint32_t crc = Crc32c(std::string_view(*out).substr(start + 4));
  base::StoreLittle<uint32_t>(out->data() + start, crc);
}

// A batch header whose members are not all intact: where the batch ends.
struct BatchCheck {
  bool intact = false;
  uint64_t end = 0;  // offset after the declared members
};

BatchCheck CheckBatch(std::string_view data, size_t header_offset, const DecodedRecord& header,
                      std::vector<RecordEntry>* out) {
  BatchCheck check;
  if (header.value.size() != kBatchHeaderValueSize) return check;
  uint32_t count = base::LoadLittle<uint32_t>(header.value.data());
  uint64_t bytes = base::LoadLittle<uint64_t>(header.value.data() + 4);
  size_t start = header_offset + header.size;
  check.end = start + bytes;
  std::vector<RecordEntry> members;
  size_t pos = start;
  for (uint32_t i = 0; i < count && pos < data.size(); ++i) {
    DecodedRecord member = DecodeRecord(data, pos);
    if (member.status != DecodeStatus::kOk || (member.flags & kBatchHeader)) return check;
    members.push_back(RecordEntry{member.seq, member.timestamp_ms, static_cast<uint32_t>(pos),
                                  static_cast<uint32_t>(member.value.size()), member.flags,
                                  std::string(member.key)});
    pos += member.size;
  }
  if (members.size() != count || pos != check.end) return check;
  check.intact = true;
  for (RecordEntry& member : members) out->push_back(std::move(member));
  return check;
}

// Version 2: no record header is all zeros (seq starts at 1), so a zero
// header where a record should start is the end of the data: the rest is the
// zero-filled space an active file is preallocated with.
bool IsZeroHeader(std::string_view data, size_t offset) {
  size_t end = std::min(data.size(), offset + kRecordHeaderSize);
  for (size_t i = offset; i < end; ++i) {
    if (data[i] != '\0') return false;
  }
  return true;
}

bool AllZero(std::string_view data, size_t from) {
  return data.find_first_not_of('\0', from) == std::string_view::npos;
}

// An aligned, zero-filled 4 KiB block inside [from, to): preallocated space
// that was never written (a write that did not reach the disk while a later
// one did), so nothing after `from` was ever synced.
bool HasUnwrittenBlock(std::string_view data, size_t from, size_t to) {
  constexpr size_t kBlock = 4096;
  for (size_t block = (from + kBlock - 1) / kBlock * kBlock; block + kBlock <= to;
       block += kBlock) {
    if (data.substr(block, kBlock).find_first_not_of('\0') == std::string_view::npos) {
      return true;
    }
  }
  return false;
}

size_t FindNextRecord(std::string_view data, size_t from) {
  for (size_t pos = from; pos + kRecordHeaderSize <= data.size(); ++pos) {
    if (DecodeRecord(data, pos).status == DecodeStatus::kOk) return pos;
  }
  return std::string_view::npos;
}

}  // namespace

void AppendRecord(std::string* out, uint64_t seq, int64_t timestamp_ms, uint8_t flags,
                  std::string_view key, std::string_view value) {
  PutRecordFields(out, seq, timestamp_ms, flags, key, value);
}

void AppendBatchHeader(std::string* out, uint64_t seq, int64_t timestamp_ms, uint32_t count,
                       uint64_t member_bytes) {
  char value[kBatchHeaderValueSize];
  base::StoreLittle<uint32_t>(value, count);
  base::StoreLittle<uint64_t>(value + 4, member_bytes);
  PutRecordFields(out, seq, timestamp_ms, kBatchHeader, {},
                  std::string_view(value, kBatchHeaderValueSize));
}

DecodedRecord DecodeRecord(std::string_view data, size_t offset) {
  DecodedRecord record;
  if (offset + kRecordHeaderSize > data.size()) {
    record.status = DecodeStatus::kIncomplete;
    return record;
  }
  uint64_t key_size = base::LoadLittle<uint32_t>(data.data() + offset + 20);
  uint64_t value_size = base::LoadLittle<uint32_t>(data.data() + offset + 24);
  uint8_t flags = static_cast<uint8_t>(data[offset + 28]);
  if ((flags & ~(kTombstone | kBatchHeader)) != 0 || (flags == (kTombstone | kBatchHeader))) {
    return record;  // unknown flags: corrupt
  }
  uint64_t size = RecordSize(key_size, value_size);
  if (offset + size > data.size()) {
    record.status = DecodeStatus::kIncomplete;
    return record;
  }
  std::string_view body = data.substr(offset + 4, size - 4);
  if (Crc32c(body) != base::LoadLittle<uint32_t>(data.data() + offset)) return record;
  record.status = DecodeStatus::kOk;
  record.seq = base::LoadLittle<uint64_t>(data.data() + offset + 4);
  record.timestamp_ms = base::LoadLittle<int64_t>(data.data() + offset + 12);
  record.flags = flags;
  record.key = data.substr(offset + kRecordHeaderSize, key_size);
  record.value = data.substr(offset + kRecordHeaderSize + key_size, value_size);
  record.size = size;
  return record;
}

DataScan ScanDataFile(std::string_view data) {
  DataScan scan;
  size_t pos = 0;
  while (pos < data.size()) {
    if (IsZeroHeader(data, pos)) {
      scan.zero_tail = AllZero(data, pos);
      if (!scan.zero_tail) {
        scan.problems.push_back("torn tail: a zero-filled gap at offset " + std::to_string(pos) +
                                " and " + std::to_string(data.size() - pos) +
                                " bytes after it dropped");
      }
      return scan;
    }
    DecodedRecord record = DecodeRecord(data, pos);
    if (record.status == DecodeStatus::kOk && !(record.flags & kBatchHeader)) {
      scan.entries.push_back(RecordEntry{record.seq, record.timestamp_ms,
                                         static_cast<uint32_t>(pos),
                                         static_cast<uint32_t>(record.value.size()),
                                         record.flags, std::string(record.key)});
      pos += record.size;
      scan.valid_end = pos;
      continue;
    }
    size_t bad_from = pos;
    if (record.status == DecodeStatus::kOk) {
      BatchCheck batch = CheckBatch(data, pos, record, &scan.entries);
      if (batch.intact) {
        pos = batch.end;
        scan.valid_end = pos;
        continue;
      }
      if (batch.end > data.size() || batch.end <= pos ||
          HasUnwrittenBlock(data, pos, batch.end)) {
        scan.problems.push_back("torn batch at offset " + std::to_string(pos));
        return scan;
      }
      scan.problems.push_back("dropped damaged batch at offset " + std::to_string(pos));
      pos = batch.end;
      continue;
    }
    size_t next = FindNextRecord(data, pos + 1);
    if (next == std::string_view::npos || HasUnwrittenBlock(data, bad_from, next)) {
      scan.problems.push_back("torn or corrupt tail at offset " + std::to_string(bad_from) +
                              " (" + std::to_string(data.size() - bad_from) + " bytes)");
      return scan;
    }
    scan.problems.push_back("skipped corrupt bytes [" + std::to_string(bad_from) + ", " +
                            std::to_string(next) + ")");
    pos = next;
  }
  return scan;
}

void AppendHintEntry(std::string* out, const RecordEntry& entry) {
  AppendHintEntry(out, entry.seq, entry.timestamp_ms, entry.offset, entry.key, entry.value_size,
                  entry.flags);
}

void AppendHintEntry(std::string* out, uint64_t seq, int64_t timestamp_ms, uint32_t offset,
                     std::string_view key, uint32_t value_size, uint8_t flags) {
  char header[kHintEntryHeaderSize];
  base::StoreLittle<uint64_t>(header, seq);
  base::StoreLittle<int64_t>(header + 8, timestamp_ms);
  base::StoreLittle<uint32_t>(header + 16, offset);
  base::StoreLittle<uint32_t>(header + 20, static_cast<uint32_t>(key.size()));
  base::StoreLittle<uint32_t>(header + 24, value_size);
  header[28] = static_cast<char>(flags);
  out->append(header, kHintEntryHeaderSize);
  out->append(key);
}

void AppendHintTrailer(std::string* out, uint32_t count, uint64_t data_size) {
  base::AppendLittle<uint32_t>(*out, kHintMagic);
  base::AppendLittle<uint32_t>(*out, count);
  base::AppendLittle<uint64_t>(*out, data_size);
  base::AppendLittle<uint32_t>(*out, Crc32c(*out));
}

std::string EncodeHint(const std::vector<RecordEntry>& entries, uint64_t data_size) {
  std::string out;
  for (const RecordEntry& entry : entries) AppendHintEntry(&out, entry);
  AppendHintTrailer(&out, static_cast<uint32_t>(entries.size()), data_size);
  return out;
}

std::optional<std::vector<RecordEntry>> DecodeHint(std::string_view hint, uint64_t data_size) {
  if (hint.size() < kHintTrailerSize) return std::nullopt;
  size_t trailer = hint.size() - kHintTrailerSize;
  if (base::LoadLittle<uint32_t>(hint.data() + trailer) != kHintMagic) return std::nullopt;
  if (base::LoadLittle<uint64_t>(hint.data() + trailer + 8) != data_size) return std::nullopt;
  if (Crc32c(hint.substr(0, hint.size() - 4)) != base::LoadLittle<uint32_t>(hint.data() + hint.size() - 4)) {
    return std::nullopt;
  }
  uint32_t count = base::LoadLittle<uint32_t>(hint.data() + trailer + 4);
  std::vector<RecordEntry> entries;
  size_t pos = 0;
  while (pos < trailer) {
    if (pos + kHintEntryHeaderSize > trailer) return std::nullopt;
    RecordEntry entry;
    entry.seq = base::LoadLittle<uint64_t>(hint.data() + pos);
    entry.timestamp_ms = base::LoadLittle<int64_t>(hint.data() + pos + 8);
    entry.offset = base::LoadLittle<uint32_t>(hint.data() + pos + 16);
    uint32_t key_size = base::LoadLittle<uint32_t>(hint.data() + pos + 20);
    entry.value_size = base::LoadLittle<uint32_t>(hint.data() + pos + 24);
    entry.flags = static_cast<uint8_t>(hint[pos + 28]);
    pos += kHintEntryHeaderSize;
    if (key_size > trailer - pos) return std::nullopt;
    if (entry.offset + RecordSize(key_size, entry.value_size) > data_size) return std::nullopt;
    entry.key.assign(hint.substr(pos, key_size));
    pos += key_size;
    entries.push_back(std::move(entry));
  }
  if (entries.size() != count) return std::nullopt;
  return entries;
}

std::string DataFileName(uint32_t id) {
  char name[32];
  std::snprintf(name, sizeof(name), "%010u.data", id);
  return name;
}

std::string HintFileName(uint32_t id) {
  char name[32];
  std::snprintf(name, sizeof(name), "%010u.hint", id);
  return name;
}

std::optional<uint32_t> ParseDataFileName(std::string_view name) {
  if (name.size() != 15 || name.substr(10) != ".data") return std::nullopt;
  uint64_t id = 0;
  for (char c : name.substr(0, 10)) {
    if (c < '0' || c > '9') return std::nullopt;
    id = id * 10 + static_cast<uint64_t>(c - '0');
  }
  if (id > UINT32_MAX) return std::nullopt;
  return static_cast<uint32_t>(id);
}

}  // namespace estuary::persistence::bitcask
