// estuaryctl against an in-test admin server that serves
// ServeMembershipAdmin over Memberships linked by in-memory transports (on
// a real UvLoop, so timers run in real time), and the built binary's exit
// statuses.
#include "tools/ctl/ctl.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <cstdio>
#include <memory>

#include "cluster-core/membership/membership_admin.h"
#include "cluster-core/membership/memory_transport.h"
#include "io/uv/http_server.h"
#include "io/uv/test_util.h"
#include "tools/ctl/ctl_leadership.h"
#include "tools/ctl/ctl_text.h"
#include "tools/ctl/ctl_test_support.h"

namespace estuary::ctl {
namespace {

using cluster::Membership;
using cluster::MemberState;
using Forwarder = cluster::testing::MembershipForwarder;

struct FakeNode {
  std::unique_ptr<cluster::testing::MemoryTransport> transport;
  std::unique_ptr<Membership> membership;
  std::unique_ptr<Forwarder> forwarder;
};

class CtlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    loop_.RunSync([this](io::UvLoop& loop) {
      network_ = std::make_unique<cluster::testing::MemoryNetwork>(loop);
      for (cluster::NodeId id : {1, 2}) {
        auto& node = nodes_[id];
        const std::string address = fmt::format("10.0.0.{}:7000", id);
        node.transport = std::make_unique<cluster::testing::MemoryTransport>(*network_, id, address);
        cluster::MembershipConfig config{.self = id, .cluster_address = address,
                                         .admin_address = fmt::format("10.0.0.{}:8080", id)};
        node.membership = std::make_unique<Membership>(loop, *node.transport, config);
        node.forwarder = std::make_unique<Forwarder>(*node.membership);
        node.transport->set_handler(node.forwarder.get());
        node.membership->Start({});  // two separate one-node clusters until `join`
      }
      auto server = io::HttpServer::Start(loop, {"127.0.0.1", 0}, [this](const std::string& method,
                                                                          const std::string& path) {
        auto response = cluster::ServeMembershipAdmin(*nodes_[1].membership, method, path);
        return response ? *response : io::HttpResponse{404, "text/plain", "not found\n"};
      });
      ASSERT_TRUE(server) << server.error();
      server_ = std::move(*server);
    });
    admin_ = fmt::format("127.0.0.1:{}", server_->port());
  }
  void TearDown() override {
    loop_.RunSync([this](io::UvLoop&) {
      server_.reset();
      nodes_.clear();
      network_.reset();
    });
  }
  MemberState StateOf(cluster::NodeId observer, cluster::NodeId member) {
    MemberState state = MemberState::kJoining;
    loop_.RunSync([&](io::UvLoop&) {
      if (auto* found = nodes_[observer].membership->Find(member)) state = found->state;
    });
    return state;
  }
  // Waits (with a deadline) until `observer` sees `member` in `state`.
  bool WaitFor(cluster::NodeId observer, cluster::NodeId member, MemberState state) {
    return WaitUntil([&] { return StateOf(observer, member) == state; }, std::chrono::seconds(10),
                     std::chrono::milliseconds(10));
  }

  io::testing::LoopThread loop_;
  std::unique_ptr<cluster::testing::MemoryNetwork> network_;
  std::map<cluster::NodeId, FakeNode> nodes_;
  std::unique_ptr<io::HttpServer> server_;
  std::string admin_;
};

