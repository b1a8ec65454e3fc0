#include "persistence/bitcask/format.h"

#include <gtest/gtest.h>

#include <random>

#include "base/pinned_bytes.h"
#include "persistence/bitcask/crc32c.h"
#include "persistence/bitcask/merge_manifest.h"

namespace estuary::persistence::bitcask {
namespace {

TEST(Crc32c, FastPathMatchesTableAtEveryLengthAndAlignment) {
  std::mt19937 rng(7);
  std::string buffer(300, '\0');
  for (char& c : buffer) c = static_cast<char>(rng());
  for (size_t offset = 0; offset < 9; ++offset) {
    for (size_t length = 0; offset + length <= buffer.size(); length += 7) {
      std::string_view slice(buffer.data() + offset, length);
      ASSERT_EQ(Crc32c(slice, 0x1234u), Crc32cPortable(slice, 0x1234u)) << offset << "+" << length;
    }
  }
  EXPECT_EQ(Crc32cPortable("123456789"), 0xE3069283u);
}

TEST(Crc32c, ThreeStreamPathMatchesTableOnLargeInputs) {
  std::mt19937 rng(11);
  std::string buffer(20000, '\0');
  for (char& c : buffer) c = static_cast<char>(rng());
  for (size_t length : {767u, 768u, 769u, 1536u, 2000u, 16413u, 19990u}) {
    for (size_t offset = 0; offset < 4; ++offset) {
      std::string_view slice(buffer.data() + offset, length);
      ASSERT_EQ(Crc32c(slice, 0x5678u), Crc32cPortable(slice, 0x5678u)) << offset << "+" << length;
    }
  }
}

TEST(Crc32c, KnownVectors) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(""), 0u);
  EXPECT_EQ(Crc32c("6789", Crc32c("12345")), Crc32c("123456789"));
}

TEST(Format, RecordRoundTripAndCrcCheck) {
  std::string data;
  AppendRecord(&data, 7, 1234, 0, "key", "value");
  ASSERT_EQ(data.size(), RecordSize(3, 5));
  DecodedRecord record = DecodeRecord(data, 0);
  ASSERT_EQ(record.status, DecodeStatus::kOk);
  EXPECT_EQ(record.seq, 7u);
  EXPECT_EQ(record.timestamp_ms, 1234);
  EXPECT_EQ(record.key, "key");
  EXPECT_EQ(record.value, "value");
  data[data.size() - 1] ^= 1;
  EXPECT_EQ(DecodeRecord(data, 0).status, DecodeStatus::kCorrupt);
  EXPECT_EQ(DecodeRecord(data.substr(0, 10), 0).status, DecodeStatus::kIncomplete);
}

std::string ThreeRecords() {
  std::string data;
  AppendRecord(&data, 1, 0, 0, "a", "1");
  AppendRecord(&data, 2, 0, 0, "b", "2");
  AppendRecord(&data, 3, 0, kTombstone, "a", "");
  return data;
}

TEST(Format, ScanFindsAllRecords) {
  DataScan scan = ScanDataFile(ThreeRecords());
  ASSERT_EQ(scan.entries.size(), 3u);
  EXPECT_EQ(scan.entries[1].key, "b");
  EXPECT_EQ(scan.entries[1].offset, RecordSize(1, 1));
  EXPECT_EQ(scan.entries[2].flags, kTombstone);
  EXPECT_EQ(scan.valid_end, ThreeRecords().size());
  EXPECT_TRUE(scan.problems.empty());
}

TEST(Format, ScanStopsAtATornTail) {
  std::string data = ThreeRecords();
  std::string torn = data.substr(0, data.size() - 3);
  DataScan scan = ScanDataFile(torn);
  EXPECT_EQ(scan.entries.size(), 2u);
  EXPECT_EQ(scan.valid_end, 2 * RecordSize(1, 1));
  ASSERT_EQ(scan.problems.size(), 1u);
}

TEST(Format, ScanSkipsACorruptRecordInTheMiddle) {
  std::string data = ThreeRecords();
  data[RecordSize(1, 1) + 5] ^= 0x10;  // inside record "b"'s sequence number
  DataScan scan = ScanDataFile(data);
  ASSERT_EQ(scan.entries.size(), 2u);
  EXPECT_EQ(scan.entries[0].key, "a");
  EXPECT_EQ(scan.entries[1].seq, 3u);
  EXPECT_EQ(scan.valid_end, data.size());
}

