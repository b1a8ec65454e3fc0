// Wire primitives (§1.5): integers, variable byte integers, strings.
#include <gtest/gtest.h>

#include "frontends/mqtt/codec/test_util.h"
#include "frontends/mqtt/codec/wire_reader.h"
#include "frontends/mqtt/codec/wire_writer.h"

namespace estuary::mqtt {
namespace {

using testing::Bytes;

std::string WriteVariableByteInteger(uint32_t value) {
  std::string out;
  WireWriter writer(out);
  writer.VariableByteInteger(value);
  EXPECT_EQ(writer.size(), out.size());
  return out;
}

// The table of §1.5.5 (3.1.1 §2.2.3): the edges of each encoded length.
TEST(VariableByteIntegerTest, SpecTableEdges) {
  const std::pair<uint32_t, std::string> cases[] = {
      {0, Bytes({0x00})},
      {127, Bytes({0x7F})},
      {128, Bytes({0x80, 0x01})},
      {16'383, Bytes({0xFF, 0x7F})},
      {16'384, Bytes({0x80, 0x80, 0x01})},
      {2'097'151, Bytes({0xFF, 0xFF, 0x7F})},
      {2'097'152, Bytes({0x80, 0x80, 0x80, 0x01})},
      {268'435'455, Bytes({0xFF, 0xFF, 0xFF, 0x7F})},
  };
  for (const auto& [value, bytes] : cases) {
    SCOPED_TRACE(value);
    EXPECT_EQ(WriteVariableByteInteger(value), bytes);
    EXPECT_EQ(VariableByteIntegerSize(value), bytes.size());
    WireReader reader(bytes);
    EXPECT_EQ(reader.VariableByteInteger(), value);
    EXPECT_TRUE(reader.ok());
    EXPECT_TRUE(reader.empty());
  }
}

TEST(VariableByteIntegerTest, FiveBytesAreMalformed) {
  const std::string reader_input = Bytes({0xFF, 0xFF, 0xFF, 0xFF, 0x7F});
  WireReader reader(reader_input);
  reader.VariableByteInteger();
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.error().reason, ReasonCode::kMalformedPacket);
}

TEST(VariableByteIntegerTest, NonMinimalEncodingIsMalformed) {
  const std::string reader_input = Bytes({0x80, 0x00});
  WireReader reader(reader_input);
  reader.VariableByteInteger();
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.error().reason, ReasonCode::kMalformedPacket);
}

TEST(VariableByteIntegerTest, TruncatedIsMalformed) {
  const std::string reader_input = Bytes({0x80, 0x80});
  WireReader reader(reader_input);
  reader.VariableByteInteger();
  EXPECT_EQ(reader.error().reason, ReasonCode::kMalformedPacket);
}

TEST(WireReaderTest, IntegersAreBigEndian) {
  const std::string reader_input = Bytes({0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC, 0xDE});
  WireReader reader(reader_input);
  EXPECT_EQ(reader.Byte(), 0x12);
  EXPECT_EQ(reader.TwoByteInteger(), 0x3456);
  EXPECT_EQ(reader.FourByteInteger(), 0x789ABCDEu);
  EXPECT_TRUE(reader.ok());
  EXPECT_TRUE(reader.empty());
}

// §1.5.4 example: "A" followed by U+2A6D4.
TEST(WireReaderTest, Utf8StringSpecExample) {
  const std::string bytes = Bytes({0x00, 0x05, 0x41, 0xF0, 0xAA, 0x9B, 0x94});
  WireReader reader(bytes);
  EXPECT_EQ(reader.Utf8String(), "A\xF0\xAA\x9B\x94");
  EXPECT_TRUE(reader.ok());
  std::string out;
  WireWriter(out).String("A\xF0\xAA\x9B\x94");
  EXPECT_EQ(out, bytes);
}

TEST(WireReaderTest, IllFormedUtf8IsMalformed) {
  for (const std::string& text :
       {Bytes({0xC0, 0x80}), Bytes({0xED, 0xA0, 0x80}), Bytes({0x00}), Bytes({0xFF}),
        Bytes({0xE2, 0x82})}) {
    const std::string field = testing::Str(text);
    WireReader reader(field);
    reader.Utf8String();
    ASSERT_FALSE(reader.ok()) << testing::Hex(text);
    EXPECT_EQ(reader.error().reason, ReasonCode::kMalformedPacket);
  }
}

TEST(WireReaderTest, BinaryDataMayHoldAnyByte) {
  const std::string field = testing::Str(Bytes({0x00, 0xFF, 0xC0}));
  WireReader reader(field);
  EXPECT_EQ(reader.BinaryData(), Bytes({0x00, 0xFF, 0xC0}));
  EXPECT_TRUE(reader.ok());
}

TEST(WireReaderTest, StringLongerThanInputIsMalformed) {
  const std::string reader_input = Bytes({0x00, 0x05, 'a', 'b'});
  WireReader reader(reader_input);
  reader.Utf8String();
  EXPECT_EQ(reader.error().reason, ReasonCode::kMalformedPacket);
}

TEST(WireReaderTest, FirstErrorSticksAndLaterReadsReturnZero) {
  const std::string reader_input = Bytes({0x01, 0x02, 0x03});
  WireReader reader(reader_input);
  reader.FourByteInteger();
  ASSERT_FALSE(reader.ok());
  reader.Fail(ReasonCode::kProtocolError, "second");
  EXPECT_EQ(reader.error().reason, ReasonCode::kMalformedPacket);
  EXPECT_EQ(reader.Byte(), 0);
  EXPECT_TRUE(reader.empty());
}

TEST(WireReaderTest, VersionHintIsAttachedToEarlierAndLaterErrors) {
  const std::string later_input = Bytes({});
  WireReader later(later_input);
  later.SetVersionHint(ProtocolVersion::kV5);
  later.Byte();
  EXPECT_EQ(later.error().version_hint, ProtocolVersion::kV5);

  const std::string earlier_input = Bytes({});
  WireReader earlier(earlier_input);
  earlier.Byte();
  earlier.SetVersionHint(ProtocolVersion::kV311);
  EXPECT_EQ(earlier.error().version_hint, ProtocolVersion::kV311);
}

TEST(WireWriterTest, CountingWriterWritesNothing) {
  WireWriter counter;
  counter.String("abc");
  counter.VariableByteInteger(200);
  counter.FourByteInteger(1);
  EXPECT_TRUE(counter.counting());
  EXPECT_EQ(counter.size(), 5u + 2u + 4u);
}

}  // namespace
}  // namespace estuary::mqtt
