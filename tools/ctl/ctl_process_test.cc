// estuaryctl against real estuaryd processes (two nodes on loopback, port
// 0 everywhere, in-memory storage, a cluster secret file). Skips the
// membership checks while estuaryd does not serve /api/cluster/members.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
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

// An MQTT 3.1.1 CONNECT (clean session) to `endpoint` ("host:port"), which
// claims the client id in its partition and so opens that partition. True
// on a CONNACK accepting it. The socket is closed again.
bool MqttConnect(const std::string& endpoint, const std::string& client) {
  const size_t colon = endpoint.rfind(':');
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(std::stoi(endpoint.substr(colon + 1))));
  ::inet_pton(AF_INET, endpoint.substr(0, colon).c_str(), &address.sin_addr);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  timeval timeout{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  bool accepted = false;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) {
    std::string variable = std::string("\0\4MQTT\4\2\0\x3c", 10);
    variable += static_cast<char>(client.size() >> 8);
    variable += static_cast<char>(client.size() & 0xFF);
    variable += client;
    const std::string packet = std::string("\x10") + static_cast<char>(variable.size()) + variable;
    unsigned char connack[4] = {};
    accepted = ::write(fd, packet.data(), packet.size()) == static_cast<ssize_t>(packet.size()) &&
               ::recv(fd, connack, sizeof connack, MSG_WAITALL) == 4 && connack[0] == 0x20 && connack[3] == 0;
  }
  ::close(fd);
  return accepted;
}

// issue 7 point 6 on real processes: transfer-leader moves an open
// partition's leadership to the node asked for (through a node that does
// not lead it), `partitions` shows the new leader and its pin, and a drain
// moves every leadership off the drained node.
TEST_F(CtlProcessTest, TransferLeaderAndDrainOnThreeNodes) {
  const std::string first = StartNode(1, "");
  ASSERT_FALSE(first.empty()) << "estuaryd did not start; see " << dir_;
  const std::string cluster1 = launcher::WordValue(first, "cluster");
  std::map<unsigned, std::string> admin{{1, launcher::WordValue(first, "admin")}};
  for (int id : {2, 3}) {
    const std::string line = StartNode(id, cluster1);
    ASSERT_FALSE(line.empty());
    admin[id] = launcher::WordValue(line, "admin");
  }
  ASSERT_TRUE(WaitMembers(admin[1], [](const nlohmann::json& body) { return CountInState(body, "up") == 3; }));
  ASSERT_TRUE(MqttConnect(launcher::WordValue(first, "mqtt"), "ctl-transfer")) << "CONNECT refused; see " << dir_;

  // The opened partition, once it has three voters and a leader.
  nlohmann::json row;
  auto settled = [&] {
    auto partitions = Ctl({"--admin", admin[1], "--json", "partitions"});
    if (partitions.status != 0) return false;
    for (const auto& entry : nlohmann::json::parse(partitions.out).value("open", nlohmann::json::array())) {
      if (entry.value("voters", nlohmann::json::array()).size() == 3 && entry.value("leader", 0u) != 0) {
        row = entry;
        return true;
      }
    }
    return false;
  };
  ASSERT_TRUE(WaitUntil(settled, std::chrono::seconds(20), std::chrono::milliseconds(50)));
  const unsigned partition = row["partition"];
  const unsigned leader = row["leader"];
  const unsigned target = leader == 3 ? 2 : 3;
  const unsigned asked = 6 - leader - target;  // the third node: not the leader

  auto moved = Ctl({"--admin", admin[asked], "--timeout-ms", "10000", "transfer-leader", "--partition",
                    std::to_string(partition), "--to", std::to_string(target)});
  ASSERT_EQ(moved.status, 0) << moved.err;
  EXPECT_NE(moved.out.find(fmt::format("leader {} -> {}", leader, target)), std::string::npos) << moved.out;
  std::cout << "[ figures  ] " << moved.out;
  auto view = Ctl({"--admin", admin[target], "partitions"});
  ASSERT_EQ(view.status, 0) << view.err;
  EXPECT_NE(view.out.find(fmt::format("leader  {}       {}", target, target)), std::string::npos)
      << "the new leader and its pin: " << view.out;

  auto drained = Ctl({"--admin", admin[target], "--timeout-ms", "10000", "drain"});
  ASSERT_EQ(drained.status, 0) << drained.err;
  std::cout << "[ figures  ] " << drained.out;
  auto after = Ctl({"--admin", admin[target], "--json", "partitions"});
  ASSERT_EQ(after.status, 0);
  const auto body = nlohmann::json::parse(after.out);
  EXPECT_EQ(body.value("leading", 1u), 0u);
  EXPECT_EQ(body.value("draining", nlohmann::json::array()), nlohmann::json::array({target}));
  auto load = Ctl({"--admin", admin[target], "--json", "load"});
  EXPECT_EQ(nlohmann::json::parse(load.out).value("draining", false), true);
  EXPECT_EQ(Ctl({"--admin", admin[target], "undrain"}).status, 0);
  // Undrained, the pin brings the partition back.
  EXPECT_TRUE(WaitUntil(
      [&] {
        auto partitions = Ctl({"--admin", admin[target], "--json", "partitions"});
        if (partitions.status != 0) return false;
        for (const auto& entry : nlohmann::json::parse(partitions.out).value("open", nlohmann::json::array())) {
          if (entry.value("partition", ~0u) == partition) return entry.value("leader", 0u) == target;
        }
        return false;
      },
      std::chrono::seconds(10), std::chrono::milliseconds(50)));
}