std::string Batch() {
  std::string members;
  AppendRecord(&members, 10, 0, 0, "x", "1");
  AppendRecord(&members, 11, 0, 0, "y", "2");
  std::string data;
  AppendBatchHeader(&data, 10, 0, 2, members.size());
  return data + members;
}

TEST(Format, BatchIsAllOrNothing) {
  std::string data = ThreeRecords() + Batch();
  EXPECT_EQ(ScanDataFile(data).entries.size(), 5u);
  // Torn in its second member: neither member survives, the tail is cut at
  // the batch header.
  DataScan torn = ScanDataFile(data.substr(0, data.size() - 2));
  EXPECT_EQ(torn.entries.size(), 3u);
  EXPECT_EQ(torn.valid_end, ThreeRecords().size());
  // Damaged in the middle of a file: the batch is dropped, the rest kept.
  std::string damaged = data + ThreeRecords();
  damaged[ThreeRecords().size() + RecordSize(0, kBatchHeaderValueSize) + 30] ^= 1;
  DataScan scan = ScanDataFile(damaged);
  EXPECT_EQ(scan.entries.size(), 6u);
  EXPECT_EQ(scan.valid_end, damaged.size());
}

TEST(Format, HintRoundTripAndRejection) {
  DataScan scan = ScanDataFile(ThreeRecords());
  uint64_t size = ThreeRecords().size();
  std::string hint = EncodeHint(scan.entries, size);
  auto decoded = DecodeHint(hint, size);
  ASSERT_TRUE(decoded);
  ASSERT_EQ(decoded->size(), 3u);
  EXPECT_EQ((*decoded)[1].key, "b");
  EXPECT_EQ((*decoded)[1].offset, scan.entries[1].offset);
  EXPECT_FALSE(DecodeHint(hint, size + 1));              // data file changed
  EXPECT_FALSE(DecodeHint(hint.substr(0, hint.size() - 1), size));  // torn
  std::string flipped = hint;
  flipped[3] ^= 4;
  EXPECT_FALSE(DecodeHint(flipped, size));
  EXPECT_FALSE(DecodeHint("", size));
}

TEST(Format, FileNames) {
  EXPECT_EQ(DataFileName(42), "0000000042.data");
  EXPECT_EQ(HintFileName(42), "0000000042.hint");
  EXPECT_EQ(ParseDataFileName("0000000042.data"), 42u);
  EXPECT_FALSE(ParseDataFileName("0000000042.hint"));
  EXPECT_FALSE(ParseDataFileName("0000000042.data.merge"));
  EXPECT_FALSE(ParseDataFileName("00000000x2.data"));
}

TEST(MergeManifest, RoundTripAndCorruption) {
  MergeManifest manifest{{7, 8}, {1, 2, 3}};
  std::string text = EncodeMergeManifest(manifest);
  auto decoded = DecodeMergeManifest(text);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->outputs, manifest.outputs);
  EXPECT_EQ(decoded->obsolete, manifest.obsolete);
  EXPECT_FALSE(DecodeMergeManifest(text.substr(0, text.size() - 2)));
  std::string changed = text;
  changed[text.find("1 2")] = '9';
  EXPECT_FALSE(DecodeMergeManifest(changed));
  EXPECT_TRUE(DecodeMergeManifest(EncodeMergeManifest({{}, {4}})));
}

// Records, batches and hints, pinned to the byte (issue 23: the byte codec
// was replaced; files written before must still be read).
TEST(Format, BytesArePinned) {
  std::string records;
  AppendRecord(&records, 0x0102030405060708ULL, -5, 0, "key", "value");
  AppendRecord(&records, 2, 1700000000000, kTombstone, "a", "");
  EXPECT_EQ(base::PinnedBytes(records), "67 bytes fnv1a64=2e22a7f7f1e04849");
  EXPECT_EQ(base::PinnedBytes(Batch()), "103 bytes fnv1a64=5e32eff2aefaf895");
  DataScan scan = ScanDataFile(ThreeRecords());
  EXPECT_EQ(base::PinnedBytes(EncodeHint(scan.entries, ThreeRecords().size())), "110 bytes fnv1a64=5479e8cd1284c404");
}

}  // namespace
}  // namespace estuary::persistence::bitcask
