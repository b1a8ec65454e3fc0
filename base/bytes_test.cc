#include "base/bytes.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace estuary::base {
namespace {

std::string Hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

TEST(Bytes, AppendWritesTheStatedOrder) {
  std::string big;
  AppendBig<uint16_t>(big, 0x0102);
  AppendBig<uint32_t>(big, 0x03040506);
  AppendBig<uint64_t>(big, 0x0708090a0b0c0d0eULL);
  EXPECT_EQ(Hex(big), "0102030405060708090a0b0c0d0e");
  std::string little;
  AppendLittle<uint16_t>(little, 0x0102);
  AppendLittle<uint32_t>(little, 0x03040506);
  AppendLittle<uint64_t>(little, 0x0708090a0b0c0d0eULL);
  EXPECT_EQ(Hex(little), "0201060504030e0d0c0b0a090807");
}

TEST(Bytes, AppendToAByteVector) {
  std::vector<uint8_t> out;
  AppendLittle<uint64_t>(out, 0x0102030405060708ULL);
  EXPECT_EQ(out, (std::vector<uint8_t>{8, 7, 6, 5, 4, 3, 2, 1}));
}

TEST(Bytes, LoadAndStoreRoundTripSignedValues) {
  char at[8];
  StoreLittle<int64_t>(at, -2);
  EXPECT_EQ(Hex(std::string_view(at, 8)), "feffffffffffffff");
  EXPECT_EQ(LoadLittle<int64_t>(at), -2);
  StoreBig<uint32_t>(at, 0xdeadbeef);
  EXPECT_EQ(Hex(std::string_view(at, 4)), "deadbeef");
  EXPECT_EQ(LoadBig<uint32_t>(at), 0xdeadbeefu);
  EXPECT_EQ(LoadBig<uint16_t>(at + 2), 0xbeefu);
}

TEST(Bytes, WriterFieldsAndLengthPrefixes) {
  BigEndianWriter writer;
  writer.U8(1);
  writer.U16(0x0203);
  writer.Bytes("ab");
  writer.Bytes16("c");
  writer.Raw("d");
  EXPECT_EQ(Hex(writer.str()), "0102030000000261620001" "63" "64");
  LittleEndianWriter little;
  little.U32(1);
  little.Bytes(std::vector<uint8_t>{9});
  EXPECT_EQ(Hex(little.Take()), "010000000100000009");
}

TEST(Bytes, ReaderReadsWhatTheWriterWrote) {
  LittleEndianWriter writer;
  writer.U8(7);
  writer.U16(0xabcd);
  writer.U32(0x01020304);
  writer.U64(0x1122334455667788ULL);
  writer.U8(1);
  writer.Bytes("xyz");
  writer.Bytes16("pq");
  const std::string bytes = writer.Take();
  LittleEndianReader reader(bytes);
  EXPECT_EQ(reader.U8(), 7);
  EXPECT_EQ(reader.U16(), 0xabcd);
  EXPECT_EQ(reader.U32(), 0x01020304u);
  EXPECT_EQ(reader.U64(), 0x1122334455667788ULL);
  EXPECT_TRUE(reader.Bool());
  EXPECT_EQ(reader.Bytes(), "xyz");
  EXPECT_EQ(reader.Bytes16(), "pq");
  EXPECT_TRUE(reader.done());
}

TEST(Bytes, AShortReadMarksTheReaderBadForGood) {
  BigEndianReader reader(std::string_view("\x00\x01\x02", 3));
  EXPECT_EQ(reader.U16(), 1);
  EXPECT_EQ(reader.U16(), 0);  // one byte left
  EXPECT_FALSE(reader.ok());
  EXPECT_EQ(reader.U8(), 0);  // the byte that was left is not handed out
  EXPECT_FALSE(reader.done());
}

TEST(Bytes, MalformedFieldsFail) {
  BigEndianReader bad_bool(std::string_view("\x02", 1));
  bad_bool.Bool();
  EXPECT_FALSE(bad_bool.ok());
  // A length larger than the bytes left.
  BigEndianReader long_bytes(std::string_view("\x00\x00\x00\x05" "abc", 7));
  EXPECT_EQ(long_bytes.Bytes(), "");
  EXPECT_FALSE(long_bytes.ok());
  // A count of 3 items of at least 4 bytes in 8 bytes.
  BigEndianReader count(std::string_view("\x00\x00\x00\x03" "abcdefgh", 12));
  EXPECT_EQ(count.Count(4), 0u);
  EXPECT_FALSE(count.ok());
  BigEndianReader fine(std::string_view("\x00\x00\x00\x02" "abcdefgh", 12));
  EXPECT_EQ(fine.Count(4), 2u);
  EXPECT_EQ(fine.rest(), "abcdefgh");
}

}  // namespace
}  // namespace estuary::base
