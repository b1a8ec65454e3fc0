#include "tools/bench/options.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace estuary::bench {
namespace {

Expected<Options, ParseExit> Parse(const std::vector<const char*>& args) {
  std::vector<const char*> argv(args.size() + 1, "estuary-bench");
  std::copy(args.begin(), args.end(), argv.begin() + 1);
  return ParseOptions(static_cast<int>(argv.size()), argv.data());
}

TEST(Options, Defaults) {
  auto options = Parse({"--run-id", "255"});
  ASSERT_TRUE(options) << options.error().text;
  EXPECT_EQ(options->broker, "127.0.0.1:1883");
  EXPECT_EQ(options->publishers, 1u);
  EXPECT_EQ(options->subscribers, 1u);
  EXPECT_EQ(options->qos, 0);
  EXPECT_EQ(options->payload_size, 64u);
  EXPECT_FALSE(options->paced());
  EXPECT_FALSE(options->counted());
  EXPECT_EQ(options->duration_s, 10);
  EXPECT_EQ(options->topic_prefix, "estuary-bench/000000ff");
  EXPECT_EQ(options->client_id_prefix, "eb-000000ff-");
  EXPECT_EQ(options->session_expiry_s, 0u);
  auto persistent = Parse({"--session-expiry", "600"});
  ASSERT_TRUE(persistent) << persistent.error().text;
  EXPECT_EQ(persistent->session_expiry_s, 600u);
}

TEST(Options, FullWorkload) {
  auto options = Parse({"-b", "10.0.0.1:1884", "-V", "5", "-P", "8", "-S", "1", "--pattern", "fan-in",
                        "-q", "2", "-s", "128", "-r", "5000", "-n", "100", "--threads", "2", "--json"});
  ASSERT_TRUE(options) << options.error().text;
  EXPECT_EQ(options->version, mqtt::ProtocolVersion::kV5);
  EXPECT_EQ(options->pattern, Pattern::kFanIn);
  EXPECT_EQ(options->qos, 2);
  EXPECT_EQ(options->count, 100u);
  EXPECT_TRUE(options->paced());
  EXPECT_TRUE(options->json);
  EXPECT_EQ(options->threads, 2u);
}

TEST(Options, IdleMode) {
  auto options = Parse({"--idle", "--connections", "10000", "-d", "30", "--local-addresses",
                        "127.0.0.2,127.0.0.3"});
  ASSERT_TRUE(options) << options.error().text;
  EXPECT_TRUE(options->idle);
  EXPECT_EQ(options->connections, 10000u);
  EXPECT_EQ(options->local_addresses, (std::vector<std::string>{"127.0.0.2", "127.0.0.3"}));
}

TEST(Options, LastValueWins) {
  auto options = Parse({"-q", "1", "-q", "2"});
  ASSERT_TRUE(options) << options.error().text;
  EXPECT_EQ(options->qos, 2);
}

TEST(Options, HelpExitsZero) {
  auto options = Parse({"--help"});
  ASSERT_FALSE(options);
  EXPECT_EQ(options.error().exit_code, 0);
  EXPECT_NE(options.error().text.find("--publishers"), std::string::npos);
}

TEST(Options, BadFlagsAreOneLineErrorsWithStatusTwo) {
  for (auto args : std::vector<std::vector<const char*>>{
           {"--no-such-flag"},
           {"-q", "3"},
           {"-s", "10"},
           {"-V", "4.0"},
           {"--pattern", "ring"},
           {"-n", "5", "-d", "5"},
           {"--idle"},
           {"--connections", "5"},
           {"--threads", "0"},
           {"-P", "abc"},
           {"--broker", "http://127.0.0.1:80"},
           {"--broker", "amqp://"},
           {"--protocol", "stomp"},
           {"--broker", "amqp://127.0.0.1:5672", "--credit", "0"},
           {"--broker", "amqp://127.0.0.1:5672", "--local-addresses", "127.0.0.2"},
           {"--amqp-sasl", "plain"},
       }) {
    auto options = Parse(args);
    ASSERT_FALSE(options) << args[0];
    EXPECT_EQ(options.error().exit_code, 2) << args[0];
    EXPECT_EQ(options.error().text.find('\n'), std::string::npos) << options.error().text;
    EXPECT_EQ(options.error().text.rfind("estuary-bench: ", 0), 0u) << options.error().text;
  }
}

TEST(Options, DescribeNamesTheWorkload) {
  auto options = Parse({"-P", "1", "-S", "8", "--pattern", "fan-out", "-q", "1", "-r", "100"});
  ASSERT_TRUE(options);
  EXPECT_EQ(Describe(*options),
            "mqtt 3.1.1 broker 127.0.0.1:1883, qos 1, 1 -> 8 (one-topic), payload 64 B, rate 100 "
            "msgs/s, 10 s, threads 1");
}

TEST(Options, BrokerUrlSchemeSelectsTheProtocol) {
  auto mqtt = Parse({"--broker", "mqtt://10.0.0.1:1884"});
  ASSERT_TRUE(mqtt) << mqtt.error().text;
  EXPECT_EQ(mqtt->broker, "10.0.0.1:1884");
  EXPECT_EQ(mqtt->publish_protocol, Protocol::kMqtt);
  EXPECT_EQ(mqtt->subscribe_broker, "10.0.0.1:1884");

  auto amqp = Parse({"--broker", "amqp://127.0.0.1:5672/", "-q", "1", "--credit", "200"});
  ASSERT_TRUE(amqp) << amqp.error().text;
  EXPECT_EQ(amqp->publish_protocol, Protocol::kAmqp);
  EXPECT_EQ(amqp->subscribe_protocol, Protocol::kAmqp);
  EXPECT_EQ(amqp->publish_broker, "127.0.0.1:5672");
  EXPECT_EQ(amqp->subscribe_broker, "127.0.0.1:5672");
  EXPECT_EQ(amqp->credit, 200u);
  EXPECT_TRUE(amqp->amqp_sasl);

  auto by_flag = Parse({"--protocol", "amqp", "--broker", "127.0.0.1:5672", "--amqp-sasl", "none"});
  ASSERT_TRUE(by_flag) << by_flag.error().text;
  EXPECT_EQ(by_flag->publish_protocol, Protocol::kAmqp);
  EXPECT_FALSE(by_flag->amqp_sasl);
}

TEST(Options, MixedRunTakesEachSideFromItsOwnUrl) {
  auto options = Parse({"--publish-broker", "mqtt://127.0.0.1:1883", "--subscribe-broker",
                        "amqp://127.0.0.1:5672", "-q", "1", "--amqp-source-prefix", "/topic/"});
  ASSERT_TRUE(options) << options.error().text;
  EXPECT_EQ(options->publish_protocol, Protocol::kMqtt);
  EXPECT_EQ(options->publish_broker, "127.0.0.1:1883");
  EXPECT_EQ(options->subscribe_protocol, Protocol::kAmqp);
  EXPECT_EQ(options->subscribe_broker, "127.0.0.1:5672");
  EXPECT_EQ(options->amqp_source_prefix, "/topic/");
  EXPECT_TRUE(options->uses(Protocol::kAmqp));
  EXPECT_TRUE(options->uses(Protocol::kMqtt));
  EXPECT_TRUE(Parse({"--publish-broker", "mqtt://127.0.0.1:1883", "-q", "2"}));
  // AMQP at QoS 2: rcv-settle-mode second both ways.
  auto second = Parse({"--broker", "amqp://127.0.0.1:5672", "-q", "2"});
  ASSERT_TRUE(second) << second.error().text;
  EXPECT_NE(Describe(*second).find("qos 2 (rcv-settle-mode second)"), std::string::npos) << Describe(*second);
}

TEST(Options, DescribeNamesProtocolsAndSettlement) {
  auto amqp = Parse({"--broker", "amqp://127.0.0.1:5672", "-q", "0", "-s", "4096"});
  ASSERT_TRUE(amqp);
  EXPECT_EQ(Describe(*amqp),
            "amqp 1.0 broker 127.0.0.1:5672, qos 0 (pre-settled), 1 -> 1 (one-topic), payload 4096 B, rate "
            "max, 10 s, threads 1");
  auto mixed = Parse({"--broker", "127.0.0.1:1883", "--subscribe-broker", "amqp://127.0.0.1:5672", "-q", "1"});
  ASSERT_TRUE(mixed);
  EXPECT_EQ(Describe(*mixed),
            "mqtt 3.1.1 publishers to 127.0.0.1:1883 -> amqp 1.0 subscribers from 127.0.0.1:5672, qos 1 "
            "(unsettled), 1 -> 1 (one-topic), payload 64 B, rate max, 10 s, threads 1");
}

}  // namespace
}  // namespace estuary::bench
