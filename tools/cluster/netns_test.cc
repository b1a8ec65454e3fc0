// estuary-cluster start --netns (issue 24 point 2): nodes as separate hosts,
// each in a network namespace with its own address, reached from this
// machine over the bridge; everything the run made is gone after stop, or
// after `stop` on a crashed run's directory. Root only: elsewhere the tests
// that need namespaces are skipped with the reason, and the one that checks
// the refusal runs.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "conformance/support/raw_client.h"
#include "tools/cluster/child.h"
#include "tools/cluster/http_get.h"
#include "tools/cluster/launcher_test_support.h"
#include "tools/cluster/netns.h"

namespace estuary::launcher {
namespace {

using estuary::testing::RawClient;

using testing::kLauncher;

// What a shell command printed (stdout), for `ip netns list` and `ip link`.
std::string Output(const std::string& command) {
  std::string text;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return text;
  char buffer[512];
  while (::fgets(buffer, sizeof buffer, pipe) != nullptr) text += buffer;
  ::pclose(pipe);
  return text;
}

bool NetworkShows(const std::string& tag) {
  return Output("ip netns list").find(tag) != std::string::npos ||
         Output("ip -o link show").find(tag) != std::string::npos;
}

// Polls `done` every 50 ms until it holds or `timeout` passes.
bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!done()) {
    if (Clock::now() >= deadline) return false;
    ::poll(nullptr, 0, 50);
  }
  return true;
}

// The value of `key` on every `estuaryd ready` line in `output`.
std::vector<std::string> ReadyWords(const std::string& output, const std::string& key) {
  std::vector<std::string> values;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("estuaryd ready ", 0) == 0) values.push_back(WordValue(line, key));
  }
  return values;
}

class NetnsTest : public testing::LauncherRunTest {
 protected:
  NetnsTest() : LauncherRunTest("estuary-netns-test") {}
  std::string LauncherLog(int run) const { return Output("cat " + dir_ + "/launcher-" + std::to_string(run) + ".log"); }
};

#define SKIP_WITHOUT_NETNS()                                                        \
  if (const std::string why = HostNetwork::Unavailable(); !why.empty()) {           \
    GTEST_SKIP() << "skipped: " << why << " (CI runs this test as root)";           \
  }

// Every node lists the three nodes up, at their namespace addresses.
void ExpectMembersAtNamespaceAddresses(const std::vector<std::string>& admins,
                                       const std::vector<std::string>& clusters) {
  const std::set<std::string> expected(clusters.begin(), clusters.end());
  for (const auto& admin : admins) {
    const auto [host, port] = SplitAddress(admin);
    ASSERT_TRUE(host.rfind("10.80.", 0) == 0) << admin;
    auto reply = HttpGet(host, port, "/api/cluster/members", std::chrono::seconds(5));
    ASSERT_TRUE(reply && reply->status == 200) << admin;
    auto json = nlohmann::json::parse(reply->body, nullptr, false);
    ASSERT_TRUE(json.is_object() && json["members"].is_array()) << reply->body;
    std::set<std::string> seen;
    for (const auto& member : json["members"]) {
      EXPECT_EQ(member.value("state", ""), "up") << reply->body;
      const std::string address = member.value("cluster_address", "");
      EXPECT_EQ(address.rfind("127.", 0), std::string::npos) << reply->body;
      seen.insert(address);
    }
    EXPECT_EQ(seen, expected) << "as seen by " << admin << ": " << reply->body;
  }
}

// A QoS 1 publish on `from` reaches a subscriber on `to`; published again
// until the subscription's route has reached `from` (or the deadline).
void ExpectPublishCrosses(const std::string& from, const std::string& to) {
  const auto [to_host, to_port] = SplitAddress(to);
  const auto [from_host, from_port] = SplitAddress(from);
  RawClient subscriber;
  ASSERT_TRUE(subscriber.Open(to_host, to_port)) << to;
  ASSERT_TRUE(subscriber.Connect("netns-subscriber"));
  mqtt::SubscribePacket subscribe;
  subscribe.packet_id = 1;
  subscribe.subscriptions.push_back({"netns/hosts", mqtt::SubscribeOptions{1}});
  subscriber.Send(subscribe);
  ASSERT_TRUE(subscriber.ReceiveAs<mqtt::SubackPacket>());

  RawClient publisher;
  ASSERT_TRUE(publisher.Open(from_host, from_port)) << from;
  ASSERT_TRUE(publisher.Connect("netns-publisher"));
  uint16_t packet_id = 1;
  const bool crossed = WaitUntil(
      [&] {
        mqtt::PublishPacket publish;
        publish.topic = "netns/hosts";
        publish.payload = "across the bridge";
        publish.qos = 1;
        publish.packet_id = packet_id++;
        publisher.Send(publish);
        if (!publisher.ReceiveAs<mqtt::AckPacket>()) return false;
        auto got = subscriber.ReceiveAs<mqtt::PublishPacket>(std::chrono::milliseconds(200));
        return got && got->payload == "across the bridge";
      },
      std::chrono::seconds(20));
  EXPECT_TRUE(crossed) << "no publish on " << from << " reached the subscriber on " << to;
}

