// estuary-cluster as a user runs it: real estuaryd nodes on free ports.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "tools/cluster/child.h"
#include "tools/cluster/http_get.h"
#include "tools/cluster/launcher_test_support.h"

namespace estuary::launcher {
namespace {

class LauncherTest : public testing::LauncherRunTest {
 protected:
  LauncherTest() : LauncherRunTest("estuary-cluster-test") {}
};

TEST_F(LauncherTest, HelpExitsZeroAndBadFlagsExitTwo) {
  std::string output;
  EXPECT_EQ(RunToEnd({"--help"}, &output), 0);
  EXPECT_NE(output.find("start"), std::string::npos);
  EXPECT_EQ(RunToEnd({"start", "--help"}, &output), 0);
  EXPECT_NE(output.find("--nodes"), std::string::npos);
  EXPECT_EQ(RunToEnd({"start", "--no-such-flag"}), 2);
  EXPECT_EQ(RunToEnd({"start", "--storage", "floppy"}), 2);
  EXPECT_EQ(RunToEnd({}), 2);
}

TEST_F(LauncherTest, StopWithoutClusterFails) { EXPECT_EQ(RunToEnd({"stop", "--dir", dir_}), 1); }

TEST_F(LauncherTest, StartsTwoNodesAndStopsThemWithStop) {
  auto launcher = Run({"start", "--nodes", "2", "--storage", "memory", "--dir", dir_, "--", "--shards", "1"});
  auto ready = launcher->WaitForLine("estuary-cluster ready ", Clock::now() + std::chrono::seconds(60));
  ASSERT_TRUE(ready) << launcher->output();
  EXPECT_EQ(WordValue(*ready, "nodes"), "2");

  // The secret is private; the pid file names the launcher.
  struct stat secret {};
  ASSERT_EQ(::stat((dir_ + "/cluster.secret").c_str(), &secret), 0);
  EXPECT_EQ(secret.st_mode & 0777, 0600u);
  EXPECT_GT(secret.st_size, 0);
  std::ifstream pid_file(dir_ + "/cluster.pid");
  int pid = 0;
  pid_file >> pid;
  EXPECT_EQ(pid, launcher->pid());

  // Every node's ready line was printed, and each node answers /healthz.
  std::vector<std::string> admins;
  std::istringstream lines(launcher->output());
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("estuaryd ready ", 0) == 0) admins.push_back(WordValue(line, "admin"));
  }
  ASSERT_EQ(admins.size(), 2u) << launcher->output();
  for (const auto& admin : admins) {
    const auto [host, port] = SplitAddress(admin);
    auto reply = HttpGet(host, port, "/healthz", std::chrono::seconds(5));
    ASSERT_TRUE(reply) << admin;
    EXPECT_EQ(reply->status, 200);
  }

  EXPECT_EQ(RunToEnd({"stop", "--dir", dir_}), 0);
  EXPECT_EQ(launcher->WaitExit(Clock::now() + std::chrono::seconds(30)), 0);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/cluster.pid"));
  // The nodes are gone: their admin ports refuse.
  for (const auto& admin : admins) {
    const auto [host, port] = SplitAddress(admin);
    EXPECT_FALSE(HttpGet(host, port, "/healthz", std::chrono::seconds(2))) << admin;
  }
}

TEST_F(LauncherTest, SigtermStopsTheClusterAndADeadNodeIsReported) {
  auto launcher = Run({"start", "--nodes", "2", "--storage", "memory", "--dir", dir_, "--", "--shards", "1"});
  ASSERT_TRUE(launcher->WaitForLine("estuary-cluster ready ", Clock::now() + std::chrono::seconds(60)))
      << launcher->output();
  std::string node_two;
  std::istringstream lines(launcher->output());
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("2 ", 0) == 0) node_two = line;  // the table row of node 2: "2     PID ..."
  }
  std::istringstream row(node_two);
  int id = 0;
  int pid = 0;
  row >> id >> pid;
  ASSERT_GT(pid, 0) << launcher->output();
  ::kill(pid, SIGKILL);
  // The launcher reports it (on stderr, which goes to its log).
  const std::string log = dir_ + "/launcher-0.log";
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  bool reported = false;
  while (!reported && Clock::now() < deadline) {
    std::ifstream in(log);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    reported = text.find("node 2 (pid " + std::to_string(pid) + ") exited with status 137") != std::string::npos;
    if (!reported) launcher->WaitForLine(std::string(1, '\0'), Clock::now() + std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(reported);
  launcher->Signal(SIGTERM);
  EXPECT_EQ(launcher->WaitExit(Clock::now() + std::chrono::seconds(30)), 0);
}

}  // namespace
}  // namespace estuary::launcher
