// When the stubs of moved sessions end (cluster/moved_stubs.h; the route
// gap of a move, docs/partitions.md).
#include "cluster-core/cluster/moved_stubs.h"

#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "io/sim/sim_loop.h"

namespace estuary::cluster {
namespace {

class MovedStubsTest : public ::testing::Test {
 protected:
  MovedStubsTest() : loop_(clock_) {}

  MovedStubs::Hooks Hooks() {
    MovedStubs::Hooks hooks;
    hooks.read_owner = [this](const std::string& client_id, std::function<void(MovedStubs::OwnerAnswer)> done) {
      ++reads_[client_id];
      pending_reads_.emplace_back(client_id, std::move(done));
    };
    hooks.routes_seen = [this](NodeId node, const std::vector<std::string>& filters) {
      for (const auto& filter : filters) {
        if (!routes_.contains({node, filter})) return false;
      }
      return true;
    };
    hooks.end = [this](uint16_t shard, const std::string& client_id, uint64_t stub) {
      ended_.emplace_back(shard, client_id, stub);
    };
    return hooks;
  }
  // Answers every outstanding owner read with `answer`.
  void Answer(MovedStubs::OwnerAnswer answer) {
    auto reads = std::move(pending_reads_);
    pending_reads_.clear();
    for (auto& [client, done] : reads) done(answer);
  }

  io::ManualClock clock_;
  io::SimLoop loop_;
  std::map<std::string, int> reads_;
  std::vector<std::pair<std::string, std::function<void(MovedStubs::OwnerAnswer)>>> pending_reads_;
  std::set<std::pair<NodeId, std::string>> routes_;
  std::vector<std::tuple<uint16_t, std::string, uint64_t>> ended_;
};

TEST_F(MovedStubsTest, AStubEndsAGraceAfterTheNewOwnersRoutesForAllItsFiltersAreSeen) {
  MovedStubs stubs(loop_, /*self=*/1, Hooks());
  stubs.Opened(3, "c", 7, {"a/#", "b"});
  ASSERT_EQ(reads_["c"], 1);
  Answer(std::optional<NodeId>{2});
  routes_.insert({2, "a/#"});
  loop_.AdvanceBy(5000);
  EXPECT_TRUE(ended_.empty()) << "one filter's route is not seen yet";
  routes_.insert({3, "b"});  // another node's route for it is not the owner's
  loop_.AdvanceBy(5000);
  EXPECT_TRUE(ended_.empty());
  routes_.insert({2, "b"});
  loop_.AdvanceBy(1000);
  EXPECT_TRUE(ended_.empty()) << "the grace for publishers' nodes that apply routes later";
  loop_.AdvanceBy(1200);
  ASSERT_EQ(ended_.size(), 1u);
  EXPECT_EQ(ended_[0], std::make_tuple(uint16_t{3}, std::string("c"), uint64_t{7}));
  EXPECT_EQ(stubs.open(), 0u);
  EXPECT_EQ(stubs.counters().ended_routes_seen, 1u);
  loop_.AdvanceBy(60000);
  EXPECT_EQ(ended_.size(), 1u) << "once";
}

TEST_F(MovedStubsTest, RoutesThatGoAgainInTheGraceRestartIt) {
  MovedStubs stubs(loop_, 1, Hooks());
  stubs.Opened(0, "c", 1, {"t"});
  Answer(std::optional<NodeId>{2});
  routes_.insert({2, "t"});
  loop_.AdvanceBy(1500);
  routes_.clear();  // the new owner's session unsubscribed, or moved on
  loop_.AdvanceBy(200);
  routes_.insert({2, "t"});
  loop_.AdvanceBy(1500);
  EXPECT_TRUE(ended_.empty());
  loop_.AdvanceBy(700);
  EXPECT_EQ(ended_.size(), 1u);
}

TEST_F(MovedStubsTest, NoOwnerOrThisNodeEndsItAtOnce) {
  MovedStubs stubs(loop_, 1, Hooks());
  stubs.Opened(0, "ended", 1, {"t"});
  Answer(std::optional<NodeId>{});  // the session ended
  EXPECT_EQ(ended_.size(), 1u);
  stubs.Opened(0, "back", 2, {"t"});
  Answer(std::optional<NodeId>{1});  // its client came back here
  EXPECT_EQ(ended_.size(), 2u);
  EXPECT_EQ(stubs.counters().ended_no_owner, 2u);
}

TEST_F(MovedStubsTest, AnUnreadOwnerIsAskedAgainAndTheStubEndsAtTheLatestAfterMaxMs) {
  MovedStubs::Timing timing;
  MovedStubs stubs(loop_, 1, Hooks(), timing);
  stubs.Opened(0, "c", 1, {"t"});
  Answer(std::nullopt);  // the partition was electing
  loop_.AdvanceBy(timing.check_ms);
  EXPECT_EQ(reads_["c"], 2);
  Answer(std::optional<NodeId>{2});
  // The owner's routes never come: asked again each reread_ms (the
  // session may have moved on), ended after max_ms.
  loop_.AdvanceBy(timing.reread_ms + timing.check_ms);
  EXPECT_EQ(reads_["c"], 3);
  Answer(std::optional<NodeId>{2});
  loop_.AdvanceBy(timing.max_ms - 2 * timing.check_ms - timing.reread_ms - 1);
  EXPECT_TRUE(ended_.empty());
  loop_.AdvanceBy(timing.check_ms);
  EXPECT_EQ(ended_.size(), 1u);
  EXPECT_EQ(stubs.counters().ended_timeout, 1u);
}

TEST_F(MovedStubsTest, ANewerStubOfTheIdReplacesTheOlderAndALateAnswerForTheOlderIsIgnored) {
  MovedStubs stubs(loop_, 1, Hooks());
  stubs.Opened(0, "c", 1, {"t"});
  auto older = std::move(pending_reads_);
  pending_reads_.clear();
  stubs.Opened(0, "c", 2, {"u"});
  older[0].second(std::optional<NodeId>{});  // "no owner", for the older stub
  EXPECT_TRUE(ended_.empty());
  EXPECT_EQ(stubs.open(), 1u);
  Answer(std::optional<NodeId>{4});
  routes_.insert({4, "u"});
  loop_.AdvanceBy(3000);
  ASSERT_EQ(ended_.size(), 1u);
  EXPECT_EQ(std::get<2>(ended_[0]), 2u);
}

}  // namespace
}  // namespace estuary::cluster
