#include "server/config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "io/tls/tls_test_certs.h"

namespace estuary::server {
namespace {

ParseOutcome Parse(std::vector<const char*> args) {
  args.insert(args.begin(), "estuaryd");
  return ParseCommandLine(static_cast<int>(args.size()), args.data());
}

std::string SecretFile(const std::string& text) {
  const std::string path = ::testing::TempDir() + "estuary_config_test.secret";
  std::ofstream(path) << text;
  return path;
}

TEST(ConfigTest, FlagsSetEndpointsAndLimits) {
  const std::string secret = SecretFile("  s3cret \nignored\n");
  // (--cluster on the seeds' network: a loopback one is refused, config_addresses_test.cc)
  auto outcome = Parse({"--node-id", "3", "--mqtt", "127.0.0.1:0", "--shards", "2", "--max-connections", "10",
                        "--cluster", "10.0.0.3:7000", "--seeds", "10.0.0.1:7000,10.0.0.2:7000",
                        "--cluster-secret-file", secret.c_str()});
  ASSERT_TRUE(std::holds_alternative<NodeConfig>(outcome));
  const auto& config = std::get<NodeConfig>(outcome);
  EXPECT_EQ(config.node_id, 3);
  EXPECT_EQ(config.mqtt.port, 0);
  EXPECT_EQ(config.shards, 2);
  EXPECT_EQ(config.limits.max_connections, 10u);
  ASSERT_EQ(config.seeds.size(), 2u);
  EXPECT_EQ(config.seeds[1].host, "10.0.0.2");
  EXPECT_EQ(config.cluster_secret, "s3cret");
}

TEST(ConfigTest, TlsListenersNeedACertificateAndItsRulesHold) {
  for (std::vector<const char*> args : std::vector<std::vector<const char*>>{
           {"--mqtts", "127.0.0.1:0"},                     // no --tls-cert/--tls-key
           {"--amqps", "127.0.0.1:0"},
           {"--tls-require-client-cert"},                  // no --tls-ca
           {"--tls-identity-as-username"},                 // no --tls-require-client-cert
           {"--tls-min-version", "1.1"},
           {"--mqtts", "not-an-endpoint"}}) {
    auto outcome = Parse(args);
    ASSERT_TRUE(std::holds_alternative<ExitRequest>(outcome)) << args[0];
    EXPECT_EQ(std::get<ExitRequest>(outcome).status, 2) << args[0];
  }
}

// Issue 25 point 3: the WebSocket listeners' flags.
TEST(ConfigTest, WebSocketListenersParseAndSecureOnesNeedACertificate) {
  auto outcome = Parse({"--mqtt-ws", "127.0.0.1:0", "--amqp-ws", "127.0.0.1:9001", "--ws-handshake-timeout", "500"});
  ASSERT_TRUE(std::holds_alternative<NodeConfig>(outcome));
  const NodeConfig& config = std::get<NodeConfig>(outcome);
  EXPECT_EQ(config.mqtt_ws, "127.0.0.1:0");
  EXPECT_EQ(config.amqp_ws, "127.0.0.1:9001");
  EXPECT_EQ(config.ws_handshake_timeout_ms, 500u);
  for (std::vector<const char*> args : std::vector<std::vector<const char*>>{
           {"--mqtt-wss", "127.0.0.1:0"},  // no --tls-cert/--tls-key
           {"--amqp-wss", "127.0.0.1:0"},
           {"--mqtt-ws", "not-an-endpoint"},
           {"--ws-handshake-timeout", "0"}}) {
    auto refused = Parse(args);
    ASSERT_TRUE(std::holds_alternative<ExitRequest>(refused)) << args[0];
    EXPECT_EQ(std::get<ExitRequest>(refused).status, 2) << args[0];
  }
}

TEST(ConfigTest, SeedsWithoutASecretExitTwo) {
  auto outcome = Parse({"--seeds", "10.0.0.1:7000"});
  ASSERT_TRUE(std::holds_alternative<ExitRequest>(outcome));
  EXPECT_EQ(std::get<ExitRequest>(outcome).status, 2);
  const std::string empty = SecretFile("\n");
  outcome = Parse({"--cluster-secret-file", empty.c_str()});
  ASSERT_TRUE(std::holds_alternative<ExitRequest>(outcome));
  EXPECT_EQ(std::get<ExitRequest>(outcome).status, 2);
}

TEST(ConfigTest, DefaultShardsFollowTheCores) {
  auto outcome = Parse({});
  ASSERT_TRUE(std::holds_alternative<NodeConfig>(outcome));
  EXPECT_GE(std::get<NodeConfig>(outcome).shards, 1);
}

TEST(ConfigTest, HelpExitsZero) {
  auto outcome = Parse({"--help"});
  ASSERT_TRUE(std::holds_alternative<ExitRequest>(outcome));
  EXPECT_EQ(std::get<ExitRequest>(outcome).status, 0);
}

TEST(ConfigTest, BadFlagOrValueExitsTwo) {
  for (auto args : std::vector<std::vector<const char*>>{
           {"--no-such-flag"}, {"--mqtt", "nonsense"}, {"--sync", "sometimes"}, {"--maximum-qos", "3"}}) {
    auto outcome = Parse(args);
    ASSERT_TRUE(std::holds_alternative<ExitRequest>(outcome)) << args[0];
    EXPECT_EQ(std::get<ExitRequest>(outcome).status, 2) << args[0];
  }
}

class ConfigFileTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) {
    std::ofstream(path_) << text;
    return path_;
  }
  void TearDown() override { std::remove(path_.c_str()); }
  std::string path_ = ::testing::TempDir() + "estuary_config_test.toml";
};