// ---- issue 25 point 6: status, clients (kick), sessions, subscriptions,
// retained, shared, top, run as the built estuaryctl binary.

// An MQTT 3.1.1 connection held open: CONNECT (clean, `username`), then
// SUBSCRIBE to `filters` at QoS 0 and `retained` published with the retain
// flag. -1 on any refusal.
int MqttOpen(const std::string& endpoint, const std::string& client, const std::string& username,
             const std::vector<std::string>& filters, const std::string& retained = {}) {
  const size_t colon = endpoint.rfind(':');
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(std::stoi(endpoint.substr(colon + 1))));
  ::inet_pton(AF_INET, endpoint.substr(0, colon).c_str(), &address.sin_addr);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  timeval timeout{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  auto string = [](const std::string& text) {
    return std::string{static_cast<char>(text.size() >> 8), static_cast<char>(text.size() & 0xFF)} + text;
  };
  auto packet = [](char type, const std::string& body) { return std::string(1, type) + static_cast<char>(body.size()) + body; };
  auto send = [fd](const std::string& bytes) {
    return ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  };
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) return ::close(fd), -1;
  const std::string connect = std::string("\0\4MQTT\4", 7) + '\x82' + std::string("\0\x3c", 2) + string(client) +
                              string(username);
  unsigned char connack[4] = {};
  if (!send(packet('\x10', connect)) || ::recv(fd, connack, 4, MSG_WAITALL) != 4 || connack[3] != 0) {
    return ::close(fd), -1;
  }
  if (!filters.empty()) {
    std::string subscribe = std::string("\0\1", 2);
    for (const auto& filter : filters) subscribe += string(filter) + '\0';
    unsigned char suback[16] = {};
    const ssize_t expected = static_cast<ssize_t>(4 + filters.size());
    if (!send(packet('\x82', subscribe)) || ::recv(fd, suback, static_cast<size_t>(expected), MSG_WAITALL) != expected) {
      return ::close(fd), -1;
    }
  }
  if (!retained.empty() && !send(packet('\x31', string(retained) + "kept"))) return ::close(fd), -1;
  return fd;
}

