// The partition proposal frames 0x50-0x53 (partition_frames.h): every field
// round-trips, and malformed bodies from other nodes are refused.
#include "cluster-core/partition/partition_frames.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace estuary::partition {
namespace {

ProposeFrame FullPropose() { return {0x0102030405060708, 0xA0B0C0D0, {0x1111, 0x2222}, std::string("d\0ta", 4)}; }
ProposedFrame FullProposed() {
  return {0x0807060504030201, meta::ProposeStatus::kRejected, 0x99, 0xFFFF, std::string("r\0", 2)};
}

TEST(PartitionFrames, ProposeRoundTripsEveryField) {
  const ProposeFrame frame = FullPropose();
  const std::string bytes = Encode(frame);
  EXPECT_EQ(bytes.size(), 8u + 4 + 8 + 8 + 4 + 4);
  EXPECT_EQ(DecodePropose(bytes), frame);
  EXPECT_EQ(DecodePropose(Encode(ProposeFrame{})), ProposeFrame{});
}

TEST(PartitionFrames, ProposedRoundTripsWithAndWithoutAResult) {
  const ProposedFrame frame = FullProposed();
  EXPECT_EQ(DecodeProposed(Encode(frame)), frame);
  ProposedFrame empty_result = frame;
  empty_result.result = std::string();
  EXPECT_EQ(DecodeProposed(Encode(empty_result)), empty_result) << "an empty result is not no result";
  ProposedFrame none = frame;
  none.result.reset();
  EXPECT_EQ(DecodeProposed(Encode(none)), none);
  for (auto status : {meta::ProposeStatus::kOk, meta::ProposeStatus::kNotLeader, meta::ProposeStatus::kTimeout}) {
    ProposedFrame with_status = none;
    with_status.status = status;
    EXPECT_EQ(DecodeProposed(Encode(with_status)), with_status);
  }
}

TEST(PartitionFrames, TruncatedOrLongerBodiesAreRefused) {
  for (const std::string& bytes : {Encode(FullPropose()), Encode(ProposeFrame{})}) {
    for (size_t size = 0; size < bytes.size(); ++size) {
      EXPECT_FALSE(DecodePropose(bytes.substr(0, size))) << "propose cut to " << size;
    }
    EXPECT_FALSE(DecodePropose(bytes + "x"));
  }
  const std::string bytes = Encode(FullProposed());
  for (size_t size = 0; size < bytes.size(); ++size) {
    EXPECT_FALSE(DecodeProposed(bytes.substr(0, size))) << "proposed cut to " << size;
  }
  EXPECT_FALSE(DecodeProposed(bytes + "x"));
}

TEST(PartitionFrames, ProposedRefusesOutOfRangeFields) {
  const std::string good = Encode(FullProposed());
  std::string bad_status = good;
  bad_status[8] = 4;  // after kRejected
  EXPECT_FALSE(DecodeProposed(bad_status));
  std::string bad_leader = good;
  bad_leader[8 + 1 + 8 + 2] = 1;  // leader 0x0001FFFF (little-endian): not a node id
  EXPECT_FALSE(DecodeProposed(bad_leader));
  std::string bad_flag = good;
  bad_flag[8 + 1 + 8 + 4] = 2;  // has-result is 0 or 1
  EXPECT_FALSE(DecodeProposed(bad_flag));
}

// Kept as it always decoded: "no result" with result bytes drops them.
TEST(PartitionFrames, NoResultWithResultBytesDropsTheBytes) {
  std::string bytes = Encode(FullProposed());
  bytes[8 + 1 + 8 + 4] = 0;
  auto frame = DecodeProposed(bytes);
  ASSERT_TRUE(frame);
  EXPECT_FALSE(frame->result.has_value());
  EXPECT_EQ(frame->request, FullProposed().request);
}

// Writes partition_frames_fuzz's seed corpus when ESTUARY_WRITE_CORPUS names
// a dir. The first byte picks the decoder (even: 0x50, odd: 0x51).
TEST(PartitionFrames, SeedCorpus) {
  const char* dir = std::getenv("ESTUARY_WRITE_CORPUS");
  if (dir == nullptr) GTEST_SKIP() << "set ESTUARY_WRITE_CORPUS=dir to write the seeds";
  auto write = [&](const std::string& name, char selector, const std::string& body) {
    std::ofstream(std::string(dir) + "/" + name, std::ios::binary) << selector << body;
  };
  write("propose_full", 0, Encode(FullPropose()));
  write("propose_empty", 0, Encode(ProposeFrame{}));
  write("proposed_result", 1, Encode(FullProposed()));
  write("proposed_no_result", 1, Encode(ProposedFrame{7, meta::ProposeStatus::kNotLeader, 0, 2, std::nullopt}));
}

}  // namespace
}  // namespace estuary::partition