TEST_F(ConfigFileTest, TomlKeysAreNamedLikeFlagsAndFlagsWin) {
  const std::string path = Write(
      "node-id = 9\n"
      "mqtt = \"127.0.0.1:2883\"\n"
      "max-queued-messages = 50\n"
      "log-level = \"debug\"\n");
  auto outcome = Parse({"--config", path.c_str(), "--node-id", "4"});
  ASSERT_TRUE(std::holds_alternative<NodeConfig>(outcome));
  const auto& config = std::get<NodeConfig>(outcome);
  EXPECT_EQ(config.node_id, 4);  // the flag wins
  EXPECT_EQ(config.mqtt.port, 2883);
  EXPECT_EQ(config.limits.session.max_queued_messages, 50u);
  EXPECT_EQ(config.log_level, "debug");
}

TEST_F(ConfigFileTest, AmqpCreditFromFileOrFlag) {
  auto defaults = Parse({});
  ASSERT_TRUE(std::holds_alternative<NodeConfig>(defaults));
  EXPECT_EQ(std::get<NodeConfig>(defaults).amqp_credit, 256u);
  const std::string path = Write("amqp-credit = 1000\n");
  auto from_file = Parse({"--config", path.c_str()});
  ASSERT_TRUE(std::holds_alternative<NodeConfig>(from_file));
  EXPECT_EQ(std::get<NodeConfig>(from_file).amqp_credit, 1000u);
  auto from_flag = Parse({"--config", path.c_str(), "--amqp-credit", "64"});
  ASSERT_TRUE(std::holds_alternative<NodeConfig>(from_flag));
  EXPECT_EQ(std::get<NodeConfig>(from_flag).amqp_credit, 64u);
  EXPECT_TRUE(std::holds_alternative<ExitRequest>(Parse({"--amqp-credit", "0"})));
}

TEST_F(ConfigFileTest, ClusterDownOnRefusedIsOnByDefaultAndTurnsOff) {
  auto defaults = Parse({});
  ASSERT_TRUE(std::holds_alternative<NodeConfig>(defaults));
  EXPECT_TRUE(std::get<NodeConfig>(defaults).cluster_down_on_refused);
  const std::string path = Write("cluster-down-on-refused = false\n");
  auto from_file = Parse({"--config", path.c_str()});
  ASSERT_TRUE(std::holds_alternative<NodeConfig>(from_file));
  EXPECT_FALSE(std::get<NodeConfig>(from_file).cluster_down_on_refused);
  auto from_flag = Parse({"--config", path.c_str(), "--cluster-down-on-refused", "true"});
  ASSERT_TRUE(std::holds_alternative<NodeConfig>(from_flag));
  EXPECT_TRUE(std::get<NodeConfig>(from_flag).cluster_down_on_refused);
  EXPECT_TRUE(std::holds_alternative<ExitRequest>(Parse({"--cluster-down-on-refused", "maybe"})));
}