TEST_F(CtlTest, MembersJoinRemoveLeave) {
  auto members = Ctl({"--admin", admin_, "members"});
  ASSERT_EQ(members.status, 0) << members.err;
  EXPECT_NE(members.out.find("NODE"), std::string::npos);
  EXPECT_NE(members.out.find("1*"), std::string::npos);
  EXPECT_NE(members.out.find("10.0.0.1:7000"), std::string::npos);
  EXPECT_NE(members.out.find("10.0.0.1:8080"), std::string::npos);

  auto join = Ctl({"--admin", admin_, "join", "10.0.0.2:7000"});
  ASSERT_EQ(join.status, 0) << join.err;
  EXPECT_NE(join.out.find("10.0.0.2:7000"), std::string::npos);
  ASSERT_TRUE(WaitFor(1, 2, MemberState::kUp));
  ASSERT_TRUE(WaitFor(2, 1, MemberState::kUp));

  auto json = Ctl({"--admin", admin_, "--json", "members"});
  ASSERT_EQ(json.status, 0);
  auto body = nlohmann::json::parse(json.out);
  ASSERT_EQ(body["members"].size(), 2u);
  EXPECT_EQ(body["members"][1]["node"], 2);
  EXPECT_EQ(body["members"][1]["state"], "up");

  auto self = Ctl({"--admin", admin_, "remove", "1"});
  EXPECT_EQ(self.status, 1);
  EXPECT_NE(self.err.find("cannot remove this node itself"), std::string::npos) << self.err;
  auto unknown = Ctl({"--admin", admin_, "remove", "9"});
  EXPECT_EQ(unknown.status, 1);
  EXPECT_NE(unknown.err.find("unknown node 9"), std::string::npos) << unknown.err;

  auto remove = Ctl({"--admin", admin_, "remove", "2"});
  ASSERT_EQ(remove.status, 0) << remove.err;
  EXPECT_EQ(remove.out, "node 2 removed\n");
  EXPECT_TRUE(WaitFor(1, 2, MemberState::kLeft));
  EXPECT_TRUE(WaitFor(2, 2, MemberState::kLeft));  // it learnt of its removal
  EXPECT_NE(Ctl({"--admin", admin_, "members"}).out.find("left (removed)"), std::string::npos);

  auto leave = Ctl({"--admin", admin_, "leave"});
  ASSERT_EQ(leave.status, 0) << leave.err;
  EXPECT_TRUE(WaitFor(1, 1, MemberState::kLeft));
}

TEST_F(CtlTest, UnservedPathsAndUnreachableNodesAreOneLineErrors) {
  auto routes = Ctl({"--admin", admin_, "routes"});
  EXPECT_EQ(routes.status, 1);
  EXPECT_NE(routes.err.find("does not serve /api/cluster/routes"), std::string::npos) << routes.err;

  uint16_t closed_port = 0;
  loop_.RunSync([&](io::UvLoop& loop) {
    auto probe = io::HttpServer::Start(loop, {"127.0.0.1", 0}, [](const std::string&, const std::string&) {
      return io::HttpResponse{};
    });
    closed_port = (*probe)->port();
  });  // the server is gone again: nothing listens on that port now
  auto down = Ctl({"--admin", fmt::format("127.0.0.1:{}", closed_port), "members"});
  EXPECT_EQ(down.status, 1);
  EXPECT_NE(down.err.find("cannot reach the admin API"), std::string::npos) << down.err;
  EXPECT_EQ(std::count(down.err.begin(), down.err.end(), '\n'), 1);
}

TEST(CtlUsage, HelpAndBadUsage) {
  EXPECT_EQ(Ctl({"--help"}).status, 0);
  EXPECT_NE(Ctl({"--help"}).out.find("members"), std::string::npos);
  EXPECT_EQ(Ctl({"join", "--help"}).status, 0);
  EXPECT_EQ(Ctl({}).status, 2);
  EXPECT_EQ(Ctl({"frobnicate"}).status, 2);
  EXPECT_EQ(Ctl({"remove", "abc"}).status, 2);
  EXPECT_EQ(Ctl({"join"}).status, 2);
  EXPECT_EQ(Ctl({"join", "nohostport"}).status, 2);
  EXPECT_EQ(Ctl({"--admin", "x", "members"}).status, 2);
  auto bad = Ctl({"--bogus", "members"});
  EXPECT_EQ(bad.status, 2);
  EXPECT_EQ(bad.err.rfind("estuaryctl: error: ", 0), 0u) << bad.err;
}

