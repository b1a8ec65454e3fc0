// The raft frames' wire form: every field survives, malformed bytes are refused.
#include "cluster-core/meta/raft_codec.h"

#include <gtest/gtest.h>

#include <fstream>

#include "base/pinned_bytes.h"
#include "cluster-core/meta/meta_state.h"

namespace estuary::meta {
namespace {

raft::Message FullMessage() {
  raft::Message m;
  m.type = raft::MessageType::kSnapshot;
  m.from = 3;
  m.to = 7;
  m.term = 9;
  m.log_index = 11;
  m.log_term = 8;
  m.transfer = true;
  m.reject = true;
  m.entries.push_back(raft::Entry{9, 12, 1234, raft::EntryType::kNormal, {5, 6}, {1, 2, 3}});
  m.entries.push_back(raft::Entry{9, 13, 1235, raft::EntryType::kNoop, {}, {}});
  m.commit = 10;
  m.index = 13;
  m.hint_term = 4;
  m.send_time = 99;
  m.timestamp = 1236;
  auto snapshot = std::make_shared<raft::Snapshot>();
  snapshot->index = 10;
  snapshot->term = 8;
  snapshot->timestamp = 1200;
  snapshot->config = raft::Config{{1, 2, 3}, {4}};
  snapshot->dedup = {raft::DedupRecord{{5, 1}, 1100}};
  m.snapshot = snapshot;
  m.offset = 4096;
  m.chunk = {9, 9, 9};
  m.done = true;
  m.writes.push_back(raft::Write{{7, 7}, raft::WriteId{2, 3}});
  return m;
}

TEST(RaftCodec, EveryFieldRoundTrips) {
  const raft::Message m = FullMessage();
  const std::string bytes = EncodeMessage(42, m);
  auto decoded = DecodeMessage(bytes);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->group, 42u);
  const raft::Message& d = decoded->message;
  EXPECT_EQ(d.type, m.type);
  EXPECT_EQ(d.from, m.from);
  EXPECT_EQ(d.to, m.to);
  EXPECT_EQ(d.term, m.term);
  EXPECT_EQ(d.log_index, m.log_index);
  EXPECT_EQ(d.log_term, m.log_term);
  EXPECT_EQ(d.transfer, m.transfer);
  EXPECT_EQ(d.reject, m.reject);
  EXPECT_EQ(d.entries, m.entries);
  EXPECT_EQ(d.commit, m.commit);
  EXPECT_EQ(d.index, m.index);
  EXPECT_EQ(d.hint_term, m.hint_term);
  EXPECT_EQ(d.send_time, m.send_time);
  EXPECT_EQ(d.timestamp, m.timestamp);
  ASSERT_TRUE(d.snapshot);
  EXPECT_EQ(d.snapshot->index, 10u);
  EXPECT_EQ(d.snapshot->config, m.snapshot->config);
  EXPECT_EQ(d.snapshot->dedup, m.snapshot->dedup);
  EXPECT_EQ(d.offset, m.offset);
  EXPECT_EQ(d.chunk, m.chunk);
  EXPECT_EQ(d.done, m.done);
  ASSERT_EQ(d.writes.size(), 1u);
  EXPECT_EQ(d.writes[0].data, m.writes[0].data);
  EXPECT_EQ(d.writes[0].id, m.writes[0].id);
  EXPECT_EQ(EncodeMessage(42, d), bytes);
}

TEST(RaftCodec, RefusesMalformedBytes) {
  const std::string bytes = EncodeMessage(1, FullMessage());
  // Every truncation is refused, and so are trailing bytes.
  for (size_t size = 0; size < bytes.size(); ++size) {
    EXPECT_FALSE(DecodeMessage(bytes.substr(0, size))) << size;
  }
  EXPECT_FALSE(DecodeMessage(bytes + "x"));
  std::string bad_type = bytes;
  bad_type[4] = 0x7F;
  EXPECT_FALSE(DecodeMessage(bad_type));
  std::string bad_bool = bytes;
  bad_bool[4 + 1 + 40] = 2;  // transfer
  EXPECT_FALSE(DecodeMessage(bad_bool));
  // A count far larger than the bytes that follow.
  raft::Message empty;
  std::string huge = EncodeMessage(1, empty);
  huge[4 + 1 + 40 + 2] = '\xFF';
  huge[4 + 1 + 40 + 3] = '\xFF';
  EXPECT_FALSE(DecodeMessage(huge));
}

TEST(RaftCodec, ProposeFramesRoundTrip) {
  ProposeRequest request{3, 77, {9, 10}, {1, 2}};
  EXPECT_EQ(DecodeProposeRequest(EncodeProposeRequest(request)), request);
  ProposeReply reply{3, 77, ProposeStatus::kNotLeader, 12, 2};
  EXPECT_EQ(DecodeProposeReply(EncodeProposeReply(reply)), reply);
  std::string bad = EncodeProposeReply(reply);
  bad[12] = 9;  // status
  EXPECT_FALSE(DecodeProposeReply(bad));
  EXPECT_FALSE(DecodeProposeRequest(EncodeProposeRequest(request).substr(1)));
}

TEST(RaftCodec, QuiesceFrameRoundTrips) {
  const QuiesceNotice notice{7, 3, 41, 2};
  const std::string bytes = EncodeQuiesce(notice);
  EXPECT_EQ(bytes.size(), 4u + 3 * 8);
  EXPECT_EQ(DecodeQuiesce(bytes), notice);
  for (size_t size = 0; size < bytes.size(); ++size) {
    EXPECT_FALSE(DecodeQuiesce(bytes.substr(0, size)));
  }
  EXPECT_FALSE(DecodeQuiesce(bytes + "x"));
  const WakeRequest wake{7, 3};
  EXPECT_EQ(DecodeWake(EncodeWake(wake)), wake);
  EXPECT_FALSE(DecodeWake(EncodeWake(wake).substr(1)));
  EXPECT_FALSE(DecodeWake(EncodeWake(wake) + "x"));
}

// Writes the fuzzer's seed corpus when ESTUARY_WRITE_CORPUS names a dir.
TEST(RaftCodec, SeedCorpus) {
  const char* dir = std::getenv("ESTUARY_WRITE_CORPUS");
  if (dir == nullptr) GTEST_SKIP() << "set ESTUARY_WRITE_CORPUS=dir to write the seeds";
  auto write = [&](const std::string& name, char selector, const std::string& body) {
    std::ofstream(std::string(dir) + "/" + name, std::ios::binary) << selector << body;
  };
  write("message_full", 0, EncodeMessage(1, FullMessage()));
  write("message_empty", 0, EncodeMessage(0, raft::Message{}));
  write("propose", 1, EncodeProposeRequest({0, 1, {2, 3}, {4}}));
  write("reply", 2, EncodeProposeReply({0, 1, ProposeStatus::kOk, 5, 1}));
  write("quiesce", 3, EncodeQuiesce({0, 2, 5, 1}));
  write("wake", 4, EncodeWake({0, 2}));
  auto command = [&](const std::string& name, const Command& c) {
    const std::vector<uint8_t> bytes = EncodeCommand(c);
    write("command_" + name, 5, std::string(bytes.begin(), bytes.end()));
  };
  command("reset", RouteReset{2, 7, 1, true, {{"a/#", ""}, {"b", "g"}}});
  command("delta", RouteDelta{2, 7, 2, {{"c", ""}}, {{"a/#", ""}}});
  command("upsert", MemberUpsert{{3, "127.0.0.1:7000", 5}});
  command("gone", MemberGone{3});
  command("fresh_cleared", FreshCleared{2, 7});
  command("notice", CommitNotice{});
  command("open", PartitionOpen{5, {1, 2, 3}});
  command("pin", PartitionLeaderPin{5, 2});
  command("drain", NodeDrain{3, true});
}

// The encoder's bytes, pinned (issue 23: the byte codec was replaced; the
// frames must not change by one byte).
TEST(RaftCodec, BytesArePinned) {
  EXPECT_EQ(base::PinnedBytes(EncodeMessage(42, FullMessage())), "323 bytes fnv1a64=4e95a37901026080");
  EXPECT_EQ(base::PinnedBytes(EncodeProposeRequest({7, 9, {2, 3}, {1, 2, 3}})), "35 bytes fnv1a64=52f485874e1d85a7");
  EXPECT_EQ(base::PinnedBytes(EncodeProposeReply({7, 9, ProposeStatus::kNotLeader, 12, 3})),
            "29 bytes fnv1a64=41294f372f78ea31");
  EXPECT_EQ(base::PinnedBytes(EncodeQuiesce({7, 5, 11, 2})), "28 bytes fnv1a64=9dc8fc90da942c6e");
  EXPECT_EQ(base::PinnedBytes(EncodeWake({7, 5})), "12 bytes fnv1a64=0f83092643522d27");
}

}  // namespace
}  // namespace estuary::meta
