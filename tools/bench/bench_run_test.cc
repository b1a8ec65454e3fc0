// estuary-bench end to end against FakeBroker: real sockets on port 0, real
// client loops, every figure checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tools/bench/fake_broker.h"
#include "tools/bench/options.h"
#include "tools/bench/run.h"

namespace estuary::bench {
namespace {

using testing::FakeBroker;
using testing::FakeBrokerConfig;

Options MakeOptions(const FakeBroker& broker, std::vector<std::string> args) {
  args.insert(args.begin(), {"estuary-bench", "--broker", broker.endpoint().ToString(), "--drain-timeout", "5"});
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  auto options = ParseOptions(static_cast<int>(argv.size()), argv.data());
  EXPECT_TRUE(options) << options.error().text;
  return options ? *options : Options{};
}

struct Case {
  const char* name;
  std::vector<std::string> args;
  uint64_t expected;  // deliveries
};

class EveryQosAndVersion : public ::testing::TestWithParam<Case> {};

TEST_P(EveryQosAndVersion, DeliversEverythingOnceAndCountsIt) {
  FakeBroker broker;
  const Options options = MakeOptions(broker, GetParam().args);
  const TrafficOutcome outcome = MeasureTraffic(options, broker.endpoint());
  ASSERT_FALSE(outcome.error) << *outcome.error;
  const Summary& s = outcome.summary;
  EXPECT_EQ(s.sent, options.publishers * options.count);
  EXPECT_EQ(s.expected, GetParam().expected);
  EXPECT_EQ(s.received, GetParam().expected);
  EXPECT_EQ(s.lost, 0u);
  EXPECT_EQ(s.duplicates, 0u);
  EXPECT_EQ(s.foreign, 0u);
  EXPECT_EQ(s.latency.count(), GetParam().expected);
  EXPECT_EQ(s.acked, options.qos > 0 ? s.sent : 0u);
  EXPECT_EQ(s.ack_latency.count(), s.acked);
  EXPECT_GT(s.receive_rate, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Bench, EveryQosAndVersion,
    ::testing::Values(
        Case{"Qos0V311", {"-q", "0", "-n", "3000"}, 3000},
        Case{"Qos1V311", {"-q", "1", "-n", "3000"}, 3000},
        Case{"Qos2V311", {"-q", "2", "-n", "3000"}, 3000},
        Case{"Qos0V5", {"-q", "0", "-n", "3000", "-V", "5"}, 3000},
        Case{"Qos1V5", {"-q", "1", "-n", "3000", "-V", "5"}, 3000},
        Case{"Qos2V5", {"-q", "2", "-n", "3000", "-V", "5", "--inflight", "3"}, 3000},
        Case{"FanIn", {"-q", "1", "-n", "500", "-P", "4", "-S", "1", "--pattern", "fan-in"}, 2000},
        Case{"FanOut", {"-q", "0", "-n", "500", "-P", "1", "-S", "3", "--pattern", "fan-out"}, 1500},
        Case{"PerPublisherTwoThreads",
             {"-q", "2", "-n", "400", "-P", "3", "-S", "2", "--pattern", "per-publisher", "--threads", "2"},
             1200},
        Case{"OneTopicManyToMany", {"-q", "1", "-n", "200", "-P", "3", "-S", "2", "--threads", "3"}, 1200}),
    [](const ::testing::TestParamInfo<Case>& test) { return std::string(test.param.name); });

TEST(Bench, PacedRunSendsAtTheRate) {
  FakeBroker broker;
  const Options options = MakeOptions(broker, {"-q", "1", "-r", "2000", "-d", "1", "-P", "2"});
  const TrafficOutcome outcome = MeasureTraffic(options, broker.endpoint());
  ASSERT_FALSE(outcome.error) << *outcome.error;
  // 2000/s for 1 s; the stop arrives by the coordinator's clock, so allow slack.
  EXPECT_GE(outcome.summary.sent, 1800u);
  EXPECT_LE(outcome.summary.sent, 2600u);
  EXPECT_EQ(outcome.summary.lost, 0u);
}

TEST(Bench, CountsLossAndDuplicates) {
  FakeBrokerConfig config;
  config.drop_every = 10;
  config.duplicate_every = 7;
  FakeBroker broker(config);
  const Options options = MakeOptions(broker, {"-q", "0", "-n", "700", "--drain-timeout", "0.3"});
  const TrafficOutcome outcome = MeasureTraffic(options, broker.endpoint());
  ASSERT_FALSE(outcome.error) << *outcome.error;
  EXPECT_EQ(outcome.summary.lost, 70u);
  // Deliveries 7, 14, ... are duplicated, except those also dropped (70, 140, ...).
  EXPECT_EQ(outcome.summary.duplicates, 100u - 10u);
  EXPECT_EQ(outcome.summary.received, 700u - 70u + 90u);
}

TEST(Bench, RefusedConnectionIsAnError) {
  FakeBrokerConfig config;
  config.connack_reason = mqtt::ReasonCode::kNotAuthorized;
  FakeBroker broker(config);
  const TrafficOutcome outcome = MeasureTraffic(MakeOptions(broker, {"-n", "10"}), broker.endpoint());
  ASSERT_TRUE(outcome.error);
  EXPECT_NE(outcome.error->find("refused the connection"), std::string::npos) << *outcome.error;
}

TEST(Bench, RefusedSubscriptionIsAnError) {
  FakeBrokerConfig config;
  config.refuse_subscriptions = true;
  FakeBroker broker(config);
  const TrafficOutcome outcome = MeasureTraffic(MakeOptions(broker, {"-n", "10", "-V", "5"}), broker.endpoint());
  ASSERT_TRUE(outcome.error);
  EXPECT_NE(outcome.error->find("refused the subscription"), std::string::npos) << *outcome.error;
}

TEST(Bench, NothingListeningIsAnError) {
  io::Endpoint closed;
  {
    FakeBroker broker;
    closed = broker.endpoint();
  }
  Options options;
  options.count = 10;
  const TrafficOutcome outcome = MeasureTraffic(options, closed);
  ASSERT_TRUE(outcome.error);
  EXPECT_NE(outcome.error->find("cannot connect to " + closed.ToString()), std::string::npos) << *outcome.error;
}

TEST(Bench, ConnectionLostMidRunEndsItWithAnError) {
  FakeBrokerConfig config;
  config.close_after = 500;
  FakeBroker broker(config);
  const Options options = MakeOptions(broker, {"-q", "1", "-d", "30"});
  const TrafficOutcome outcome = MeasureTraffic(options, broker.endpoint());
  ASSERT_TRUE(outcome.error);
  EXPECT_NE(outcome.error->find("closed"), std::string::npos) << *outcome.error;
  EXPECT_GE(outcome.summary.sent, 499u);
  EXPECT_LT(outcome.summary.publish_seconds, 10.0);
}

TEST(Bench, UnacknowledgedPublishesEndAfterTheDrainTimeout) {
  FakeBrokerConfig config;
  config.acknowledge = false;
  FakeBroker broker(config);
  const Options options = MakeOptions(broker, {"-q", "1", "-n", "100", "--inflight", "10", "--drain-timeout", "0.2"});
  const TrafficOutcome outcome = MeasureTraffic(options, broker.endpoint());
  ASSERT_FALSE(outcome.error) << *outcome.error;
  EXPECT_EQ(outcome.summary.sent, 10u);  // the window filled and nothing came back
  EXPECT_EQ(outcome.summary.acked, 0u);
  EXPECT_EQ(outcome.summary.received, 10u);
}

TEST(Bench, IdleConnectionsAreCountedAndHeld) {
  FakeBroker broker;
  const Options options =
      MakeOptions(broker, {"--idle", "--connections", "300", "-d", "0.2", "--threads", "2", "--max-connecting", "50"});
  uint32_t connected_at_ready = 0;
  const IdleSummary summary = MeasureIdle(options, broker.endpoint(), [&](const IdleSummary& ready) {
    connected_at_ready = ready.connected;
  });
  EXPECT_EQ(connected_at_ready, 300u);
  EXPECT_EQ(summary.connected, 300u);
  EXPECT_EQ(summary.failed, 0u);
  EXPECT_EQ(summary.dropped, 0u);
  EXPECT_EQ(broker.connections_accepted(), 300u);
}

TEST(Bench, IdleConnectionsFromChosenSourceAddresses) {
  FakeBroker broker;
  const Options options = MakeOptions(
      broker, {"--idle", "--connections", "20", "-d", "0.1", "--local-addresses", "127.0.0.2,127.0.0.3"});
  const IdleSummary summary = MeasureIdle(options, broker.endpoint(), nullptr);
  EXPECT_EQ(summary.connected, 20u) << summary.first_error;
}

}  // namespace
}  // namespace estuary::bench