TEST(CtlFormat, DurationsMembersAndGenericJson) {
  EXPECT_EQ(FormatDuration(850), "850ms");
  EXPECT_EQ(FormatDuration(42'000), "42s");
  EXPECT_EQ(FormatDuration(187'000), "3m07s");
  EXPECT_EQ(FormatDuration(7'500'000), "2h05m");
  auto members = FormatMembers(nlohmann::json::parse(
      R"({"self":1,"members":[{"node":1,"state":"up","cluster_address":"a:1","admin_address":"b:2",
          "incarnation":3,"epoch":0,"for_ms":61000}]})"));
  EXPECT_NE(members.find("1*    up     a:1"), std::string::npos) << members;
  EXPECT_NE(members.find("1m01s"), std::string::npos) << members;
  auto generic = FormatGeneric(nlohmann::json::parse(R"({"score":0.5,"routes":[{"filter":"a/#","nodes":[1,2]}]})"));
  EXPECT_NE(generic.find("score: 0.5"), std::string::npos) << generic;
  EXPECT_NE(generic.find("FILTER"), std::string::npos) << generic;
  EXPECT_NE(generic.find("a/#"), std::string::npos) << generic;
}

TEST(CtlFormat, PartitionsShowReplicasRoleCommitAndLag) {
  auto text = FormatPartitions(nlohmann::json::parse(
      R"({"node":2,"partitions":4096,"placement_epoch":3,"open":[
          {"partition":17,"opened_with":[1,2,3],"placed":[2,3,1],"voters":[1,2,3],"role":"leader",
           "leader":2,"term":4,"commit":40,"applied":40,"lag":{"1":0,"3":5}},
          {"partition":900,"opened_with":[1,3,4],"placed":[1,3,4]}]})"));
  EXPECT_NE(text.find("node 2: 2 of 4096 partitions open (placement epoch 3)"), std::string::npos) << text;
  EXPECT_NE(text.find("2,3,1"), std::string::npos) << text;
  EXPECT_NE(text.find("leader"), std::string::npos) << text;
  EXPECT_NE(text.find("1:0 3:5"), std::string::npos) << "followers' lag: " << text;
  // A partition the node holds no replica of: dashes, not zeros.
  const std::string row = text.substr(text.find("900"));
  EXPECT_NE(row.find("1,3,4"), std::string::npos) << row;
  EXPECT_NE(row.find(" -"), std::string::npos) << row;
}

// The installed binary keeps DESIGN.md's exit contract.
TEST(CtlFormat, TablePadsEveryColumnButTheLast) {
  EXPECT_EQ(Table({"ID", "STATE", "ADDRESS"}, {{"1", "up", "127.0.0.1:7000"}, {"12", "suspect", "h:1"}}),
            "ID  STATE    ADDRESS\n"
            "1   up       127.0.0.1:7000\n"
            "12  suspect  h:1\n");
  EXPECT_EQ(Table({"A"}, {}), "A\n");
}

TEST(CtlFormat, EscapeKeepsOnlyUnreservedBytes) {
  EXPECT_EQ(Escape("az-AZ_09.~"), "az-AZ_09.~");
  EXPECT_EQ(Escape("dev+1 a/b?&=%"), "dev%2B1%20a%2Fb%3F%26%3D%25");
  EXPECT_EQ(Escape("\xe2\x82\xac"), "%E2%82%AC");
  EXPECT_EQ(Escape(std::string("a\0", 2)), "a%00");
}

TEST(CtlBinary, ExitStatuses) {
  auto run = [](const std::string& args) {
    const int status = std::system((std::string(ESTUARY_CTL_BINARY) + " " + args + " >/dev/null 2>&1").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(run("--help"), 0);
  EXPECT_EQ(run("--nope"), 2);
  EXPECT_EQ(run("--admin 127.0.0.1:1 --timeout-ms 2000 members"), 1);
}

TEST(CtlFormat, PartitionsShowThePinAndTheDrainingNodes) {
  auto text = FormatPartitions(nlohmann::json::parse(
      R"({"node":2,"partitions":64,"placement_epoch":3,"leading":1,"draining":[3],"open":[
          {"partition":17,"opened_with":[1,2,3],"placed":[1,2,3],"voters":[1,2,3],"role":"leader",
           "leader":2,"pin":2,"term":4,"commit":40,"applied":40}]})"));
  EXPECT_NE(text.find("PIN"), std::string::npos) << text;
  EXPECT_NE(text.find("leader  2       2"), std::string::npos) << text;
  EXPECT_NE(text.find("draining: nodes 3"), std::string::npos) << text;
  EXPECT_EQ(FormatTransfer(17, 1, 3, 42), "partition 17: leader 1 -> 3 (pinned there; took 42ms)\n");
  EXPECT_EQ(FormatTransfer(17, 3, 3, 0), "partition 17: node 3 leads and is now pinned there\n");
  EXPECT_EQ(FormatDrain(2, 5, 120), "node 2 is draining: leads no partition now (5 moved away in 120ms)\n");
  EXPECT_EQ(Ctl({"transfer-leader"}).status, 2) << "--partition is required";
  EXPECT_EQ(Ctl({"transfer-leader", "--partition", "1", "--to", "0"}).status, 2);
  EXPECT_EQ(Ctl({"transfer-leader", "--help"}).status, 0);
}

// transfer-leader against two fake admin servers: the first is not the
// leader and names node 2, whose admin address the member table gives;
// node 2 accepts, and its partition view shows node 3 leading after a few
// asks. Then the refusals: an error line and exit status 1.
TEST(CtlTransfer, FollowsTheLeaderAndWatchesTheMove) {
  io::testing::LoopThread loop;
  std::unique_ptr<io::HttpServer> follower, leader;
  int views = 0;
  std::string transfer_target;
  loop.RunSync([&](io::UvLoop& uv) {
    auto second = io::HttpServer::Start(uv, {"127.0.0.1", 0}, [&](const std::string& method, const std::string& path) {
      if (method == "POST" && path.starts_with("/api/cluster/partitions/transfer")) {
        transfer_target = path;
        return io::HttpResponse{202, "application/json", R"({"partition":17,"from":2,"to":3})"};
      }
      if (path == "/api/cluster/partitions") {
        const int leader_now = ++views < 3 ? 2 : 3;
        return io::HttpResponse{200, "application/json",
                                fmt::format(R"({{"node":2,"open":[{{"partition":17,"leader":{}}}]}})", leader_now)};
      }
      return io::HttpResponse{404, "text/plain", "not found\n"};
    });
    ASSERT_TRUE(second);
    leader = std::move(*second);
    const uint16_t leader_port = leader->port();
    auto first = io::HttpServer::Start(uv, {"127.0.0.1", 0}, [leader_port](const std::string& method,
                                                                          const std::string& path) {
      if (method == "POST" && path.find("partition=99") != std::string::npos) {
        return io::HttpResponse{409, "application/json", R"({"error":"node 4 is not a voter of partition 99"})"};
      }
      if (method == "POST") {
        return io::HttpResponse{421, "application/json", R"({"error":"node 2 leads partition 17","leader":2})"};
      }
      if (path == "/api/cluster/members") {
        return io::HttpResponse{
            200, "application/json",
            fmt::format(R"({{"self":1,"members":[{{"node":1,"admin_address":"127.0.0.1:1"}},)"
                        R"({{"node":2,"admin_address":"127.0.0.1:{}"}}]}})",
                        leader_port)};
      }
      return io::HttpResponse{404, "text/plain", "not found\n"};
    });
    ASSERT_TRUE(first);
    follower = std::move(*first);
  });
  const std::string admin = fmt::format("127.0.0.1:{}", follower->port());
  auto moved = Ctl({"--admin", admin, "transfer-leader", "--partition", "17", "--to", "3"});
  EXPECT_EQ(moved.status, 0) << moved.err;
  EXPECT_EQ(moved.out.rfind("partition 17: leader 2 -> 3 (pinned there; took ", 0), 0u) << moved.out;
  EXPECT_EQ(transfer_target, "/api/cluster/partitions/transfer?partition=17&to=3");
  EXPECT_GE(views, 3);

  auto refused = Ctl({"--admin", admin, "transfer-leader", "--partition", "99", "--to", "4"});
  EXPECT_EQ(refused.status, 1);
  EXPECT_EQ(refused.err, "estuaryctl: node 4 is not a voter of partition 99 (HTTP 409)\n");
  loop.RunSync([&](io::UvLoop&) {
    follower.reset();
    leader.reset();
  });
}

}  // namespace
}  // namespace estuary::ctl
