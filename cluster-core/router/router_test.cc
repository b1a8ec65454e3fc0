#include "cluster-core/router/router.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace estuary::core {
namespace {

TEST(RouterTest, ReportsRouteUpdatesOnlyForFirstAndLastLocalSubscriber) {
  Router router(0);
  Session a("a"), b("b");
  SubscriptionOptions options;
  auto first = router.AddLocal("x/+", {}, {&a, &options});
  ASSERT_TRUE(first.has_value());
  EXPECT_TRUE(first->add);
  EXPECT_EQ(first->filter, "x/+");
  EXPECT_FALSE(router.AddLocal("x/+", {}, {&b, &options}).has_value());
  EXPECT_FALSE(router.AddLocal("x/+", {}, {&a, &options}).has_value());  // already there
  EXPECT_FALSE(router.RemoveLocal("x/+", {}, &a).has_value());
  auto last = router.RemoveLocal("x/+", {}, &b);
  ASSERT_TRUE(last.has_value());
  EXPECT_FALSE(last->add);
  EXPECT_FALSE(router.RemoveLocal("x/+", {}, &b).has_value());
}

TEST(RouterTest, SeparatesLocalDeliveriesFromRemoteDestinations) {
  Router router(0);
  Session a("a");
  SubscriptionOptions options;
  router.AddLocal("t/#", {}, {&a, &options});
  router.ApplyRemote({true, "t/+", {}, 2});
  router.ApplyRemote({true, "t/1", {}, 2});
  router.ApplyRemote({true, "#", {}, 3});
  router.ApplyRemote({true, "other", {}, 4});
  MatchResult match;
  router.Match("t/1", match);
  ASSERT_EQ(match.local.size(), 1u);
  EXPECT_EQ(match.local[0].session, &a);
  std::sort(match.remote.begin(), match.remote.end());
  EXPECT_EQ(match.remote, (std::vector<Destination>{2, 3}));  // once per destination
}

TEST(RouterTest, IgnoresItsOwnUpdatesAndForgetsDestinations) {
  Router router(1);
  router.ApplyRemote({true, "t", {}, 1});
  router.ApplyRemote({true, "t", {}, 2});
  router.ApplyRemote({true, "t", SharedKey("g", "t"), 2});
  MatchResult match;
  router.Match("t", match);
  EXPECT_EQ(match.remote, (std::vector<Destination>{2}));
  EXPECT_EQ(match.remote_shared.size(), 1u);
  router.ForgetDestination(2);
  match.Clear();
  router.Match("t", match);
  EXPECT_TRUE(match.remote.empty());
  EXPECT_EQ(router.remote_routes(), 0u);
}

TEST(RouterTest, SharedGroupsCollectMembersUnderOneKey) {
  Router router(0);
  Session a("a"), b("b");
  SubscriptionOptions options;
  const std::string key = SharedKey("g", "jobs/#");
  EXPECT_TRUE(router.AddLocal("jobs/#", key, {&a, &options}).has_value());
  EXPECT_FALSE(router.AddLocal("jobs/#", key, {&b, &options}).has_value());
  MatchResult match;
  router.Match("jobs/1", match);
  ASSERT_EQ(match.local_shared.size(), 1u);
  EXPECT_EQ(match.local_shared[0]->members.size(), 2u);
  EXPECT_TRUE(match.local.empty());
  EXPECT_FALSE(router.RemoveLocal("jobs/#", key, &a).has_value());
  EXPECT_TRUE(router.RemoveLocal("jobs/#", key, &b).has_value());
  EXPECT_EQ(router.FindSharedGroup(key), nullptr);
}

TEST(RouterTest, LocalRoutesListsEveryRouteForReplay) {
  Router router(0);
  Session a("a");
  SubscriptionOptions options;
  router.AddLocal("a", {}, {&a, &options});
  router.AddLocal("b", SharedKey("g", "b"), {&a, &options});
  EXPECT_EQ(router.LocalRoutes().size(), 2u);
}

TEST(RouterTest, NodeDestinationsNeverCollideWithShardIds) {
  EXPECT_FALSE(IsNodeDestination(65535));
  EXPECT_TRUE(IsNodeDestination(NodeDestination(0)));
  EXPECT_EQ(NodeOfDestination(NodeDestination(65535)), 65535);
  Router router(0);
  router.ApplyRemote({true, "a/+", {}, 1});                    // shard 1
  router.ApplyRemote({true, "a/#", {}, NodeDestination(1)});   // node 1
  router.ApplyRemote({true, "a/#", SharedKey("g", "a/#"), NodeDestination(2)});
  MatchResult match;
  router.Match("a/b", match);
  std::sort(match.remote.begin(), match.remote.end());
  EXPECT_EQ(match.remote, (std::vector<Destination>{1, NodeDestination(1)}));
  ASSERT_EQ(match.remote_shared.size(), 1u);
  EXPECT_EQ(match.remote_shared[0]->destination, NodeDestination(2));
  EXPECT_EQ(router.RoutesOf(NodeDestination(1)).size(), 1u);
  router.ForgetDestination(NodeDestination(1));
  match.Clear();
  router.Match("a/b", match);
  EXPECT_EQ(match.remote, (std::vector<Destination>{1}));
}

}  // namespace
}  // namespace estuary::core
