#include "cluster-core/links/frame.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "base/pinned_bytes.h"

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

// Three frames (one with an empty body, one larger than a read) as the
// links see them.
std::string ThreeFrames() {
  std::string bytes;
  AppendFrame(bytes, 0x10, "first");
  AppendFrame(bytes, 0x11, "");
  AppendFrame(bytes, 0x20, std::string(5000, 'x'));
  return bytes;
}

// Read() with the stream cut into pieces at the given offsets; each piece
// lives in its own buffer, overwritten after the call as libuv's read
// buffer would be, so a frame kept as a view past its call would show.
std::vector<std::pair<int, std::string>> ReadInPieces(FrameReader& reader, std::string_view bytes,
                                                      const std::vector<size_t>& cuts) {
  std::vector<std::pair<int, std::string>> got;
  size_t from = 0;
  std::vector<size_t> ends = cuts;
  ends.push_back(bytes.size());
  for (size_t to : ends) {
    std::string piece(bytes.substr(from, to - from));
    const auto status = reader.Read(piece, [&](const FrameReader::Frame& frame) {
      got.emplace_back(frame.type, std::string(frame.body));
      return true;
    });
    EXPECT_EQ(status, FrameReader::Status::kNeedMore);
    piece.assign(piece.size(), '\xEE');
    from = to;
  }
  return got;
}

TEST(FrameTest, ReadDecodesAFrameSplitAtEveryByteOffset) {
  const std::string bytes = ThreeFrames();
  for (size_t cut = 0; cut <= bytes.size(); ++cut) {
    FrameReader reader;
    reader.set_max_frame(1 << 20);
    auto got = ReadInPieces(reader, bytes, {cut});
    ASSERT_EQ(got.size(), 3u) << cut;
    EXPECT_EQ(got[0], std::make_pair(0x10, std::string("first"))) << cut;
    EXPECT_EQ(got[1], std::make_pair(0x11, std::string())) << cut;
    EXPECT_EQ(got[2], std::make_pair(0x20, std::string(5000, 'x'))) << cut;
    EXPECT_EQ(reader.buffered(), 0u) << cut;
  }
}

TEST(FrameTest, ReadDecodesEveryFrameAtEveryPairOfCuts) {
  std::string bytes;
  AppendFrame(bytes, 0x10, "ab");
  AppendFrame(bytes, 0x12, "");
  AppendFrame(bytes, 0x13, "cdefghij");
  for (size_t first = 0; first <= bytes.size(); ++first) {
    for (size_t second = first; second <= bytes.size(); ++second) {
      FrameReader reader;
      auto got = ReadInPieces(reader, bytes, {first, second});
      ASSERT_EQ(got.size(), 3u) << first << " " << second;
      EXPECT_EQ(got[0], std::make_pair(0x10, std::string("ab")));
      EXPECT_EQ(got[1], std::make_pair(0x12, std::string()));
      EXPECT_EQ(got[2], std::make_pair(0x13, std::string("cdefghij")));
      EXPECT_EQ(reader.buffered(), 0u);
    }
  }
}

TEST(FrameTest, ReadHandsOutFramesCompleteInTheReadWithoutCopying) {
  const std::string bytes = ThreeFrames();
  FrameReader reader;
  reader.set_max_frame(1 << 20);
  std::vector<const char*> bodies;
  reader.Read(bytes, [&](const FrameReader::Frame& frame) {
    bodies.push_back(frame.body.data());
    return true;
  });
  ASSERT_EQ(bodies.size(), 3u);
  EXPECT_EQ(bodies[0], bytes.data() + kHeaderBytes);  // views of the read itself
  EXPECT_EQ(bodies[2], bytes.data() + bytes.size() - 5000);
}

