// estuary-bench's AMQP 1.0 clients end to end against FakeAmqpBroker: real
// sockets on port 0, real client loops, every figure checked.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "tools/bench/fake_amqp_broker.h"
#include "tools/bench/options.h"
#include "tools/bench/run.h"

namespace estuary::bench {
namespace {

using testing::FakeAmqpBroker;
using testing::FakeAmqpBrokerConfig;

Options AmqpOptions(const FakeAmqpBroker& broker, std::vector<std::string> args) {
  args.insert(args.begin(), {"estuary-bench", "--broker", "amqp://" + broker.endpoint().ToString(),
                             "--drain-timeout", "5"});
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  auto options = ParseOptions(static_cast<int>(argv.size()), argv.data());
  EXPECT_TRUE(options) << options.error().text;
  return options ? *options : Options{};
}

struct Case {
  const char* name;
  FakeAmqpBrokerConfig broker;
  std::vector<std::string> args;
  uint64_t expected;  // deliveries
};
void PrintTo(const Case& c, std::ostream* out) { *out << c.name; }

class AmqpWorkloads : public ::testing::TestWithParam<Case> {};

TEST_P(AmqpWorkloads, DeliversEverythingOnceAndCountsIt) {
  FakeAmqpBroker broker(GetParam().broker);
  const Options options = AmqpOptions(broker, GetParam().args);
  const TrafficOutcome outcome = MeasureTraffic(options, broker.endpoint());
  ASSERT_FALSE(outcome.error) << *outcome.error;
  const Summary& s = outcome.summary;
  EXPECT_EQ(s.sent, options.publishers * options.count);
  EXPECT_EQ(broker.transfers_received(), s.sent);
  EXPECT_EQ(s.expected, GetParam().expected);
  EXPECT_EQ(s.received, GetParam().expected);
  EXPECT_EQ(s.lost, 0u);
  EXPECT_EQ(s.duplicates, 0u);
  EXPECT_EQ(s.foreign, 0u);
  EXPECT_EQ(s.latency.count(), GetParam().expected);
  EXPECT_EQ(s.acked, options.qos > 0 ? s.sent : 0u);
  EXPECT_EQ(s.rejected, 0u);
  EXPECT_EQ(s.ack_latency.count(), s.acked);
}

FakeAmqpBrokerConfig WithCredit(uint32_t credit) {
  FakeAmqpBrokerConfig config;
  config.sender_credit = credit;
  return config;
}

FakeAmqpBrokerConfig WithoutSasl() {
  FakeAmqpBrokerConfig config;
  config.sasl = false;
  return config;
}

INSTANTIATE_TEST_SUITE_P(
    Bench, AmqpWorkloads,
    ::testing::Values(
        Case{"PreSettled", {}, {"-q", "0", "-n", "3000"}, 3000},
        Case{"Unsettled", {}, {"-q", "1", "-n", "3000"}, 3000},
        Case{"FourKiBBodies", {}, {"-q", "1", "-n", "500", "-s", "4096"}, 500},
        Case{"MultiFrameBodies", {}, {"-q", "0", "-n", "50", "-s", "300000"}, 50},
        // The broker's credit, not the in-flight window, is the bound.
        Case{"SmallBrokerCreditPreSettled", WithCredit(4), {"-q", "0", "-n", "2000"}, 2000},
        Case{"SmallBrokerCreditUnsettled", WithCredit(4), {"-q", "1", "-n", "2000"}, 2000},
        Case{"SmallReceiverCredit", {}, {"-q", "1", "-n", "2000", "--credit", "3"}, 2000},
        Case{"NoSasl", WithoutSasl(), {"-q", "1", "-n", "1000", "--amqp-sasl", "none"}, 1000},
        Case{"FanOut", {}, {"-q", "0", "-n", "500", "-P", "1", "-S", "3", "--pattern", "fan-out"}, 1500},
        Case{"PerPublisherTwoThreads",
             {},
             {"-q", "1", "-n", "400", "-P", "3", "-S", "2", "--pattern", "per-publisher", "--threads", "2"},
             1200}),
    [](const ::testing::TestParamInfo<Case>& test) { return std::string(test.param.name); });

TEST(AmqpBench, AddressPrefixesAreAddedToTopicAndFilter) {
  FakeAmqpBroker broker;
  const Options options = AmqpOptions(broker, {"-q", "1", "-n", "100", "-t", "t1", "--amqp-target-prefix", "/topic/",
                                               "--amqp-source-prefix", "/topic/"});
  const TrafficOutcome outcome = MeasureTraffic(options, broker.endpoint());
  ASSERT_FALSE(outcome.error) << *outcome.error;
  EXPECT_EQ(outcome.summary.received, 100u);
}

TEST(AmqpBench, MismatchedPrefixesDeliverNothingAndCountItLost) {
  FakeAmqpBroker broker;
  const Options options = AmqpOptions(broker, {"-q", "1", "-n", "100", "--amqp-target-prefix", "/a/",
                                               "--amqp-source-prefix", "/b/", "--drain-timeout", "0.2"});
  const TrafficOutcome outcome = MeasureTraffic(options, broker.endpoint());
  ASSERT_FALSE(outcome.error) << *outcome.error;
  EXPECT_EQ(outcome.summary.acked, 100u);
  EXPECT_EQ(outcome.summary.received, 0u);
  EXPECT_EQ(outcome.summary.lost, 100u);
}

TEST(AmqpBench, RejectedDeliveriesAreCountedNotAcked) {
  FakeAmqpBrokerConfig config;
  config.reject_unsettled = true;
  FakeAmqpBroker broker(config);
  const Options options = AmqpOptions(broker, {"-q", "1", "-n", "300", "-S", "0"});
  const TrafficOutcome outcome = MeasureTraffic(options, broker.endpoint());
  ASSERT_FALSE(outcome.error) << *outcome.error;
  EXPECT_EQ(outcome.summary.sent, 300u);
  EXPECT_EQ(outcome.summary.acked, 0u);
  EXPECT_EQ(outcome.summary.rejected, 300u);
}

TEST(AmqpBench, RefusedAttachEndsTheRunWithTheBrokersCondition) {
  FakeAmqpBrokerConfig config;
  config.refuse_address = "nowhere";
  FakeAmqpBroker broker(config);
  const Options options = AmqpOptions(broker, {"-q", "1", "-n", "10", "-t", "nowhere"});
  const TrafficOutcome outcome = MeasureTraffic(options, broker.endpoint());
  ASSERT_TRUE(outcome.error);
  EXPECT_NE(outcome.error->find("amqp:not-found"), std::string::npos) << *outcome.error;
  EXPECT_NE(outcome.error->find("nowhere"), std::string::npos) << *outcome.error;
}

TEST(AmqpBench, PacedRunSendsAtTheRate) {
  FakeAmqpBroker broker;
  const Options options = AmqpOptions(broker, {"-q", "1", "-r", "2000", "-d", "1", "-P", "2"});
  const TrafficOutcome outcome = MeasureTraffic(options, broker.endpoint());
  ASSERT_FALSE(outcome.error) << *outcome.error;
  // 2000/s for 1 s; the stop arrives by the coordinator's clock, so allow slack.
  EXPECT_GE(outcome.summary.sent, 1800u);
  EXPECT_LE(outcome.summary.sent, 2600u);
  EXPECT_EQ(outcome.summary.lost, 0u);
}

TEST(AmqpBench, IdleConnectionsOpenAndHold) {
  FakeAmqpBroker broker;
  const Options options = AmqpOptions(broker, {"--idle", "--connections", "20", "-d", "0.2"});
  const IdleSummary summary = MeasureIdle(options, broker.endpoint(), nullptr);
  EXPECT_EQ(summary.connected, 20u);
  EXPECT_EQ(summary.failed, 0u);
  EXPECT_EQ(summary.dropped, 0u);
}

}  // namespace
}  // namespace estuary::bench