TEST_F(ConfigFileTest, SharedStrategyAndRedeliveryDelayFromFileOrFlag) {
  auto defaults = Parse({});
  ASSERT_TRUE(std::holds_alternative<NodeConfig>(defaults));
  EXPECT_EQ(std::get<NodeConfig>(defaults).shared_subscriptions.strategy, core::SharedStrategy::kRoundRobin);
  EXPECT_EQ(std::get<NodeConfig>(defaults).shared_subscriptions.redelivery_delay_ms, 5000);
  const std::string path = Write("shared-strategy = \"sticky_topic\"\nshared-redelivery-delay = 250\n");
  auto from_file = Parse({"--config", path.c_str()});
  ASSERT_TRUE(std::holds_alternative<NodeConfig>(from_file));
  EXPECT_EQ(std::get<NodeConfig>(from_file).shared_subscriptions.strategy, core::SharedStrategy::kStickyTopic);
  EXPECT_EQ(std::get<NodeConfig>(from_file).shared_subscriptions.redelivery_delay_ms, 250);
  auto from_flag = Parse({"--config", path.c_str(), "--shared-strategy", "least_outstanding"});
  ASSERT_TRUE(std::holds_alternative<NodeConfig>(from_flag));
  EXPECT_EQ(std::get<NodeConfig>(from_flag).shared_subscriptions.strategy, core::SharedStrategy::kLeastOutstanding);
  auto bad = Parse({"--shared-strategy", "random"});
  ASSERT_TRUE(std::holds_alternative<ExitRequest>(bad));
  EXPECT_EQ(std::get<ExitRequest>(bad).status, 2);
  EXPECT_TRUE(std::holds_alternative<ExitRequest>(Parse({"--shared-redelivery-delay", "-2"})));
}

// Issue 27, point 3.
TEST_F(ConfigFileTest, Issue27QueueOverflowFromFileOrFlag) {
  auto defaults = Parse({});
  ASSERT_TRUE(std::holds_alternative<NodeConfig>(defaults));
  EXPECT_EQ(std::get<NodeConfig>(defaults).limits.session.queue_overflow, core::QueueOverflow::kDropNew);
  const std::string path = Write("queue-overflow = \"reject\"\n");
  auto from_file = Parse({"--config", path.c_str()});
  ASSERT_TRUE(std::holds_alternative<NodeConfig>(from_file));
  EXPECT_EQ(std::get<NodeConfig>(from_file).limits.session.queue_overflow, core::QueueOverflow::kReject);
  auto from_flag = Parse({"--config", path.c_str(), "--queue-overflow", "drop-oldest"});
  ASSERT_TRUE(std::holds_alternative<NodeConfig>(from_flag));
  EXPECT_EQ(std::get<NodeConfig>(from_flag).limits.session.queue_overflow, core::QueueOverflow::kDropOldest);
  auto bad = Parse({"--queue-overflow", "drop-all"});
  ASSERT_TRUE(std::holds_alternative<ExitRequest>(bad));
  EXPECT_EQ(std::get<ExitRequest>(bad).status, 2);
}

TEST_F(ConfigFileTest, PartitionedGroupsFromFileOrFlags) {
  auto defaults = Parse({});
  ASSERT_TRUE(std::holds_alternative<NodeConfig>(defaults));
  EXPECT_TRUE(std::get<NodeConfig>(defaults).shared_subscriptions.partitioned.empty());
  auto flags = Parse({"--partitioned-group", "jobs=4", "--partitioned-group", "logs=2:topic"});
  ASSERT_TRUE(std::holds_alternative<NodeConfig>(flags));
  const auto& partitioned = std::get<NodeConfig>(flags).shared_subscriptions.partitioned;
  ASSERT_EQ(partitioned.size(), 2u);
  EXPECT_EQ(partitioned.at("jobs"), (core::PartitionedGroup{4, false}));
  EXPECT_EQ(partitioned.at("logs"), (core::PartitionedGroup{2, true}));
  const std::string path = Write("partitioned-group = [\"jobs=8\"]\n");
  auto from_file = Parse({"--config", path.c_str()});
  ASSERT_TRUE(std::holds_alternative<NodeConfig>(from_file));
  EXPECT_EQ(std::get<NodeConfig>(from_file).shared_subscriptions.partitioned.at("jobs"), (core::PartitionedGroup{8, false}));
  auto bad = Parse({"--partitioned-group", "jobs=0"});
  ASSERT_TRUE(std::holds_alternative<ExitRequest>(bad));
  EXPECT_EQ(std::get<ExitRequest>(bad).status, 2);
  EXPECT_TRUE(std::holds_alternative<ExitRequest>(Parse({"--partitioned-group", "jobs"})));
}

