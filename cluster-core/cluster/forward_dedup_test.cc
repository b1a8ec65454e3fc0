#include "cluster-core/cluster/forward_dedup.h"

#include <gtest/gtest.h>

namespace estuary::cluster {
namespace {

MessageId Id(uint32_t sequence) { return MessageId{1, 1000, sequence}; }

TEST(ForwardDedup, ACopyOfASafeForwardIsAnsweredAtOnce) {
  ForwardDedup dedup(60'000, 100);
  EXPECT_EQ(dedup.Arrive(2, Id(1), 10, 0), ForwardDedup::Verdict::kNew);
  EXPECT_TRUE(dedup.Safe(2, 10).empty());
  EXPECT_EQ(dedup.Arrive(2, Id(1), 11, 5), ForwardDedup::Verdict::kSafe);
  EXPECT_EQ(dedup.copies(), 1u);
}

TEST(ForwardDedup, ACopyOfAPendingForwardIsConfirmedWithIt) {
  ForwardDedup dedup(60'000, 100);
  EXPECT_EQ(dedup.Arrive(2, Id(1), 10, 0), ForwardDedup::Verdict::kNew);
  EXPECT_EQ(dedup.Arrive(2, Id(1), 11, 1), ForwardDedup::Verdict::kWaiting);
  EXPECT_EQ(dedup.Arrive(2, Id(1), 12, 2), ForwardDedup::Verdict::kWaiting);
  EXPECT_EQ(dedup.Safe(2, 10), (std::vector<uint64_t>{11, 12}));
  EXPECT_TRUE(dedup.Safe(2, 10).empty());  // once
}

TEST(ForwardDedup, SendersAndMessagesAreToldApart) {
  ForwardDedup dedup(60'000, 100);
  EXPECT_EQ(dedup.Arrive(2, Id(1), 10, 0), ForwardDedup::Verdict::kNew);
  EXPECT_EQ(dedup.Arrive(3, Id(1), 10, 0), ForwardDedup::Verdict::kNew);  // another sender
  EXPECT_EQ(dedup.Arrive(2, Id(2), 11, 0), ForwardDedup::Verdict::kNew);  // another message
  EXPECT_EQ(dedup.Safe(3, 10), std::vector<uint64_t>{});
  EXPECT_EQ(dedup.Arrive(3, Id(1), 12, 0), ForwardDedup::Verdict::kSafe);
  EXPECT_EQ(dedup.Arrive(2, Id(1), 13, 0), ForwardDedup::Verdict::kWaiting);  // sender 2's is not safe yet
}

TEST(ForwardDedup, EntriesExpireAfterTheWindowAndTheBoundEvictsTheOldest) {
  ForwardDedup dedup(1'000, 2);
  dedup.Arrive(2, Id(1), 10, 0);
  dedup.Arrive(2, Id(2), 11, 500);
  dedup.Arrive(2, Id(3), 12, 600);  // over the bound: Id(1) goes
  EXPECT_EQ(dedup.size(), 2u);
  EXPECT_EQ(dedup.evicted(), 1u);
  EXPECT_EQ(dedup.Arrive(2, Id(1), 13, 700), ForwardDedup::Verdict::kNew);  // Id(2) evicted in turn
  EXPECT_EQ(dedup.evicted(), 2u);
  dedup.Expire(1'650);  // Id(3) (600) is older than 1 s, Id(1) (700) is not
  EXPECT_EQ(dedup.size(), 1u);
  EXPECT_EQ(dedup.Arrive(2, Id(3), 14, 1'650), ForwardDedup::Verdict::kNew);  // forgotten: new again
  dedup.Expire(2'651);
  EXPECT_EQ(dedup.size(), 0u);
  EXPECT_TRUE(dedup.Safe(2, 12).empty());
}

}  // namespace
}  // namespace estuary::cluster
