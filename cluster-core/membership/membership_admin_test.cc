#include "cluster-core/membership/membership_admin.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cluster-core/membership/memory_transport.h"
#include "io/sim/sim_loop.h"

namespace estuary::cluster {
namespace {

class MembershipAdminTest : public ::testing::Test {
 protected:
  MembershipAdminTest() { membership_.Start({}); }
  io::ManualClock clock_;
  io::SimLoop loop_{clock_};
  testing::MemoryNetwork network_{loop_};
  testing::MemoryTransport transport_{network_, 1, "127.0.0.1:7001"};
  Membership membership_{loop_, transport_, {.self = 1, .cluster_address = "127.0.0.1:7001",
                                             .admin_address = "127.0.0.1:8001"}};
};

TEST_F(MembershipAdminTest, MembersAsJson) {
  auto response = ServeMembershipAdmin(membership_, "GET", "/api/cluster/members");
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->content_type, "application/json");
  auto json = nlohmann::json::parse(response->body);
  EXPECT_EQ(json["self"], 1);
  ASSERT_EQ(json["members"].size(), 1u);
  EXPECT_EQ(json["members"][0]["state"], "up");
  EXPECT_EQ(json["members"][0]["cluster_address"], "127.0.0.1:7001");
  EXPECT_EQ(json["members"][0]["admin_address"], "127.0.0.1:8001");
}

TEST_F(MembershipAdminTest, JoinValidatesTheAddressAndDecodesIt) {
  EXPECT_EQ(ServeMembershipAdmin(membership_, "POST", "/api/cluster/join")->status, 400);
  EXPECT_EQ(ServeMembershipAdmin(membership_, "POST", "/api/cluster/join?address=nope")->status, 400);
  // A byte that is not ASCII (percent-encoded) is refused, not stored and
  // not put in a JSON answer (which threw and ended estuaryd before).
  auto bad = ServeMembershipAdmin(membership_, "POST", "/api/cluster/join?address=%FF:80");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_TRUE(nlohmann::json::accept(bad->body));
  EXPECT_EQ(membership_.members().size(), 1u);
  EXPECT_EQ(ServeMembershipAdmin(membership_, "GET", "/api/cluster/join?address=h:1")->status, 405);
  auto ok = ServeMembershipAdmin(membership_, "POST", "/api/cluster/join?address=127.0.0.1%3A7002");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 202);
  EXPECT_EQ(transport_.wanted().count("127.0.0.1:7002"), 1u);
}

TEST_F(MembershipAdminTest, RemoveAnswersErrorsPlainly) {
  EXPECT_EQ(ServeMembershipAdmin(membership_, "DELETE", "/api/cluster/members/1")->status, 409);
  EXPECT_EQ(ServeMembershipAdmin(membership_, "DELETE", "/api/cluster/members/9")->status, 404);
  EXPECT_EQ(ServeMembershipAdmin(membership_, "DELETE", "/api/cluster/members/x")->status, 400);
  EXPECT_EQ(ServeMembershipAdmin(membership_, "POST", "/api/cluster/members/9")->status, 405);
}

TEST_F(MembershipAdminTest, LeaveAndUnservedPaths) {
  auto leave = ServeMembershipAdmin(membership_, "POST", "/api/cluster/leave");
  ASSERT_TRUE(leave);
  EXPECT_EQ(leave->status, 202);
  loop_.RunUntilIdle();
  EXPECT_EQ(membership_.Find(1)->state, MemberState::kLeft);
  EXPECT_FALSE(ServeMembershipAdmin(membership_, "GET", "/api/cluster/routes"));
  EXPECT_FALSE(ServeMembershipAdmin(membership_, "GET", "/api/load"));
  EXPECT_FALSE(ServeMembershipAdmin(membership_, "GET", "/api/cluster/membersx"));
}

TEST_F(MembershipAdminTest, HealthIsQuietForAMemberAndNamesALeave) {
  EXPECT_FALSE(MembershipHealth(membership_));
  membership_.Leave({});
  loop_.RunUntilIdle();
  auto health = MembershipHealth(membership_);
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  EXPECT_EQ(nlohmann::json::parse(health->body)["status"], "left");
}

// A node refused for a node-id conflict serves clients alone: /healthz says
// so (503, the reason as JSON) until a member admits it.
TEST(MembershipHealthTest, ARefusedNodeIsUnhealthyWithTheReason) {
  io::ManualClock clock;
  io::SimLoop loop{clock};
  testing::MemoryNetwork network{loop};
  struct Peer {
    testing::MemoryTransport transport;
    Membership membership;
    testing::MembershipForwarder forwarder{membership};
    Peer(testing::MemoryNetwork& network, io::Loop& loop, NodeId id, const std::string& address)
        : transport(network, id, address),
          membership(loop, transport, {.self = id, .cluster_address = address, .admin_address = "a"}) {
      transport.set_handler(&forwarder);
      transport.set_on_refused(
          [this](const std::string& at, const std::string& reason) { membership.OnLinkRefused(at, reason); });
    }
  };
  Peer one(network, loop, 1, "127.0.0.1:7001");
  Peer two(network, loop, 2, "127.0.0.1:7002");
  one.membership.Start({});
  two.membership.Start({"127.0.0.1:7001"});
  loop.AdvanceBy(1000);
  ASSERT_EQ(one.membership.Find(2)->state, MemberState::kUp);
  EXPECT_FALSE(MembershipHealth(two.membership));

  Peer impostor(network, loop, 2, "127.0.0.1:7999");
  impostor.membership.Start({"127.0.0.1:7001"});
  loop.AdvanceBy(1000);
  auto health = MembershipHealth(impostor.membership);
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  EXPECT_EQ(health->content_type, "application/json");
  auto json = nlohmann::json::parse(health->body);
  EXPECT_EQ(json["status"], "refused");
  const std::string reason = json["reason"];
  EXPECT_NE(reason.find("node id 2"), std::string::npos) << reason;
  EXPECT_NE(reason.find("already used by 127.0.0.1:7002"), std::string::npos) << reason;  // the holder
  // Still refused across its retries; the rightful node stays healthy.
  loop.AdvanceBy(10'000);
  ASSERT_TRUE(MembershipHealth(impostor.membership));
  EXPECT_EQ(nlohmann::json::parse(MembershipHealth(impostor.membership)->body)["status"], "refused");
  EXPECT_FALSE(MembershipHealth(two.membership));
  EXPECT_FALSE(MembershipHealth(one.membership));
}

}  // namespace
}  // namespace estuary::cluster