TEST_F(NetnsTest, ThreeNodesAsHostsFormOneClusterAndStopRemovesTheirNetwork) {
  SKIP_WITHOUT_NETNS();
  auto launcher = Run({"start", "--netns", "--nodes", "3", "--storage", "memory", "--dir", dir_, "--", "--shards", "1"});
  auto ready = launcher->WaitForLine("estuary-cluster ready ", Clock::now() + std::chrono::seconds(90));
  ASSERT_TRUE(ready) << launcher->output() << LauncherLog(0);
  const std::string tag = WordValue(*ready, "netns");
  ASSERT_EQ(tag.size(), 7u) << *ready;
  EXPECT_TRUE(NetworkShows(tag));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/netns.list"));

  // --netns implies --admin-token: the admin ports are off loopback.
  std::ifstream token_file(dir_ + "/admin.token");
  std::string token;
  std::getline(token_file, token);
  ASSERT_FALSE(token.empty());
  SetBearerToken(token);
  const auto admins = ReadyWords(launcher->output(), "admin");
  const auto clusters = ReadyWords(launcher->output(), "cluster");
  const auto mqtts = ReadyWords(launcher->output(), "mqtt");
  ASSERT_EQ(admins.size(), 3u) << launcher->output();
  ExpectMembersAtNamespaceAddresses(admins, clusters);
  // Separate hosts: one port for all, told apart by address.
  EXPECT_EQ(SplitAddress(mqtts[0]).second, SplitAddress(mqtts[2]).second);
  ExpectPublishCrosses(mqtts[1], mqtts[0]);

  EXPECT_EQ(RunToEnd({"stop", "--dir", dir_}), 0);
  EXPECT_EQ(launcher->WaitExit(Clock::now() + std::chrono::seconds(30)), 0);
  EXPECT_FALSE(NetworkShows(tag)) << Output("ip netns list") << Output("ip -o link show");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/netns.list"));
}

TEST_F(NetnsTest, StopRemovesWhatACrashedLauncherLeft) {
  SKIP_WITHOUT_NETNS();
  auto launcher = Run({"start", "--netns", "--nodes", "1", "--storage", "memory", "--dir", dir_, "--", "--shards", "1"});
  auto ready = launcher->WaitForLine("estuary-cluster ready ", Clock::now() + std::chrono::seconds(60));
  ASSERT_TRUE(ready) << launcher->output() << LauncherLog(0);
  const std::string tag = WordValue(*ready, "netns");
  ASSERT_FALSE(tag.empty()) << *ready;
  launcher->Signal(SIGKILL);
  EXPECT_EQ(launcher->WaitExit(Clock::now() + std::chrono::seconds(30)), 128 + SIGKILL);
  ASSERT_TRUE(NetworkShows(tag));  // a crash leaves it behind ...

  EXPECT_EQ(RunToEnd({"stop", "--dir", dir_}), 0) << LauncherLog(1);  // ... and `stop` removes it
  EXPECT_FALSE(NetworkShows(tag)) << Output("ip netns list") << Output("ip -o link show");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/netns.list"));
}

// A node that cannot start (a flag estuaryd refuses): the launcher exits 1
// and removes the namespaces it had made for the run.
TEST_F(NetnsTest, AFailedStartLeavesNothing) {
  SKIP_WITHOUT_NETNS();
  EXPECT_EQ(RunToEnd({"start", "--netns", "--nodes", "2", "--storage", "memory", "--ready-timeout", "20000", "--dir",
                      dir_, "--", "--no-such-estuaryd-flag"}),
            1);
  const std::string log = LauncherLog(0);
  const auto removed = log.find("bridge est");
  ASSERT_NE(removed, std::string::npos) << log;
  const std::string tag = log.substr(removed + 7, 7);
  EXPECT_FALSE(NetworkShows(tag)) << tag << "\n" << Output("ip netns list") << Output("ip -o link show");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/netns.list"));
}

// The balancer pair as two more hosts: a client of the active balancer's
// namespace address reaches the nodes behind it.
TEST_F(NetnsTest, BalancersAsHostsForwardClientsToTheNodes) {
  SKIP_WITHOUT_NETNS();
  auto launcher = Run({"start", "--netns", "--balancers", "--nodes", "2", "--storage", "memory", "--dir", dir_, "--",
                       "--shards", "1"});
  auto ready = launcher->WaitForLine("estuary-cluster ready ", Clock::now() + std::chrono::seconds(90));
  ASSERT_TRUE(ready) << launcher->output() << LauncherLog(0);
  const std::string tag = WordValue(*ready, "netns");
  std::string active;
  std::istringstream lines(launcher->output());
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("estuary-lb ready role=active ", 0) == 0) active = WordValue(line, "mqtt");
  }
  ASSERT_EQ(active.rfind("10.80.", 0), 0u) << launcher->output();
  EXPECT_TRUE(NetworkShows(tag + "lb1") && NetworkShows(tag + "lb2"));
  ExpectPublishCrosses(active, active);

  EXPECT_EQ(RunToEnd({"stop", "--dir", dir_}), 0);
  EXPECT_EQ(launcher->WaitExit(Clock::now() + std::chrono::seconds(30)), 0);
  EXPECT_FALSE(NetworkShows(tag)) << Output("ip netns list") << Output("ip -o link show");
}

