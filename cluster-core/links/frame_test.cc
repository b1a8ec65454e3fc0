#include "cluster-core/links/frame.h"

#include <gtest/gtest.h>

#include <string>

namespace estuary::cluster::wire {
namespace {

TEST(FrameTest, FramesRoundTripAcrossArbitrarySplits) {
  std::string bytes;
  AppendFrame(bytes, 0x10, "first");
  AppendFrame(bytes, 0x11, "");
  AppendFrame(bytes, 0x20, std::string(5000, 'x'));
  ASSERT_EQ(bytes.substr(0, 5), std::string("\0\0\0\x06\x10", 5));  // big-endian length of type + body
  for (size_t step : {size_t{1}, size_t{3}, size_t{7}, bytes.size()}) {
    FrameReader reader;
    reader.set_max_frame(1 << 20);
    std::vector<std::pair<int, std::string>> got;
    for (size_t at = 0; at < bytes.size(); at += step) {
      reader.Feed(std::string_view(bytes).substr(at, step));
      FrameReader::Frame frame;
      while (reader.Next(frame) == FrameReader::Status::kFrame) got.emplace_back(frame.type, std::string(frame.body));
    }
    ASSERT_EQ(got.size(), 3u) << step;
    EXPECT_EQ(got[0], std::make_pair(0x10, std::string("first")));
    EXPECT_EQ(got[1], std::make_pair(0x11, std::string()));
    EXPECT_EQ(got[2].second.size(), 5000u);
    EXPECT_EQ(reader.buffered(), 0u);
  }
}

TEST(FrameTest, OversizeAndEmptyFramesAreReported) {
  FrameReader reader;  // handshake limit until told otherwise
  reader.Feed("GET / HTTP/1.1\r\n");
  FrameReader::Frame frame;
  EXPECT_EQ(reader.Next(frame), FrameReader::Status::kOversize);
  FrameReader empty;
  empty.Feed(std::string("\0\0\0\0", 4));
  EXPECT_EQ(empty.Next(frame), FrameReader::Status::kEmptyFrame);
}

TEST(FrameTest, HelloRoundTripsAndRejectsTruncation) {
  Hello hello{.node = 7, .address = "10.0.0.7:7000", .nonce = RandomNonce()};
  std::string body = EncodeHello(hello);
  auto decoded = DecodeHello(body);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->magic, kMagic);
  EXPECT_EQ(decoded->major, kVersionMajor);
  EXPECT_EQ(decoded->node, 7);
  EXPECT_EQ(decoded->address, "10.0.0.7:7000");
  EXPECT_EQ(decoded->nonce, hello.nonce);
  EXPECT_TRUE(DecodeHello(body + "future minor fields"));  // trailing bytes are ignored
  for (size_t cut = 0; cut < body.size(); ++cut) EXPECT_FALSE(DecodeHello(body.substr(0, cut))) << cut;
}

TEST(FrameTest, MacDependsOnSecretRoleNoncesAndIds) {
  Nonce a = RandomNonce(), b = RandomNonce();
  EXPECT_NE(a, b);
  Mac base = ComputeMac("secret", Role::kDialer, a, b, 1, 2);
  std::string_view base_view(reinterpret_cast<const char*>(base.data()), base.size());
  EXPECT_TRUE(MacEquals(ComputeMac("secret", Role::kDialer, a, b, 1, 2), base_view));
  EXPECT_FALSE(MacEquals(ComputeMac("Secret", Role::kDialer, a, b, 1, 2), base_view));
  EXPECT_FALSE(MacEquals(ComputeMac("secret", Role::kAcceptor, a, b, 1, 2), base_view));
  EXPECT_FALSE(MacEquals(ComputeMac("secret", Role::kDialer, b, a, 1, 2), base_view));
  EXPECT_FALSE(MacEquals(ComputeMac("secret", Role::kDialer, a, b, 2, 1), base_view));
  EXPECT_FALSE(MacEquals(base, base_view.substr(1)));
}

}  // namespace
}  // namespace estuary::cluster::wire
