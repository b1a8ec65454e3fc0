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

}  // namespace
}  // namespace estuary::bench