TEST_F(ConfigFileTest, ReplicationAckFromFileOrFlag) {
  auto defaults = Parse({});
  ASSERT_TRUE(std::holds_alternative<NodeConfig>(defaults));
  EXPECT_EQ(std::get<NodeConfig>(defaults).replication_ack, "majority");
  const std::string path = Write("replication-ack = \"leader\"\n");
  auto from_file = Parse({"--config", path.c_str()});
  ASSERT_TRUE(std::holds_alternative<NodeConfig>(from_file));
  EXPECT_EQ(std::get<NodeConfig>(from_file).replication_ack, "leader");
  auto from_flag = Parse({"--config", path.c_str(), "--replication-ack", "majority"});
  ASSERT_TRUE(std::holds_alternative<NodeConfig>(from_flag));
  EXPECT_EQ(std::get<NodeConfig>(from_flag).replication_ack, "majority");
  auto bad = Parse({"--replication-ack", "none"});
  ASSERT_TRUE(std::holds_alternative<ExitRequest>(bad));
  EXPECT_EQ(std::get<ExitRequest>(bad).status, 2);
}

TEST_F(ConfigFileTest, UnknownKeyInFileExitsTwo) {
  const std::string path = Write("no-such-key = 1\n");
  auto outcome = Parse({"--config", path.c_str()});
  ASSERT_TRUE(std::holds_alternative<ExitRequest>(outcome));
  EXPECT_EQ(std::get<ExitRequest>(outcome).status, 2);
}

// Issue 21 point 6: every abuse limit is a flag and a TOML key; all off by
// default but the log-in back-off.
TEST_F(ConfigFileTest, AbuseLimitsFromFileOrFlag) {
  auto defaults = Parse({});
  ASSERT_TRUE(std::holds_alternative<NodeConfig>(defaults));
  const NodeConfig& off = std::get<NodeConfig>(defaults);
  EXPECT_EQ(off.abuse.max_connections_per_ip, 0u);
  EXPECT_EQ(off.abuse.connect_rate_per_ip, 0);
  EXPECT_EQ(off.abuse.max_pending_connections, 0u);
  EXPECT_EQ(off.limits.max_publish_rate, 0u);
  EXPECT_EQ(off.limits.max_publish_bytes_rate, 0u);
  EXPECT_EQ(off.abuse.auth_failures_before_backoff, 5u);
  EXPECT_EQ(off.abuse.auth_backoff_ms, 1000u);
  EXPECT_EQ(off.abuse.auth_backoff_max_ms, 60'000u);
  EXPECT_EQ(off.connect_timeout_ms, 10'000u);  // on by default
  const std::string path = Write(
      "max-connections-per-ip = 20\n"
      "connect-rate-per-ip = 2.5\n"
      "max-pending-connections = 500\n"
      "max-publish-rate = 100\n"
      "max-publish-bytes-rate = 65536\n"
      "auth-failures-before-backoff = 3\n"
      "auth-backoff = 250\n"
      "auth-backoff-max = 8000\n"
      "connect-timeout = 2500\n");
  auto from_file = Parse({"--config", path.c_str(), "--max-publish-rate", "7"});
  ASSERT_TRUE(std::holds_alternative<NodeConfig>(from_file));
  const NodeConfig& set = std::get<NodeConfig>(from_file);
  EXPECT_EQ(set.abuse.max_connections_per_ip, 20u);
  EXPECT_EQ(set.abuse.connect_rate_per_ip, 2.5);
  EXPECT_EQ(set.abuse.max_pending_connections, 500u);
  EXPECT_EQ(set.limits.max_publish_rate, 7u);  // the flag wins
  EXPECT_EQ(set.limits.max_publish_bytes_rate, 65536u);
  EXPECT_EQ(set.abuse.auth_failures_before_backoff, 3u);
  EXPECT_EQ(set.abuse.auth_backoff_ms, 250u);
  EXPECT_EQ(set.abuse.auth_backoff_max_ms, 8000u);
  EXPECT_EQ(set.connect_timeout_ms, 2500u);
  EXPECT_TRUE(std::holds_alternative<ExitRequest>(Parse({"--connect-timeout", "0"})));
  EXPECT_TRUE(std::holds_alternative<ExitRequest>(Parse({"--connect-rate-per-ip", "-1"})));
  EXPECT_TRUE(std::holds_alternative<ExitRequest>(Parse({"--max-connections-per-ip", "many"})));
}

}  // namespace
}  // namespace estuary::server

