// Every packet type in every version: encode, decode, compare.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "frontends/mqtt/codec/test_util.h"

namespace estuary::mqtt {
namespace {

using testing::Encode;
using testing::Hex;
using testing::SamplePackets;

class RoundTripTest : public ::testing::TestWithParam<ProtocolVersion> {};

TEST_P(RoundTripTest, EncodeThenDecodeGivesThePacketBack) {
  const ProtocolVersion version = GetParam();
  for (const auto& [name, packet] : SamplePackets(version)) {
    SCOPED_TRACE(name);
    const std::string bytes = Encode(packet, version);
    EXPECT_EQ(bytes.size(), EncodedSize(packet, version));
    auto frame = PeekFrame(bytes, 1 << 30);
    ASSERT_TRUE(frame.has_value());
    EXPECT_EQ(frame->total_size(), bytes.size());
    EXPECT_EQ(frame->type(), TypeOf(packet));
    auto decoded = DecodePacket(bytes, version);
    ASSERT_TRUE(decoded.has_value()) << decoded.error().message << "\n" << Hex(bytes);
    EXPECT_EQ(*decoded, packet) << Hex(bytes);
    EXPECT_EQ(Encode(*decoded, version), bytes);
  }
}

TEST_P(RoundTripTest, SamplesCoverEveryPacketTypeTheVersionHas) {
  const ProtocolVersion version = GetParam();
  std::set<PacketType> types;
  for (const auto& sample : SamplePackets(version)) types.insert(TypeOf(sample.packet));
  EXPECT_EQ(types.size(), version == ProtocolVersion::kV5 ? 15u : 14u);
}

TEST_P(RoundTripTest, EncodePacketAppendsToExistingBytes) {
  const ProtocolVersion version = GetParam();
  std::string out = "prefix";
  std::string expected = "prefix";
  for (const auto& sample : SamplePackets(version)) {
    EncodePacket(sample.packet, version, out);
    expected += Encode(sample.packet, version);
  }
  EXPECT_EQ(out, expected);
}

INSTANTIATE_TEST_SUITE_P(AllVersions, RoundTripTest, ::testing::ValuesIn(testing::kAllVersions),
                         [](const auto& test_param) {
                           return testing::VersionName(test_param.param);
                         });

TEST(RoundTripTest, AuthIsNotEncodedBeforeV5) {
  EXPECT_EQ(Encode(AuthPacket{}, ProtocolVersion::kV311), "");
  EXPECT_EQ(EncodedSize(AuthPacket{}, ProtocolVersion::kV311), 0u);
}

TEST(RoundTripTest, V5FieldsAreDroppedForV311) {
  PublishPacket publish{false, 1, false, "t", 5, {}, "p"};
  publish.properties.message_expiry_interval = 10;
  auto decoded = DecodePacket(Encode(publish, ProtocolVersion::kV311), ProtocolVersion::kV311);
  ASSERT_TRUE(decoded.has_value());
  publish.properties = {};
  EXPECT_EQ(*decoded, Packet(publish));
}

// The committed seeds are packets the codec still accepts: each file is a
// sequence of frames that all decode in at least one version.
TEST(SeedCorpus, CommittedSeedsDecode) {
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(MQTT_CODEC_CORPUS_DIR)) {
    std::string bytes(std::filesystem::file_size(entry.path()), '\0');
    std::ifstream(entry.path(), std::ios::binary)
        .read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    std::string_view rest = bytes;
    while (!rest.empty()) {
      auto header = PeekFrame(rest, 1 << 20);
      ASSERT_TRUE(header.has_value() && header->header_size != 0) << entry.path();
      ASSERT_LE(header->total_size(), rest.size()) << entry.path();
      const std::string_view frame = rest.substr(0, header->total_size());
      bool decoded = false;
      for (ProtocolVersion version : testing::kAllVersions) {
        decoded = decoded || DecodePacket(frame, version).has_value();
      }
      EXPECT_TRUE(decoded) << entry.path();
      rest.remove_prefix(frame.size());
    }
    ++files;
  }
  EXPECT_GE(files, 30u);
}

// Writes the fuzzer's seed corpus when MQTT_CODEC_WRITE_CORPUS names a
// directory: regenerate fuzz_corpus/ with
//   MQTT_CODEC_WRITE_CORPUS=frontends/mqtt/codec/fuzz_corpus mqtt_codec_test
// Skipped otherwise.
TEST(SeedCorpus, Write) {
  const char* directory = std::getenv("MQTT_CODEC_WRITE_CORPUS");
  if (directory == nullptr) GTEST_SKIP() << "MQTT_CODEC_WRITE_CORPUS not set";
  const std::filesystem::path path(directory);
  std::filesystem::create_directories(path);
  for (ProtocolVersion version : testing::kAllVersions) {
    const std::string prefix = std::string(testing::VersionName(version)) + "_";
    std::string stream;  // a session's worth of packets in one input
    int index = 0;
    for (const auto& [name, packet] : SamplePackets(version)) {
      const std::string bytes = Encode(packet, version);
      if (bytes.size() > 4096) continue;  // keep seeds small
      if (stream.size() + bytes.size() <= 1024) stream += bytes;
      std::ofstream(path / (prefix + std::to_string(index++) + "_" + name), std::ios::binary)
          << bytes;
    }
    std::ofstream(path / (prefix + "stream"), std::ios::binary) << stream;
  }
}

}  // namespace
}  // namespace estuary::mqtt
