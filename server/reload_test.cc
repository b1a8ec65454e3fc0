#include "server/reload.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

namespace estuary::server {
namespace {

const ConfigChange* Find(const std::vector<ConfigChange>& changes, const std::string& key) {
  for (const ConfigChange& change : changes) {
    if (change.key == key) return &change;
  }
  return nullptr;
}

TEST(ReloadTest, SameConfigHasNoChange) {
  NodeConfig config;
  EXPECT_TRUE(DiffConfig(config, config, {}).empty());
}

TEST(ReloadTest, LogLevelAndLimitsAreLiveListenersNeedARestart) {
  NodeConfig running;
  NodeConfig fresh = running;
  fresh.log_level = "debug";
  fresh.limits.max_connections = 5;
  fresh.limits.session.max_queued_messages = 7;
  fresh.mqtt.port = 1999;
  fresh.data_dir = "/elsewhere";
  const auto changes = DiffConfig(running, fresh, {});
  ASSERT_EQ(changes.size(), 5u);
  EXPECT_TRUE(Find(changes, "log-level")->live);
  EXPECT_EQ(Find(changes, "log-level")->before, "info");
  EXPECT_EQ(Find(changes, "log-level")->after, "debug");
  EXPECT_TRUE(Find(changes, "max-connections")->live);
  EXPECT_TRUE(Find(changes, "max-queued-messages")->live);
  EXPECT_FALSE(Find(changes, "mqtt")->live);
  EXPECT_EQ(Find(changes, "mqtt")->after, "127.0.0.1:1999");
  EXPECT_FALSE(Find(changes, "data-dir")->live);
  EXPECT_EQ(DescribeChange(*Find(changes, "max-connections")), "max-connections: 100000 -> 5 (applied)");
  EXPECT_EQ(DescribeChange(*Find(changes, "data-dir")),
            "data-dir:  -> /elsewhere (needs a restart: read once at start; still )");
}

TEST(ReloadTest, ApplyCopiesOnlyLiveKeys) {
  NodeConfig running;
  NodeConfig fresh = running;
  fresh.log_level = "warn";
  fresh.limits.max_publish_rate = 10;
  fresh.limits.receive_maximum = 3;  // told to connected clients: a restart
  fresh.node_id = 9;
  ApplyLiveChanges(running, fresh, {});
  EXPECT_EQ(running.log_level, "warn");
  EXPECT_EQ(running.limits.max_publish_rate, 10u);
  EXPECT_EQ(running.limits.receive_maximum, NodeConfig().limits.receive_maximum);
  EXPECT_EQ(running.node_id, 1);
  // The keys that need a restart are reported again next time.
  const auto again = DiffConfig(running, fresh, {});
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(again[0].key, "receive-maximum");
  EXPECT_EQ(again[0].why, "connected clients were told the running value");
  EXPECT_EQ(again[1].key, "node-id");
}

TEST(ReloadTest, ConnectTimeoutIsLiveWithoutAnyLimitSet) {
  NodeConfig running;
  NodeConfig fresh = running;
  fresh.connect_timeout_ms = 2500;
  const auto changes = DiffConfig(running, fresh, {});
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_TRUE(Find(changes, "connect-timeout")->live);
  ApplyLiveChanges(running, fresh, {});
  EXPECT_EQ(running.connect_timeout_ms, 2500u);
}

TEST(ReloadTest, AbuseLimitsAreLiveOnlyWhereTheGuardCanChangeThem) {
  NodeConfig running;
  running.abuse.max_connections_per_ip = 10;
  NodeConfig fresh = running;
  fresh.abuse.max_connections_per_ip = 2;
  fresh.abuse.max_pending_connections = 4;
  const auto without_guard = DiffConfig(running, fresh, {});
  EXPECT_FALSE(Find(without_guard, "max-connections-per-ip")->live);
  EXPECT_FALSE(Find(without_guard, "max-pending-connections")->live);
  const auto pending_only = DiffConfig(running, fresh, {.guard = true, .guard_per_address = false});
  EXPECT_FALSE(Find(pending_only, "max-connections-per-ip")->live);
  EXPECT_TRUE(Find(pending_only, "max-pending-connections")->live);
  const ReloadAbilities full{.guard = true, .guard_per_address = true};
  EXPECT_TRUE(Find(DiffConfig(running, fresh, full), "max-connections-per-ip")->live);
  ApplyLiveChanges(running, fresh, full);
  EXPECT_EQ(running.abuse.max_connections_per_ip, 2u);
  EXPECT_EQ(running.abuse.max_pending_connections, 4u);
}

TEST(ReloadTest, SecretIsNeverPrinted) {
  NodeConfig running;
  running.cluster_secret = "old-secret";
  NodeConfig fresh = running;
  fresh.cluster_secret = "new-secret";
  const auto changes = DiffConfig(running, fresh, {});
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].before, "(hidden)");
  EXPECT_EQ(changes[0].after, "(hidden)");
  EXPECT_EQ(DescribeChange(changes[0]).find("secret", 15), std::string::npos);
}

TEST(ReloadTest, ReportJson) {
  ReloadReport report;
  report.changes.push_back({"log-level", "info", "debug", true, ""});
  report.errors.push_back("configuration: bad");
  const auto body = nlohmann::json::parse(report.Json());
  EXPECT_FALSE(body["ok"].get<bool>());
  EXPECT_EQ(body["changes"][0]["key"], "log-level");
  EXPECT_TRUE(body["changes"][0]["live"].get<bool>());
  EXPECT_EQ(body["errors"][0], "configuration: bad");
}

TEST(ReloadTest, ParseForReloadReadsTheFileAgainAndFlagsWin) {
  const std::string path = ::testing::TempDir() + "estuary_reload_test.toml";
  std::ofstream(path) << "log-level = \"debug\"\nmax-connections = 7\nmqtt = \"127.0.0.1:1999\"\n";
  auto parsed = ParseConfigForReload({"estuaryd", "--config", path, "--mqtt", "127.0.0.1:0", "--shards", "1"});
  ASSERT_TRUE(parsed.has_value()) << parsed.error();
  EXPECT_EQ(parsed->log_level, "debug");
  EXPECT_EQ(parsed->limits.max_connections, 7u);
  EXPECT_EQ(parsed->mqtt.port, 0);
  std::ofstream(path) << "max-connections = \"many\"\n";
  auto broken = ParseConfigForReload({"estuaryd", "--config", path});
  ASSERT_FALSE(broken.has_value());
  EXPECT_NE(broken.error().find("max-connections"), std::string::npos) << broken.error();
  std::ofstream(path) << "no-such-key = 1\n";
  EXPECT_FALSE(ParseConfigForReload({"estuaryd", "--config", path}).has_value());
}

}  // namespace
}  // namespace estuary::server