// True once the server closed `fd` (a read returns 0) within the deadline.
bool ServerClosed(int fd) {
  char byte = 0;
  for (int i = 0; i < 20; ++i) {  // SO_RCVTIMEO bounds each read
    const ssize_t got = ::recv(fd, &byte, 1, 0);
    if (got == 0) return true;
    if (got < 0 && errno != EAGAIN && errno != EINTR) return true;  // reset
  }
  return false;
}

class CtlObserveTest : public CtlProcessTest {
 protected:
  // Runs the built estuaryctl with `args`; its status and output.
  Outcome Binary(const std::vector<std::string>& args) {
    std::string command = ESTUARY_CTL_BINARY;
    for (const auto& arg : args) command += " '" + arg + "'";
    command += " >" + dir_ + "/ctl.out 2>" + dir_ + "/ctl.err </dev/null";
    Outcome outcome;
    const int status = std::system(command.c_str());
    outcome.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    auto read = [](const std::string& path) {
      std::ifstream in(path);
      return std::string(std::istreambuf_iterator<char>(in), {});
    };
    outcome.out = read(dir_ + "/ctl.out");
    outcome.err = read(dir_ + "/ctl.err");
    return outcome;
  }
};

TEST_F(CtlObserveTest, StatusClientsKickAndTheListsOnThreeNodes) {
  const std::string first = StartNode(1, "");
  ASSERT_FALSE(first.empty()) << "estuaryd did not start; see " << dir_;
  const std::string cluster1 = launcher::WordValue(first, "cluster");
  const std::string admin = launcher::WordValue(first, "admin");
  for (int id : {2, 3}) ASSERT_FALSE(StartNode(id, cluster1).empty());
  ASSERT_TRUE(WaitMembers(admin, [](const nlohmann::json& body) { return CountInState(body, "up") == 3; }));
  ASSERT_TRUE(WaitUntil([&] { return Binary({"--admin", admin, "status"}).out.find("3 of 3 nodes up") != std::string::npos; },
                        std::chrono::seconds(15), std::chrono::milliseconds(100)))
      << Binary({"--admin", admin, "status"}).out;

  const std::string mqtt = launcher::WordValue(first, "mqtt");
  const int fd = MqttOpen(mqtt, "ctl-observe", "alice", {"ctl/observe/#", "$share/g1/ctl/shared"}, "ctl/retained/one");
  ASSERT_GE(fd, 0) << "CONNECT/SUBSCRIBE refused; see " << dir_;

  auto status = Binary({"--admin", admin, "status"});
  ASSERT_EQ(status.status, 0) << status.err;
  std::cout << "[ status   ]\n" << status.out;
  EXPECT_NE(status.out.find("NODE"), std::string::npos);
  EXPECT_NE(status.out.find("partitions:"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("alarms:"), std::string::npos);
  auto status_json = Binary({"--admin", admin, "--json", "status"});
  ASSERT_EQ(status_json.status, 0);
  EXPECT_EQ(nlohmann::json::parse(status_json.out)["nodes"].size(), 3u);

  auto clients = Binary({"--admin", admin, "--json", "clients", "--username", "ali"});
  ASSERT_EQ(clients.status, 0) << clients.err;
  const auto listed = nlohmann::json::parse(clients.out);
  ASSERT_EQ(listed["clients"].size(), 1u) << clients.out;
  EXPECT_EQ(listed["clients"][0]["client_id"], "ctl-observe");
  EXPECT_EQ(listed["clients"][0]["protocol"], "mqtt3.1.1");
  EXPECT_EQ(nlohmann::json::parse(Binary({"--admin", admin, "--json", "clients", "--client-id", "nobody"}).out)["total"], 0);
  auto table = Binary({"--admin", admin, "clients"});
  EXPECT_NE(table.out.find("ctl-observe"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("alice"), std::string::npos) << table.out;

  EXPECT_NE(Binary({"--admin", admin, "sessions", "--client-id", "ctl-"}).out.find("ctl-observe"), std::string::npos);
  auto subscriptions = Binary({"--admin", admin, "subscriptions", "--client-id", "ctl-observe"});
  EXPECT_NE(subscriptions.out.find("ctl/observe/#"), std::string::npos) << subscriptions.out;
  auto shared = Binary({"--admin", admin, "--json", "shared"});
  ASSERT_EQ(shared.status, 0) << shared.err;
  EXPECT_EQ(nlohmann::json::parse(shared.out)["groups"][0]["group"], "g1") << shared.out;
  EXPECT_TRUE(WaitUntil(
      [&] { return Binary({"--admin", admin, "retained", "--topic", "ctl/"}).out.find("ctl/retained/one") != std::string::npos; },
      std::chrono::seconds(10), std::chrono::milliseconds(50)));

  auto top = Binary({"--admin", admin, "top", "--iterations", "2", "--interval-ms", "200"});
  ASSERT_EQ(top.status, 0) << top.err;
  size_t screens = 0;
  for (size_t at = top.out.find("cluster:"); at != std::string::npos; at = top.out.find("cluster:", at + 1)) ++screens;
  EXPECT_EQ(screens, 2u) << top.out;
  auto top_json = Binary({"--admin", admin, "--json", "top", "--iterations", "2", "--interval-ms", "200"});
  EXPECT_EQ(std::count(top_json.out.begin(), top_json.out.end(), '\n'), 2) << top_json.out;

  auto kick = Binary({"--admin", admin, "clients", "kick", "ctl-observe"});
  ASSERT_EQ(kick.status, 0) << kick.err;
  EXPECT_NE(kick.out.find("disconnected 'ctl-observe'"), std::string::npos) << kick.out;
  EXPECT_TRUE(ServerClosed(fd)) << "the kicked client's socket stayed open";
  ::close(fd);
  auto again = Binary({"--admin", admin, "clients", "kick", "ctl-observe"});
  EXPECT_EQ(again.status, 1);
  EXPECT_NE(again.err.find("no client 'ctl-observe'"), std::string::npos) << again.err;

  // A node gone: status says so in its table and its alarms.
  nodes_[2]->Signal(SIGKILL);
  EXPECT_TRUE(WaitUntil([&] { return Binary({"--admin", admin, "status"}).out.find("2 of 3 nodes up") != std::string::npos; },
                        std::chrono::seconds(10), std::chrono::milliseconds(100)));
  auto down = Binary({"--admin", admin, "status"});
  std::cout << "[ status   ] after kill -9 of node 3\n" << down.out;
  EXPECT_NE(down.out.find("node 3"), std::string::npos) << down.out;
  nodes_[2]->WaitExit(launcher::Clock::now() + std::chrono::seconds(5));
  nodes_.pop_back();
}

TEST_F(CtlObserveTest, ErrorsSayWhatToDo) {
  // Nothing listens on a port just bound and closed.
  const int probe = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  socklen_t length = sizeof address;
  ::bind(probe, reinterpret_cast<sockaddr*>(&address), sizeof address);
  ::getsockname(probe, reinterpret_cast<sockaddr*>(&address), &length);
  const std::string closed = fmt::format("127.0.0.1:{}", ntohs(address.sin_port));
  ::close(probe);
  for (const char* command : {"status", "clients", "sessions", "subscriptions", "retained", "top"}) {
    auto outcome = Binary({"--admin", closed, "--timeout-ms", "1000", command});
    EXPECT_EQ(outcome.status, 1) << command;
    EXPECT_NE(outcome.err.find("cannot reach the admin API at " + closed), std::string::npos) << outcome.err;
    EXPECT_NE(outcome.err.find("--admin HOST:PORT"), std::string::npos) << outcome.err;
  }
  EXPECT_EQ(Binary({"clients", "--limit", "0"}).status, 2);
}
}  // namespace
}  // namespace estuary::ctl