TEST(FrameTest, ReadStopsWhenTheHandlerSaysSoAndKeepsTheRest) {
  const std::string bytes = ThreeFrames();
  FrameReader reader;
  reader.set_max_frame(1 << 20);
  int calls = 0;
  EXPECT_EQ(reader.Read(bytes, [&](const FrameReader::Frame&) { return ++calls < 1; }), FrameReader::Status::kFrame);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(reader.buffered(), bytes.size() - (kHeaderBytes + 5));
  // What was kept comes out of a later read, ahead of its bytes.
  std::string more;
  AppendFrame(more, 0x30, "later");
  auto got = ReadInPieces(reader, more, {});
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].first, 0x11);
  EXPECT_EQ(got[1].first, 0x20);
  EXPECT_EQ(got[2], std::make_pair(0x30, std::string("later")));
}

TEST(FrameTest, ReadAppliesAMaxFrameRaisedByTheHandlerToLaterFrames) {
  std::string bytes;
  AppendFrame(bytes, kAuth, "mac");
  AppendFrame(bytes, 0x20, std::string(kHandshakeMaxFrame + 10, 'x'));
  for (size_t cut : {size_t{0}, size_t{3}, size_t{9}, size_t{12}, bytes.size()}) {
    FrameReader reader;  // handshake limit
    int frames = 0;
    for (std::string_view piece : {std::string_view(bytes).substr(0, cut), std::string_view(bytes).substr(cut)}) {
      EXPECT_EQ(reader.Read(piece,
                            [&](const FrameReader::Frame&) {
                              ++frames;
                              reader.set_max_frame(1 << 20);  // authenticated
                              return true;
                            }),
                FrameReader::Status::kNeedMore);
    }
    EXPECT_EQ(frames, 2) << cut;
  }
}

TEST(FrameTest, ReadReportsOversizeAndEmptyFramesWhereverTheyAreCut) {
  std::string bytes;
  AppendFrame(bytes, kHello, "hi");
  const std::string oversize = bytes + "GET / HTTP/1.1\r\n";
  const std::string empty = bytes + std::string("\0\0\0\0", 4);
  for (const auto& [input, expected] : {std::pair{oversize, FrameReader::Status::kOversize},
                                        std::pair{empty, FrameReader::Status::kEmptyFrame}}) {
    for (size_t cut = 0; cut <= input.size(); ++cut) {
      FrameReader reader;
      int frames = 0;
      auto on_frame = [&](const FrameReader::Frame&) { return ++frames > 0; };
      auto status = reader.Read(std::string_view(input).substr(0, cut), on_frame);
      if (status == FrameReader::Status::kNeedMore) status = reader.Read(std::string_view(input).substr(cut), on_frame);
      EXPECT_EQ(status, expected) << cut;
      EXPECT_EQ(frames, 1) << cut;
      FrameReader::Frame frame;
      EXPECT_EQ(reader.Next(frame), expected) << cut;  // the bad header stays
    }
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

// The link frames' bytes, pinned (issue 23: the byte codec was replaced;
// nodes of the old and the new build must still talk).
TEST(FrameTest, BytesArePinned) {
  Nonce nonce{};
  for (size_t i = 0; i < nonce.size(); ++i) nonce[i] = static_cast<uint8_t>(i);
  // The hello carries this binary's link minor (5 since the copy fence;
  // it was a365e41182fde218 with minor 4, d3cb1154ece99903 with minor 3).
  EXPECT_EQ(base::PinnedBytes(EncodeHello({.node = 513, .address = "10.0.0.7:7000", .nonce = nonce})),
            "55 bytes fnv1a64=6b359b67e2d0f5f1");
  std::string frames;
  AppendFrame(frames, 0x10, "body");
  AppendFrame(frames, 0x11, std::string(300, 'z'));
  EXPECT_EQ(base::PinnedBytes(frames), "314 bytes fnv1a64=8e43e9001400302b");
  const Mac mac = ComputeMac("secret", Role::kDialer, nonce, Nonce{}, 258, 3);
  EXPECT_EQ(base::PinnedBytes(std::string_view(reinterpret_cast<const char*>(mac.data()), mac.size())),
            "32 bytes fnv1a64=4e9f655a6819a9ac");
}

}  // namespace
}  // namespace estuary::cluster::wire
