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

}  // namespace
}  // namespace estuary::cluster