namespace estuary::server {
namespace {

TEST_F(ConfigFileTest, AdminTokenFileFromFileAndNonLoopbackAdminNeedsIt) {
  const std::string token = ::testing::TempDir() + "estuary_config_test.token";
  std::ofstream(token) << "token-0123456789abcdef\n";
  std::filesystem::permissions(token, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  const std::string path = Write("admin = \"0.0.0.0:0\"\nadmin-token-file = \"" + token + "\"\n");
  auto outcome = Parse({"--config", path.c_str()});
  ASSERT_TRUE(std::holds_alternative<NodeConfig>(outcome));
  EXPECT_EQ(std::get<NodeConfig>(outcome).admin_token_file, token);
  auto open = Parse({"--admin", "0.0.0.0:0"});  // not loopback, no token
  ASSERT_TRUE(std::holds_alternative<ExitRequest>(open));
  EXPECT_EQ(std::get<ExitRequest>(open).status, 2);
  EXPECT_TRUE(std::holds_alternative<NodeConfig>(Parse({"--admin", "127.0.0.1:0"})));
  std::filesystem::permissions(token, std::filesystem::perms::others_read, std::filesystem::perm_options::add);
  auto readable = Parse({"--admin-token-file", token.c_str()});
  ASSERT_TRUE(std::holds_alternative<ExitRequest>(readable));
  EXPECT_EQ(std::get<ExitRequest>(readable).status, 2);
  std::remove(token.c_str());
}

TEST_F(ConfigFileTest, ClusterTlsFromFileAndItsRules) {
  io::test_support::TestCertificates certificates;
  auto node = certificates.Client("estuary-node-1");
  const std::string secret = SecretFile("cluster-secret\n");
  const std::string path = Write("cluster-secret-file = \"" + secret + "\"\ncluster-tls-cert = \"" + node.cert +
                                 "\"\ncluster-tls-key = \"" + node.key + "\"\ncluster-tls-ca = \"" +
                                 certificates.ca_file() + "\"\ncluster-tls-node-names = true\n");
  auto outcome = Parse({"--config", path.c_str()});
  ASSERT_TRUE(std::holds_alternative<NodeConfig>(outcome));
  EXPECT_TRUE(std::get<NodeConfig>(outcome).cluster_tls_node_names);
  const io::TlsSettings& tls = std::get<NodeConfig>(outcome).cluster_tls;
  EXPECT_EQ(tls.cert_file, node.cert);
  EXPECT_EQ(tls.ca_file, certificates.ca_file());
  EXPECT_EQ(tls.min_version, "1.3");
  EXPECT_EQ(tls.flag_prefix, "--cluster-tls");
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {"--cluster-secret-file", secret, "--cluster-tls-cert", node.cert},  // not all three
           {"--cluster-tls-cert", node.cert, "--cluster-tls-key", node.key, "--cluster-tls-ca",
            certificates.ca_file()},                                            // no secret
           {"--cluster-secret-file", secret, "--cluster-tls-cert", node.cert, "--cluster-tls-key",
            certificates.ca_file(), "--cluster-tls-ca", certificates.ca_file()},  // not a key
           {"--cluster-secret-file", secret, "--cluster-tls-node-names"}}) {      // names without TLS
    std::vector<const char*> argv;
    for (const auto& arg : args) argv.push_back(arg.c_str());
    auto refused = Parse(argv);
    ASSERT_TRUE(std::holds_alternative<ExitRequest>(refused)) << args.back();
    EXPECT_EQ(std::get<ExitRequest>(refused).status, 2);
  }
}

}  // namespace
}  // namespace estuary::server
