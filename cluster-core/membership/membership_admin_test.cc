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

std::string ErrorOf(const io::HttpResponse& response) {
  return nlohmann::json::parse(response.body)["error"];
}

TEST_F(MembershipAdminTest, JoinNamesAMalformedEscape) {
  // Refused before as "not HOST:PORT" with the "%" kept; now the error says
  // which escape is wrong. Nothing joins either way.
  for (const char* query : {"address=127.0.0.1%3G7002", "address=127.0.0.1:70%2", "address=%-1h:1"}) {
    auto bad = ServeMembershipAdmin(membership_, "POST", std::string("/api/cluster/join?") + query);
    ASSERT_TRUE(bad) << query;
    EXPECT_EQ(bad->status, 400) << query;
    EXPECT_TRUE(ErrorOf(*bad).starts_with("join: address: malformed percent escape \"%")) << ErrorOf(*bad);
  }
  EXPECT_EQ(ErrorOf(*ServeMembershipAdmin(membership_, "POST", "/api/cluster/join?address=h%G1:80")),
            "join: address: malformed percent escape \"%G1\" at byte 1: want % and two hex digits");
  // A well-formed escape of a byte an address cannot hold is quoted in ASCII.
  EXPECT_EQ(ErrorOf(*ServeMembershipAdmin(membership_, "POST", "/api/cluster/join?address=%FF:80")),
            "join needs ?address=HOST:PORT (a node's cluster address), not '%FF:80'");
  EXPECT_TRUE(transport_.wanted().empty());
  EXPECT_EQ(membership_.members().size(), 1u);
}

TEST_F(MembershipAdminTest, JoinReadsTheQueryAsTheListingsDo) {
  // The shared splitting and decoding (io/http_query.h): names are decoded,
  // the first of a repeated key counts, "+" is a space in a query.
  auto response = ServeMembershipAdmin(membership_, "POST", "/api/cluster/join?x=1&addr%65ss=h1:1&address=h2:2");
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 202);
  EXPECT_EQ(nlohmann::json::parse(response->body)["joining"], "h1:1");
  EXPECT_EQ(transport_.wanted().count("h1:1"), 1u);
  EXPECT_EQ(transport_.wanted().count("h2:2"), 0u);
  EXPECT_EQ(ErrorOf(*ServeMembershipAdmin(membership_, "POST", "/api/cluster/join?address=h+1:1")),
            "join needs ?address=HOST:PORT (a node's cluster address), not 'h 1:1'");
}

TEST(MembershipRequestTest, ParsesWhatEachPathAsksFor) {
  using Kind = MembershipRequest::Kind;
  EXPECT_EQ(ParseMembershipRequest("GET", "/api/cluster/members?x")->kind, Kind::kMembers);
  EXPECT_EQ(ParseMembershipRequest("HEAD", "/api/cluster/members")->kind, Kind::kMembers);
  auto remove = ParseMembershipRequest("DELETE", "/api/cluster/members/65535");
  ASSERT_TRUE(remove);
  EXPECT_EQ(remove->kind, Kind::kRemove);
  EXPECT_EQ(remove->node, 65535);
  auto join = ParseMembershipRequest("POST", "/api/cluster/join?address=%5B%3A%3A1%5D:7001");
  ASSERT_TRUE(join);
  EXPECT_EQ(join->kind, Kind::kJoin);
  EXPECT_EQ(join->address, "[::1]:7001");
  EXPECT_EQ(ParseMembershipRequest("POST", "/api/cluster/leave")->kind, Kind::kLeave);
  EXPECT_EQ(ParseMembershipRequest("GET", "/api/load")->kind, Kind::kNotServed);
  EXPECT_EQ(ParseMembershipRequest("GET", "/api/cluster/membersx")->kind, Kind::kNotServed);
}

TEST(MembershipRequestTest, RefusalsAreAnswersInPrintableJson) {
  for (const char* id : {"0", "65536", "-1", "1x", "", "%31"}) {
    auto bad = ParseMembershipRequest("DELETE", std::string("/api/cluster/members/") + id);
    ASSERT_FALSE(bad) << id;
    EXPECT_EQ(bad.error().status, 400) << id;
  }
  auto bad = ParseMembershipRequest("DELETE", "/api/cluster/members/\xff\x1b");
  ASSERT_FALSE(bad);
  EXPECT_EQ(ErrorOf(bad.error()), "bad node id '%FF%1B'");
  auto wrong = ParseMembershipRequest("PUT", "/api/cluster/leave");
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().status, 405);
  EXPECT_EQ(ErrorOf(wrong.error()), "method not allowed; use POST");
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