// Two runs at once: each its own tag and its own subnet (the first run's
// bridge route makes its /24 taken for the second).
TEST_F(NetnsTest, TwoRunsAtOnceTakeSeparateTagsAndSubnets) {
  SKIP_WITHOUT_NETNS();
  const std::string second_dir = dir_ + "/second";
  auto first = Run({"start", "--netns", "--nodes", "1", "--storage", "memory", "--dir", dir_ + "/first"});
  auto second = Run({"start", "--netns", "--nodes", "1", "--storage", "memory", "--dir", second_dir});
  const auto deadline = Clock::now() + std::chrono::seconds(90);
  auto first_ready = first->WaitForLine("estuary-cluster ready ", deadline);
  auto second_ready = second->WaitForLine("estuary-cluster ready ", deadline);
  ASSERT_TRUE(first_ready && second_ready) << first->output() << second->output();
  EXPECT_NE(WordValue(*first_ready, "netns"), WordValue(*second_ready, "netns"));
  const auto first_admin = ReadyWords(first->output(), "admin");
  const auto second_admin = ReadyWords(second->output(), "admin");
  ASSERT_EQ(first_admin.size(), 1u);
  ASSERT_EQ(second_admin.size(), 1u);
  const std::string first_host = SplitAddress(first_admin[0]).first;
  const std::string second_host = SplitAddress(second_admin[0]).first;
  EXPECT_NE(first_host.substr(0, first_host.rfind('.')), second_host.substr(0, second_host.rfind('.')));
  first->Signal(SIGTERM);
  second->Signal(SIGTERM);
  EXPECT_EQ(first->WaitExit(Clock::now() + std::chrono::seconds(30)), 0);
  EXPECT_EQ(second->WaitExit(Clock::now() + std::chrono::seconds(30)), 0);
  EXPECT_FALSE(NetworkShows(WordValue(*first_ready, "netns")));
  EXPECT_FALSE(NetworkShows(WordValue(*second_ready, "netns")));
}

// A listed name that now belongs to another object (another inode, another
// interface index) is not ours: removal leaves it alone.
TEST_F(NetnsTest, RemovalLeavesANameThatIsNoLongerOurs) {
  SKIP_WITHOUT_NETNS();
  const std::string tag = "estt" + std::to_string(::getpid() % 1000);
  ASSERT_EQ(Output("ip netns list").find(tag), std::string::npos);
  ASSERT_EQ(std::system(("ip netns add " + tag + "n1 && ip link add " + tag + "br type bridge").c_str()), 0);
  const std::string record = dir_ + "/netns.list";
  std::ofstream(record) << "pid 1\nbridge " << tag << "br 1\nnetns " << tag << "n1 2\n";
  std::string report;
  EXPECT_TRUE(HostNetwork::RemoveRecorded(record, &report));
  EXPECT_NE(report.find("skipped netns " + tag + "n1"), std::string::npos) << report;
  EXPECT_NE(report.find("skipped bridge " + tag + "br"), std::string::npos) << report;
  EXPECT_TRUE(NetworkShows(tag + "n1"));
  EXPECT_TRUE(NetworkShows(tag + "br"));
  std::system(("ip netns del " + tag + "n1; ip link del " + tag + "br").c_str());
  EXPECT_FALSE(NetworkShows(tag));
}

// Without root --netns is refused at once (as root: run as nobody).
TEST_F(NetnsTest, WithoutRootNetnsExitsTwo) {
  std::vector<std::string> args = {kLauncher, "start", "--netns", "--dir", dir_};
  if (::geteuid() == 0) {
    if (Output("command -v setpriv").empty()) GTEST_SKIP() << "skipped: root, and no setpriv to drop it";
    args.insert(args.begin(), {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"});
    args[0] = Output("command -v setpriv");
    args[0].pop_back();  // the newline
  }
  std::string error;
  auto child = Child::Spawn("launcher", args, dir_ + "/refused.log", &error);
  ASSERT_NE(child, nullptr) << error;
  EXPECT_EQ(child->WaitExit(Clock::now() + std::chrono::seconds(30)), 2) << Output("cat " + dir_ + "/refused.log");
  EXPECT_NE(Output("cat " + dir_ + "/refused.log").find("--netns needs root"), std::string::npos);
}

}  // namespace
}  // namespace estuary::launcher
