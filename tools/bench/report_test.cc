#include "tools/bench/report.h"

#include <gtest/gtest.h>

#include "tools/bench/stats.h"

namespace estuary::bench {
namespace {

WorkerResult OnePublisherOneSubscriber(uint64_t sent, uint64_t got) {
  WorkerResult w;
  w.sent = sent;
  w.received = got;
  w.publish_end_ns = 2'000'000'000;
  w.last_receive_ns = 3'000'000'000;
  w.publishers.push_back({0, sent});
  w.subscribers.push_back({0, {got}});
  for (uint64_t i = 0; i < got; ++i) w.latency.Record(1'000'000);
  return w;
}

TEST(Summarize, CountsLostAgainstWhatWasSent) {
  TopicPlan plan(Pattern::kOneTopic, "t", 1, 1);
  Summary s = Summarize({OnePublisherOneSubscriber(1000, 990)}, plan, 1, 100, 1'000'000'000);
  EXPECT_EQ(s.sent, 1000u);
  EXPECT_EQ(s.expected, 1000u);
  EXPECT_EQ(s.lost, 10u);
  EXPECT_DOUBLE_EQ(s.publish_seconds, 1.0);
  EXPECT_DOUBLE_EQ(s.receive_seconds, 2.0);
  EXPECT_DOUBLE_EQ(s.send_rate, 1000.0);
  EXPECT_DOUBLE_EQ(s.send_mb_s, 0.1);
  EXPECT_DOUBLE_EQ(s.receive_rate, 495.0);
}

TEST(Summarize, PublishersAndSubscribersOnDifferentWorkers) {
  // Fan-out 1 -> 2 with the publisher on worker 0 and subscribers on 0 and 1.
  TopicPlan plan(Pattern::kOneTopic, "t", 1, 2);
  WorkerResult a, b;
  a.publishers.push_back({0, 50});
  a.subscribers.push_back({0, {50}});
  b.subscribers.push_back({1, {45}});
  Summary s = Summarize({a, b}, plan, 1, 64, 0);
  EXPECT_EQ(s.expected, 100u);
  EXPECT_EQ(s.lost, 5u);
}

TEST(Summarize, PerPublisherExpectsOnlyCoveredPublishers) {
  TopicPlan plan(Pattern::kPerPublisher, "t", 2, 2);
  WorkerResult w;
  w.publishers = {{0, 10}, {1, 20}};
  w.subscribers = {{0, {10, 0}}, {1, {0, 20}}};
  Summary s = Summarize({w}, plan, 2, 64, 0);
  EXPECT_EQ(s.expected, 30u);
  EXPECT_EQ(s.lost, 0u);
}

TEST(Report, JsonCarriesEveryFigure) {
  auto options = ParseOptions(1, std::vector<const char*>{"estuary-bench"}.data());
  ASSERT_TRUE(options);
  TopicPlan plan(Pattern::kOneTopic, "t", 1, 1);
  Summary s = Summarize({OnePublisherOneSubscriber(100, 100)}, plan, 1, 64, 1'000'000'000);
  nlohmann::json json = ToJson(*options, s);
  for (const char* key : {"sent", "acked", "received", "lost", "duplicated", "out_of_order", "send_rate",
                          "receive_rate", "send_mb_s", "receive_mb_s", "latency_ns", "config"}) {
    EXPECT_TRUE(json.contains(key)) << key;
  }
  EXPECT_EQ(json["latency_ns"]["count"], 100);
  EXPECT_EQ(json["latency_ns"]["p99_9"], 1'000'000);
  EXPECT_EQ(json["config"]["qos"], 0);
}

TEST(Report, TextHasThroughputAndLatency) {
  auto options = ParseOptions(1, std::vector<const char*>{"estuary-bench"}.data());
  ASSERT_TRUE(options);
  TopicPlan plan(Pattern::kOneTopic, "t", 1, 1);
  Summary s = Summarize({OnePublisherOneSubscriber(100, 100)}, plan, 1, 64, 1'000'000'000);
  const std::string text = FormatText(*options, s);
  EXPECT_NE(text.find("msgs/s"), std::string::npos) << text;
  EXPECT_NE(text.find("p99.9 1.000"), std::string::npos) << text;
  EXPECT_NE(text.find("lost 0"), std::string::npos) << text;
}

TEST(Report, ProgressLineShowsRates) {
  EXPECT_EQ(FormatProgress({2.0, 3000, 2500}, {1.0, 1000, 500}),
            "[   2.0 s] sent 3000 (2000/s)  received 2500 (2000/s)");
}

}  // namespace
}  // namespace estuary::bench
