#include "cluster-core/raft/log.h"

#include <gtest/gtest.h>

namespace estuary::raft {
namespace {

Entry E(Index index, Term term) { return Entry{.term = term, .index = index}; }

TEST(RaftLog, MergeSkipsDuplicatesAndTruncatesConflicts) {
  RaftLog log;
  log.Restore(Snapshot{}, {E(1, 1), E(2, 1), E(3, 2)});
  EXPECT_TRUE(log.Merge({E(2, 1), E(3, 2)}).empty());
  auto written = log.Merge({E(3, 3), E(4, 3)});
  ASSERT_EQ(written.size(), 2u);
  EXPECT_EQ(log.LastIndex(), 4u);
  EXPECT_EQ(log.LastTerm(), 3u);
  EXPECT_EQ(log.persisted(), 2u);  // the truncated tail was never persisted as is
}

TEST(RaftLog, FindHintSkipsNewerTerms) {
  RaftLog log;
  log.Restore(Snapshot{}, {E(1, 1), E(2, 1), E(3, 4), E(4, 4)});
  EXPECT_EQ(log.FindHint(4, 2), 2u);
  EXPECT_EQ(log.FindHint(10, 4), 4u);
  EXPECT_EQ(log.FindHint(4, 0), 0u);
}

TEST(RaftLog, CompactKeepsTermOfSnapshotIndex) {
  RaftLog log;
  log.Restore(Snapshot{}, {E(1, 1), E(2, 1), E(3, 2)});
  log.Compact(Snapshot{.index = 2, .term = 1});
  EXPECT_EQ(log.FirstIndex(), 3u);
  EXPECT_EQ(log.TermAt(2), 1u);
  EXPECT_FALSE(log.TermAt(1).has_value());
  EXPECT_EQ(log.At(3).term, 2u);
}

TEST(RaftLog, ConfigFollowsAppendAndTruncation) {
  RaftLog log;
  log.Restore(Snapshot{.config = Config{.voters = {1, 2, 3}}}, {E(1, 1)});
  Entry change{.term = 1, .index = 2, .type = EntryType::kConfig,
               .data = EncodeConfig(Config{.voters = {1, 2, 3, 4}})};
  log.Append(change);
  EXPECT_EQ(log.config().voters.size(), 4u);
  log.Merge({E(2, 2)});  // a new leader overwrites the uncommitted change
  EXPECT_EQ(log.config().voters.size(), 3u);
}

TEST(Config, EncodesAndDecodes) {
  Config config{.voters = {1, 2, 3}, .learners = {7}};
  EXPECT_EQ(DecodeConfig(EncodeConfig(config)), config);
}

}  // namespace
}  // namespace estuary::raft
