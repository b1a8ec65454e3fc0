#include "tools/bench/payload.h"

#include <gtest/gtest.h>

namespace estuary::bench {
namespace {

TEST(Payload, RoundTrips) {
  std::string payload(64, 'x');
  PayloadHeader header{0xdeadbeef, 7, 0x0102030405060708ull, -5};
  WritePayloadHeader(header, payload);
  EXPECT_EQ(payload.size(), 64u);
  EXPECT_EQ(payload[24], 'x');
  EXPECT_EQ(ReadPayloadHeader(payload), header);
}

TEST(Payload, LittleEndianLayout) {
  std::string payload(24, '\0');
  WritePayloadHeader({1, 2, 3, 4}, payload);
  EXPECT_EQ(payload[0], 1);
  EXPECT_EQ(payload[4], 2);
  EXPECT_EQ(payload[8], 3);
  EXPECT_EQ(payload[16], 4);
}

TEST(Payload, ShortPayloadHasNoHeader) {
  EXPECT_FALSE(ReadPayloadHeader(std::string(23, 'a')));
}

TEST(Payload, MonotonicClockAdvances) {
  const int64_t a = MonotonicNowNs();
  const int64_t b = MonotonicNowNs();
  EXPECT_GT(a, 0);
  EXPECT_GE(b, a);
}

}  // namespace
}  // namespace estuary::bench
