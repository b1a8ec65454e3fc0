// Issue 24 point 1: --advertise-cluster, --advertise-mqtt, --advertise-amqp
// and --bootstrap-expect, as flags and TOML keys, and the start-up rules
// that refuse an address nobody could dial (server/config_addresses.h).
#include "server/config_addresses.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace estuary::server {
namespace {

ParseOutcome Parse(std::vector<const char*> args) {
  args.insert(args.begin(), "estuaryd");
  return ParseCommandLine(static_cast<int>(args.size()), args.data());
}

std::string SecretFile() {
  const std::string path = ::testing::TempDir() + "estuary_config_addresses_test.secret";
  std::ofstream(path) << "s3cret-s3cret\n";
  return path;
}

// The one-line error of a refused command line (status 2), or "" if it parsed.
std::string Refusal(std::vector<const char*> args) {
  ::testing::internal::CaptureStderr();
  auto outcome = Parse(std::move(args));
  const std::string printed = ::testing::internal::GetCapturedStderr();
  if (std::holds_alternative<NodeConfig>(outcome)) return "";
  EXPECT_EQ(std::get<ExitRequest>(outcome).status, 2) << printed;
  return printed;
}

TEST(ConfigAddressesTest, AdvertisedAddressesParseAndNameWhatOthersDial) {
  const std::string secret = SecretFile();
  auto outcome = Parse({"--cluster", "0.0.0.0:7000", "--advertise-cluster", "127.0.0.1:7000", "--mqtt", "[::]:1883",
                        "--advertise-mqtt", "localhost:1883", "--advertise-amqp", "[::1]:0", "--admin",
                        "127.0.0.1:8080", "--cluster-secret-file", secret.c_str()});
  ASSERT_TRUE(std::holds_alternative<NodeConfig>(outcome));
  const NodeConfig& config = std::get<NodeConfig>(outcome);
  EXPECT_EQ(AdvertisedCluster(config), "127.0.0.1:7000");
  EXPECT_EQ(config.mqtt.host, "::");
  EXPECT_EQ(AdvertisedListener(config.advertise_mqtt, config.mqtt.host, 1883), "localhost:1883");
  EXPECT_EQ(AdvertisedListener(config.advertise_amqp, config.amqp.host, 5999), "[::1]:5999");  // port 0: the bound one
  EXPECT_EQ(AdvertisedListener("", "::", 1883), "[::]:1883");
  EXPECT_EQ(AnnouncedHost(config, "0.0.0.0"), "127.0.0.1");
  EXPECT_EQ(AnnouncedHost(config, "10.1.2.3"), "10.1.2.3");
}

TEST(ConfigAddressesTest, WildcardsAreRecognisedInEverySpelling) {
  for (const char* host : {"0.0.0.0", "::", "[::]", "0:0:0:0:0:0:0:0", ""}) EXPECT_TRUE(IsWildcardHost(host)) << host;
  for (const char* host : {"127.0.0.1", "::1", "[::1]", "10.0.0.1", "estuary-0.estuary"}) {
    EXPECT_FALSE(IsWildcardHost(host)) << host;
  }
}

TEST(ConfigAddressesTest, AnAddressNobodyCanDialIsRefusedNamingTheFlag) {
  const std::string secret = SecretFile();
  EXPECT_NE(Refusal({"--advertise-cluster", "0.0.0.0:7000"}).find("--advertise-cluster"), std::string::npos);
  EXPECT_NE(Refusal({"--advertise-mqtt", "[::]:1883"}).find("--advertise-mqtt"), std::string::npos);
  const std::string unresolvable = Refusal({"--advertise-amqp", "no-such-host.invalid:5672"});
  EXPECT_NE(unresolvable.find("--advertise-amqp"), std::string::npos) << unresolvable;
  EXPECT_NE(unresolvable.find("cannot resolve"), std::string::npos) << unresolvable;
  EXPECT_NE(Refusal({"--advertise-cluster", "not an endpoint"}).find("--advertise-cluster"), std::string::npos);
  // Peers would dial 0.0.0.0: a wildcard --cluster in a cluster needs --advertise-cluster.
  const std::string wildcard = Refusal({"--cluster", "0.0.0.0:7000", "--cluster-secret-file", secret.c_str()});
  EXPECT_NE(wildcard.find("--cluster"), std::string::npos) << wildcard;
  EXPECT_NE(wildcard.find("--advertise-cluster"), std::string::npos) << wildcard;
  EXPECT_EQ(
      Refusal({"--cluster", "[::]:7000", "--advertise-cluster", "[::1]:7000", "--cluster-secret-file", secret.c_str()}),
      "");
  EXPECT_EQ(Refusal({"--cluster", "0.0.0.0:7000"}), "");  // a lone node announces nothing
}

// The default --cluster is loopback: with a seed on another host, peers
// would dial themselves.
TEST(ConfigAddressesTest, ALoopbackAddressAmongOtherHostsIsRefused) {
  const std::string secret = SecretFile();
  const std::string refusal =
      Refusal({"--cluster", "127.0.0.1:7000", "--seeds", "10.0.0.2:7000", "--cluster-secret-file", secret.c_str()});
  EXPECT_NE(refusal.find("--cluster"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("loopback"), std::string::npos) << refusal;
  EXPECT_NE(Refusal({"--cluster", "0.0.0.0:7000", "--advertise-cluster", "[::1]:7000", "--seeds", "[fd00::2]:7000",
                     "--cluster-secret-file", secret.c_str()})
                .find("--advertise-cluster"),
            std::string::npos);
  // Seeds on this host, or by name (not resolved here: they may not be up yet), are fine.
  EXPECT_EQ(Refusal({"--cluster", "127.0.0.1:7000", "--seeds", "127.0.0.1:7001,localhost:7002", "--cluster-secret-file",
                     secret.c_str()}),
            "");
  EXPECT_EQ(Refusal({"--cluster", "127.0.0.1:7000", "--seeds", "estuary-1.estuary:7000", "--cluster-secret-file",
                     secret.c_str()}),
            "");
}

TEST(ConfigAddressesTest, BootstrapExpectMustCountEveryNodeTheSeedsName) {
  const std::string secret = SecretFile();
  const char* seeds = "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003";
  // The same list on every node, this one included, or without itself.
  for (const char* list : {seeds, "127.0.0.1:7002,127.0.0.1:7003"}) {
    auto outcome = Parse({"--cluster", "127.0.0.1:7001", "--seeds", list, "--bootstrap-expect", "3",
                          "--cluster-secret-file", secret.c_str()});
    ASSERT_TRUE(std::holds_alternative<NodeConfig>(outcome)) << list;
    EXPECT_EQ(std::get<NodeConfig>(outcome).bootstrap_expect, 3u);
    EXPECT_EQ(SeededNodeCount(std::get<NodeConfig>(outcome)), 3u);
    EXPECT_TRUE(AmongInitialNodes(std::get<NodeConfig>(outcome)));
  }
  // Fewer than the seeds name (unsafe: docs/cluster.md), more (never met), no seeds, port 0.
  for (std::vector<const char*> args : std::vector<std::vector<const char*>>{
           {"--cluster", "127.0.0.1:7001", "--seeds", seeds, "--bootstrap-expect", "2"},
           {"--cluster", "127.0.0.1:7001", "--seeds", seeds, "--bootstrap-expect", "4"},
           {"--cluster", "127.0.0.1:7001", "--bootstrap-expect", "1"},
           {"--cluster", "127.0.0.1:0", "--seeds", seeds, "--bootstrap-expect", "3"}}) {
    if (args.size() > 2 && std::string(args[2]) == "--seeds") {
      args.push_back("--cluster-secret-file");
      args.push_back(secret.c_str());
    }
    const std::string refusal = Refusal(args);
    EXPECT_NE(refusal.find("--bootstrap-expect"), std::string::npos) << refusal;
  }
  // A node outside a list of N (added later, same configuration): accepted, never a founder.
  auto later = Parse({"--cluster", "127.0.0.1:7004", "--seeds", seeds, "--bootstrap-expect", "3",
                      "--cluster-secret-file", secret.c_str()});
  ASSERT_TRUE(std::holds_alternative<NodeConfig>(later));
  EXPECT_FALSE(AmongInitialNodes(std::get<NodeConfig>(later)));
  auto initial = Parse({"--cluster", "127.0.0.1:7001", "--seeds", "127.0.0.1:7002,127.0.0.1:7003", "--bootstrap-expect",
                        "3", "--cluster-secret-file", secret.c_str()});
  ASSERT_TRUE(std::holds_alternative<NodeConfig>(initial));
  EXPECT_TRUE(AmongInitialNodes(std::get<NodeConfig>(initial)));
  // The node found in the list under its advertised name.
  auto named =
      Parse({"--cluster", "0.0.0.0:7001", "--advertise-cluster", "localhost:7001", "--seeds",
             "localhost:7001,127.0.0.1:7002", "--bootstrap-expect", "2", "--cluster-secret-file", secret.c_str()});
  EXPECT_TRUE(std::holds_alternative<NodeConfig>(named));
}

TEST(ConfigAddressesTest, TomlKeysAreNamedLikeTheFlags) {
  const std::string secret = SecretFile();
  const std::string path = ::testing::TempDir() + "estuary_config_addresses_test.toml";
  std::ofstream(path) << "cluster = \"0.0.0.0:7001\"\n"
                         "advertise-cluster = \"127.0.0.1:7001\"\n"
                         "advertise-mqtt = \"127.0.0.1:1883\"\n"
                         "advertise-amqp = \"127.0.0.1:5672\"\n"
                         "seeds = [\"127.0.0.1:7001\", \"127.0.0.1:7002\"]\n"
                         "bootstrap-expect = 2\n"
                         "cluster-secret-file = \""
                      << secret << "\"\n";
  auto outcome = Parse({"--config", path.c_str()});
  std::remove(path.c_str());
  ASSERT_TRUE(std::holds_alternative<NodeConfig>(outcome));
  const NodeConfig& config = std::get<NodeConfig>(outcome);
  EXPECT_EQ(config.advertise_cluster, "127.0.0.1:7001");
  EXPECT_EQ(config.advertise_mqtt, "127.0.0.1:1883");
  EXPECT_EQ(config.advertise_amqp, "127.0.0.1:5672");
  EXPECT_EQ(config.bootstrap_expect, 2u);
}

}  // namespace
}  // namespace estuary::server
