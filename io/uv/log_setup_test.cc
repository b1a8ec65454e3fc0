#include "io/uv/log_setup.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace estuary::io {
namespace {

TEST(LogSetupTest, JsonLineHasTheFields) {
  const auto line = nlohmann::json::parse(
      JsonLogLine("2026-01-01T00:00:00.000Z", "info", "estuaryd", 42, "mqtt: hello \"quoted\""));
  EXPECT_EQ(line["time"], "2026-01-01T00:00:00.000Z");
  EXPECT_EQ(line["level"], "info");
  EXPECT_EQ(line["logger"], "estuaryd");
  EXPECT_EQ(line["thread"], 42);
  EXPECT_EQ(line["message"], "mqtt: hello \"quoted\"");
  EXPECT_FALSE(line.contains("client_id"));
  EXPECT_FALSE(line.contains("address"));
}

TEST(LogSetupTest, ClientWordsAreLifted) {
  const auto line = nlohmann::json::parse(
      JsonLogLine("t", "warn", "estuaryd", 1, "mqtt: client=dev-7 address=10.0.0.5:4242 disconnected (keep alive)"));
  EXPECT_EQ(line["client_id"], "dev-7");
  EXPECT_EQ(line["address"], "10.0.0.5:4242");
  const auto v6 = nlohmann::json::parse(JsonLogLine("t", "info", "x", 1, "amqp: (client=c1, address=[::1]:5672)"));
  EXPECT_EQ(v6["client_id"], "c1");
  EXPECT_EQ(v6["address"], "[::1]:5672");
  // A word that merely ends in "client=" is not the client's.
  const auto other = nlohmann::json::parse(JsonLogLine("t", "info", "x", 1, "subclient=a"));
  EXPECT_FALSE(other.contains("client_id"));
}

TEST(LogSetupTest, InvalidUtf8IsReplacedNotThrown) {
  const auto line = nlohmann::json::parse(JsonLogLine("t", "info", "x", 1, "client=\xff\xfe address=1.2.3.4:1"));
  EXPECT_TRUE(line.contains("client_id"));
}

}  // namespace
}  // namespace estuary::io
