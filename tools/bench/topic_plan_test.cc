#include "tools/bench/topic_plan.h"

#include <gtest/gtest.h>

namespace estuary::bench {
namespace {


TEST(TopicPlan, OneTopicEveryoneSharesIt) {
  TopicPlan plan(Pattern::kOneTopic, "b/1", 1, 8);
  EXPECT_EQ(plan.PublishTopic(0), "b/1");
  EXPECT_EQ(plan.Filters(5), std::vector<std::string>{"b/1"});
  EXPECT_TRUE(plan.Covers(7, 0));
  EXPECT_EQ(plan.Coverage(0), 8u);
}

TEST(TopicPlan, FanInSubscribesToWildcard) {
  TopicPlan plan(Pattern::kFanIn, "b", 8, 1);
  EXPECT_EQ(plan.PublishTopic(3), "b/3");
  EXPECT_EQ(plan.Filters(0), std::vector<std::string>{"b/+"});
  EXPECT_TRUE(plan.Covers(0, 7));
  EXPECT_EQ(plan.Coverage(7), 1u);
}

TEST(TopicPlan, PerPublisherFewerSubscribersSplitPublishers) {
  TopicPlan plan(Pattern::kPerPublisher, "b", 5, 2);
  EXPECT_EQ(plan.Filters(0), (std::vector<std::string>{"b/0", "b/2", "b/4"}));
  EXPECT_EQ(plan.Filters(1), (std::vector<std::string>{"b/1", "b/3"}));
  for (uint32_t p = 0; p < 5; ++p) EXPECT_EQ(plan.Coverage(p), 1u);
}

TEST(TopicPlan, PerPublisherMoreSubscribersShareTopics) {
  TopicPlan plan(Pattern::kPerPublisher, "b", 2, 5);
  EXPECT_EQ(plan.Filters(4), std::vector<std::string>{"b/0"});
  EXPECT_EQ(plan.Coverage(0), 3u);  // subscribers 0, 2, 4
  EXPECT_EQ(plan.Coverage(1), 2u);  // subscribers 1, 3
  EXPECT_FALSE(plan.Covers(1, 0));
}

TEST(TopicPlan, CoverageMatchesCovers) {
  for (uint32_t p = 1; p <= 6; ++p) {
    for (uint32_t s = 0; s <= 7; ++s) {
      TopicPlan plan(Pattern::kPerPublisher, "b", p, s);
      for (uint32_t i = 0; i < p; ++i) {
        uint32_t count = 0;
        for (uint32_t j = 0; j < s; ++j) count += plan.Covers(j, i) ? 1 : 0;
        EXPECT_EQ(plan.Coverage(i), count) << p << " " << s << " " << i;
      }
    }
  }
}

}  // namespace
}  // namespace estuary::bench
