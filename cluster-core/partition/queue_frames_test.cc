// The queue frames 0x60-0x63 (queue_frames.h): every field round-trips, each
// body has one encoding, and malformed bodies from other nodes are refused
// (short, long, counts beyond the bytes left, out-of-range fields).
#include "cluster-core/partition/queue_frames.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "base/bytes.h"

namespace estuary::partition {
namespace {

QueuePullFrame FullPull() { return {std::string("g/\0f/3", 6), 0x0102030405060708, 0xA0B0C0D0}; }
QueuePushFrame FullPush() {
  return {"orders/eu/0", 0x77, {{5, std::string("r\0ec", 4)}, {9, ""}, {0xFFFFFFFFFFFFFFFF, "last"}}};
}
QueueAckFrame FullAck() { return {"orders/eu/1", 42, {9, 5, 5, 0xFFFFFFFFFFFFFFFF}}; }
QueueRejectFrame FullReject() { return {"orders/eu/2", 0xFFFF, QueueRejectReason::kNotConsumer}; }

TEST(QueueFrames, PullRoundTripsEveryField) {
  const std::string bytes = Encode(FullPull());
  EXPECT_EQ(bytes.size(), 4u + 6 + 8 + 4);
  EXPECT_EQ(DecodeQueuePull(bytes), FullPull());
  EXPECT_EQ(DecodeQueuePull(Encode(QueuePullFrame{})), QueuePullFrame{});
}

TEST(QueueFrames, PushRoundTripsEveryMessageInOrder) {
  const std::string bytes = Encode(FullPush());
  EXPECT_EQ(bytes.size(), 4u + 11 + 8 + 4 + (8 + 4 + 4) + (8 + 4) + (8 + 4 + 4));
  EXPECT_EQ(DecodeQueuePush(bytes), FullPush());
  EXPECT_EQ(DecodeQueuePush(Encode(QueuePushFrame{})), QueuePushFrame{}) << "an empty push is well formed";
}

TEST(QueueFrames, AckRoundTripsOffsetsAsSent) {
  const std::string bytes = Encode(FullAck());
  EXPECT_EQ(bytes.size(), 4u + 11 + 8 + 4 + 4 * 8);
  EXPECT_EQ(DecodeQueueAck(bytes), FullAck()) << "order and repeats are kept: the machine ignores repeats";
  EXPECT_EQ(DecodeQueueAck(Encode(QueueAckFrame{})), QueueAckFrame{});
}

TEST(QueueFrames, RejectRoundTripsEveryReason) {
  for (auto reason : {QueueRejectReason::kNotLeader, QueueRejectReason::kStaleEpoch, QueueRejectReason::kNotConsumer}) {
    QueueRejectFrame frame = FullReject();
    frame.reason = reason;
    EXPECT_EQ(DecodeQueueReject(Encode(frame)), frame);
  }
  EXPECT_EQ(Encode(FullReject()).size(), 4u + 11 + 4 + 1);
}

TEST(QueueFrames, LittleEndianLayout) {
  const std::string bytes = Encode(QueuePullFrame{"q", 0x0102, 0x03});
  EXPECT_EQ(bytes, std::string("\x01\0\0\0q\x02\x01\0\0\0\0\0\0\x03\0\0\0", 17));
}

TEST(QueueFrames, TruncatedOrLongerBodiesAreRefused) {
  auto check = [](const std::string& bytes, auto decode, const char* what) {
    for (size_t size = 0; size < bytes.size(); ++size) {
      EXPECT_FALSE(decode(bytes.substr(0, size))) << what << " cut to " << size;
    }
    EXPECT_FALSE(decode(bytes + "x")) << what << " with a byte more";
  };
  check(Encode(FullPull()), DecodeQueuePull, "pull");
  check(Encode(FullPush()), DecodeQueuePush, "push");
  check(Encode(FullAck()), DecodeQueueAck, "ack");
  check(Encode(FullReject()), DecodeQueueReject, "reject");
}

// A count the remaining bytes cannot hold is refused before anything is
// reserved: 4 billion offsets announced in a 40-byte body.
TEST(QueueFrames, CountsBeyondTheBytesLeftAreRefused) {
  base::LittleEndianWriter ack;
  ack.Bytes("q");
  ack.U64(1);
  ack.U32(0xFFFFFFFF);
  ack.U64(7);
  EXPECT_FALSE(DecodeQueueAck(ack.Take()));

  base::LittleEndianWriter push;
  push.Bytes("q");
  push.U64(1);
  push.U32(2);  // two messages need at least 24 bytes; 12 follow
  push.U64(7);
  push.Bytes("");
  EXPECT_FALSE(DecodeQueuePush(push.Take()));

  base::LittleEndianWriter record_too_long;
  record_too_long.Bytes("q");
  record_too_long.U64(1);
  record_too_long.U32(1);
  record_too_long.U64(7);
  record_too_long.U32(1000);  // a record length past the end
  record_too_long.str() += "abc";
  EXPECT_FALSE(DecodeQueuePush(record_too_long.Take()));

  base::LittleEndianWriter name_too_long;
  name_too_long.U32(0xFFFFFFF0);
  name_too_long.U64(1);
  name_too_long.U32(0);
  EXPECT_FALSE(DecodeQueuePull(name_too_long.Take()));
}

TEST(QueueFrames, RejectRefusesOutOfRangeFields) {
  const std::string good = Encode(FullReject());
  const size_t node_at = 4 + FullReject().queue.size();
  std::string bad_node = good;
  bad_node[node_at + 2] = 1;  // node 0x0001FFFF: not a node id
  EXPECT_FALSE(DecodeQueueReject(bad_node));
  std::string bad_reason = good;
  bad_reason[node_at + 4] = kMaxQueueRejectReason + 1;
  EXPECT_FALSE(DecodeQueueReject(bad_reason));
}

// Writes queue_frames_fuzz's seed corpus when ESTUARY_WRITE_CORPUS names a
// dir. The first byte picks the decoder (its value mod 4: pull, push, ack,
// reject).
TEST(QueueFrames, SeedCorpus) {
  const char* dir = std::getenv("ESTUARY_WRITE_CORPUS");
  if (dir == nullptr) GTEST_SKIP() << "set ESTUARY_WRITE_CORPUS=dir to write the seeds";
  auto write = [&](const std::string& name, char selector, const std::string& body) {
    std::ofstream(std::string(dir) + "/" + name, std::ios::binary) << selector << body;
  };
  write("pull", 0, Encode(FullPull()));
  write("push", 1, Encode(FullPush()));
  write("push_empty", 1, Encode(QueuePushFrame{"q", 1, {}}));
  write("ack", 2, Encode(FullAck()));
  write("reject", 3, Encode(FullReject()));
}

}  // namespace
}  // namespace estuary::partition
