#include "cluster-core/membership/membership_codec.h"

#include <gtest/gtest.h>

#include "base/pinned_bytes.h"

namespace estuary::cluster {
namespace {

MemberEntry Entry(uint32_t epoch, uint64_t incarnation, MemberState state) {
  return {7, epoch, incarnation, state, "127.0.0.1:7000", "127.0.0.1:8000"};
}

TEST(MembershipCodec, TableRoundTrips) {
  std::vector<MemberEntry> table = {Entry(0, 3, MemberState::kUp), Entry(2, 0, MemberState::kLeft)};
  table[1].node = 9;
  table[1].admin_address = "";
  table[1].removed = true;
  auto decoded = DecodeTable(EncodeTable(0x01, table));
  ASSERT_TRUE(decoded);
  EXPECT_TRUE(decoded->rejoin);
  EXPECT_EQ(decoded->table, table);
}

TEST(MembershipCodec, RejectsTruncatedBadStateAndOtherVersions) {
  const std::string good = EncodeTable(0, {Entry(0, 1, MemberState::kUp)});
  for (size_t size = 0; size < good.size(); ++size) {
    EXPECT_FALSE(DecodeTable(good.substr(0, size))) << size;
  }
  EXPECT_FALSE(DecodeTable(good + "x"));
  std::string other_version = good;
  other_version[0] = 2;
  EXPECT_FALSE(DecodeTable(other_version));
  std::string bad_state = EncodeTable(0, {Entry(0, 1, MemberState::kUp)});
  bad_state[1 + 1 + 2 + 2 + 4 + 8] = 9;  // version, flags, count, node, epoch, incarnation
  EXPECT_FALSE(DecodeTable(bad_state));
}

TEST(MembershipCodec, ProbeReasonAndEmptyRoundTrip) {
  auto probe = DecodeProbe(EncodeProbe({.target = 513, .reachable = true}));
  ASSERT_TRUE(probe);
  EXPECT_EQ(probe->target, 513);
  EXPECT_TRUE(probe->reachable);
  EXPECT_EQ(DecodeReason(EncodeReason("id taken")), "id taken");
  EXPECT_TRUE(DecodeEmpty(EncodeEmpty()));
  EXPECT_FALSE(DecodeEmpty(""));
}

// Issue 24 point 1: BootstrapState (0x1A) carries one flag byte.
TEST(MembershipCodec, BootstrapStateFlagRoundTripsAndIsPinned) {
  EXPECT_EQ(DecodeFlag(EncodeFlag(true)), true);
  EXPECT_EQ(DecodeFlag(EncodeFlag(false)), false);
  EXPECT_EQ(EncodeFlag(true), std::string("\x01\x01", 2));
  EXPECT_FALSE(DecodeFlag(std::string("\x01\x02", 2)));    // not a flag
  EXPECT_FALSE(DecodeFlag(std::string("\x01\x01\x00", 3)));  // trailing byte
  EXPECT_FALSE(DecodeFlag(std::string("\x02\x01", 2)));    // another version
  EXPECT_FALSE(DecodeFlag(""));
}

TEST(MembershipCodec, SupersedesOrdersEpochTombstoneIncarnationState) {
  using S = MemberState;
  // Higher incarnation wins; at equal incarnation the later state wins.
  EXPECT_TRUE(Supersedes(Entry(0, 2, S::kUp), Entry(0, 1, S::kDown)));
  EXPECT_TRUE(Supersedes(Entry(0, 1, S::kSuspect), Entry(0, 1, S::kUp)));
  EXPECT_TRUE(Supersedes(Entry(0, 1, S::kUp), Entry(0, 1, S::kJoining)));
  EXPECT_FALSE(Supersedes(Entry(0, 1, S::kUp), Entry(0, 1, S::kSuspect)));
  EXPECT_FALSE(Supersedes(Entry(0, 1, S::kUp), Entry(0, 1, S::kUp)));
  // A tombstone is final within its epoch, whatever the incarnation.
  EXPECT_TRUE(Supersedes(Entry(0, 1, S::kLeft), Entry(0, 9, S::kUp)));
  EXPECT_FALSE(Supersedes(Entry(0, 99, S::kUp), Entry(0, 1, S::kLeft)));
  // A removal wins over a graceful leave.
  MemberEntry removal = Entry(0, 1, S::kLeft);
  removal.removed = true;
  EXPECT_TRUE(Supersedes(removal, Entry(0, 3, S::kLeft)));
  EXPECT_FALSE(Supersedes(Entry(0, 3, S::kLeft), removal));
  // Only a readmission (a higher epoch) lifts it.
  EXPECT_TRUE(Supersedes(Entry(1, 0, S::kJoining), Entry(0, 5, S::kLeft)));
  EXPECT_FALSE(Supersedes(Entry(0, 5, S::kLeft), Entry(1, 0, S::kUp)));
}

// The frames' bytes, pinned (issue 23: the byte codec was replaced).
TEST(MembershipCodec, BytesArePinned) {
  std::vector<MemberEntry> table = {Entry(0, 3, MemberState::kUp), Entry(2, 0, MemberState::kLeft)};
  table[1].node = 9;
  table[1].removed = true;
  EXPECT_EQ(base::PinnedBytes(EncodeTable(0x01, table)), "100 bytes fnv1a64=7316b3e99ab01be1");
  EXPECT_EQ(base::PinnedBytes(EncodeProbe({.target = 513, .reachable = true})), "4 bytes fnv1a64=b5cd78774c7a8e0a");
  EXPECT_EQ(base::PinnedBytes(EncodeReason("id taken")), "11 bytes fnv1a64=98f2f2b3a41d14d2");
  EXPECT_EQ(base::PinnedBytes(EncodeEmpty()), "1 bytes fnv1a64=af63bc4c8601b62c");
}

}  // namespace
}  // namespace estuary::cluster
