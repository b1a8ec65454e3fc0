// estuaryctl against real estuaryd processes (two nodes on loopback, port
// 0 everywhere, in-memory storage, a cluster secret file). Skips the
// membership checks while estuaryd does not serve /api/cluster/members.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tools/cluster/child.h"
#include "tools/ctl/ctl_test_support.h"

namespace estuary::ctl {
namespace {

using launcher::Child;

class CtlProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* path = std::getenv("ESTUARY_ESTUARYD")) binary_ = path;
    if (!std::filesystem::exists(binary_)) GTEST_SKIP() << "no estuaryd at " << binary_;
    char pattern[] = "/tmp/estuaryctl-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    std::ofstream(dir_ + "/secret") << "ctl-test-secret\n";
  }
  void TearDown() override {
    for (auto& node : nodes_) {
      node->Signal(SIGTERM);
      node->WaitExit(launcher::Clock::now() + std::chrono::seconds(10));
    }
    nodes_.clear();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  // Starts node `id` (seeded with `seeds`); returns its ready line's words.
  std::string StartNode(int id, const std::string& seeds) {
    std::vector<std::string> argv = {binary_, "--node-id", std::to_string(id),
                                     "--mqtt", "127.0.0.1:0", "--amqp", "127.0.0.1:0",
                                     "--admin", "127.0.0.1:0", "--cluster", "127.0.0.1:0",
                                     "--storage", "memory", "--cluster-secret-file", dir_ + "/secret"};
    if (!seeds.empty()) argv.insert(argv.end(), {"--seeds", seeds});
    std::string error;
    auto child = Child::Spawn(fmt::format("node{}", id), argv, dir_ + fmt::format("/node{}.log", id), &error);
    if (!child) return "";
    auto line = child->WaitForLine("estuaryd ready", launcher::Clock::now() + std::chrono::seconds(15));
    nodes_.push_back(std::move(child));
    return line.value_or("");
  }
  // Polls `estuaryctl --json members` until `done(json)` or a deadline.
  bool WaitMembers(const std::string& admin, const std::function<bool(const nlohmann::json&)>& done) {
    return WaitUntil(
        [&] {
          auto members = Ctl({"--admin", admin, "--json", "members"});
          return members.status == 0 && done(nlohmann::json::parse(members.out));
        },
        std::chrono::seconds(15), std::chrono::milliseconds(50));
  }

  std::string binary_ = ESTUARY_ESTUARYD_BINARY;
  std::string dir_;
  std::vector<std::unique_ptr<Child>> nodes_;
};

int CountInState(const nlohmann::json& body, const std::string& state) {
  int count = 0;
  for (const auto& member : body["members"]) count += member["state"] == state;
  return count;
}

TEST_F(CtlProcessTest, LoadMembersJoinAndRemoveOnRealNodes) {
  const std::string first = StartNode(1, "");
  ASSERT_FALSE(first.empty()) << "estuaryd did not start; see " << dir_;
  const std::string admin1 = launcher::WordValue(first, "admin");
  const std::string cluster1 = launcher::WordValue(first, "cluster");

  auto load = Ctl({"--admin", admin1, "load"});
  ASSERT_EQ(load.status, 0) << load.err;
  EXPECT_NE(load.out.find("node: 1"), std::string::npos) << load.out;

  auto members = Ctl({"--admin", admin1, "members"});
  ASSERT_EQ(members.status, 0) << members.err;

  const std::string second = StartNode(2, cluster1);
  ASSERT_FALSE(second.empty());
  const std::string admin2 = launcher::WordValue(second, "admin");
  EXPECT_TRUE(WaitMembers(admin1, [](const nlohmann::json& body) { return CountInState(body, "up") == 2; }));
  EXPECT_TRUE(WaitMembers(admin2, [](const nlohmann::json& body) { return CountInState(body, "up") == 2; }));

  auto remove = Ctl({"--admin", admin1, "remove", "2"});
  ASSERT_EQ(remove.status, 0) << remove.err;
  EXPECT_TRUE(WaitMembers(admin1, [](const nlohmann::json& body) { return CountInState(body, "left") == 1; }));
  EXPECT_TRUE(WaitMembers(admin2, [](const nlohmann::json& body) { return CountInState(body, "left") >= 1; }));

  // Deliberate rejoin from the removed node's side.
  auto join = Ctl({"--admin", admin2, "join", cluster1});
  ASSERT_EQ(join.status, 0) << join.err;
  EXPECT_TRUE(WaitMembers(admin1, [](const nlohmann::json& body) { return CountInState(body, "up") == 2; }));
}

}  // namespace
}  // namespace estuary::ctl
