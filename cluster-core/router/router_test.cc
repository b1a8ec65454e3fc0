#include "cluster-core/router/router.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace estuary::core {
namespace {

TEST(RouterTest, ReportsRouteUpdatesOnlyForFirstAndLastLocalSubscriber) {
  Router router(0);
  Session a("a", 1), b("b", 2);
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
  Session a("a", 1);
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
  Session a("a", 1), b("b", 2);
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
  Session a("a", 1);
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

// A comparable form of a MatchResult: what each of its lists names, sorted.
struct Named {
  std::vector<std::pair<const Session*, const SubscriptionOptions*>> local;
  std::vector<std::string> local_shared;
  std::vector<Destination> remote;
  std::vector<std::pair<std::string, Destination>> remote_shared;
  friend bool operator==(const Named&, const Named&) = default;
};

Named Name(const MatchResult& match) {
  Named named;
  for (const SubscriberRef& ref : match.local) named.local.emplace_back(ref.session, ref.options);
  for (const SharedGroup* group : match.local_shared) named.local_shared.push_back(group->key);
  named.remote = match.remote;
  for (const RemoteShared* shared : match.remote_shared) named.remote_shared.emplace_back(shared->key, shared->destination);
  std::sort(named.local.begin(), named.local.end());
  std::sort(named.local_shared.begin(), named.local_shared.end());
  std::sort(named.remote.begin(), named.remote.end());
  std::sort(named.remote_shared.begin(), named.remote_shared.end());
  return named;
}

Named Uncached(const Router& router, const std::string& topic) {
  MatchResult match;
  router.Match(topic, match);
  return Name(match);
}

Named Cached(const Router& router, const std::string& topic) {
  MatchResult match;
  router.MatchCached(topic, match);
  return Name(match);
}

TEST(RouterMatchCacheTest, EveryKindOfRouteChangeIsSeenAtOnce) {
  Router router(0);
  Session a("a", 1), b("b", 2);
  SubscriptionOptions qos0, qos1;
  qos1.max_qos = QoS::kAtLeastOnce;
  const std::string topic = "t/1";
  EXPECT_EQ(Cached(router, topic), Named{});
  router.AddLocal("t/+", {}, {&a, &qos0});
  EXPECT_EQ(Cached(router, topic), Uncached(router, topic));
  ASSERT_EQ(Cached(router, topic).local.size(), 1u);
  // A resubscription (its options are updated in place): no route update,
  // and the cached match still equals a fresh one.
  EXPECT_FALSE(router.AddLocal("t/+", {}, {&a, &qos1}).has_value());
  EXPECT_EQ(Cached(router, topic), Uncached(router, topic));
  router.AddLocal("t/#", SharedKey("g", "t/#"), {&b, &qos0});
  EXPECT_EQ(Cached(router, topic), Uncached(router, topic));
  router.ApplyRemote({true, "t/1", {}, NodeDestination(2)});
  router.ApplyRemote({true, "#", SharedKey("h", "#"), NodeDestination(3)});
  EXPECT_EQ(Cached(router, topic), Uncached(router, topic));
  EXPECT_EQ(Cached(router, topic).remote, (std::vector<Destination>{NodeDestination(2)}));
  router.ForgetDestination(NodeDestination(2));
  EXPECT_TRUE(Cached(router, topic).remote.empty());
  router.ApplyRemote({false, "#", SharedKey("h", "#"), NodeDestination(3)});
  EXPECT_TRUE(Cached(router, topic).remote_shared.empty());
  router.RemoveLocal("t/#", SharedKey("g", "t/#"), &b);
  EXPECT_TRUE(Cached(router, topic).local_shared.empty());
  router.RemoveLocal("t/+", {}, &a);
  EXPECT_EQ(Cached(router, topic), Named{});
}

TEST(RouterMatchCacheTest, AppendsLikeMatchAndKeepsRemoteDestinationsUnique) {
  Router router(0);
  Session a("a", 1);
  SubscriptionOptions options;
  router.AddLocal("x", {}, {&a, &options});
  router.ApplyRemote({true, "x", {}, 7});
  router.ApplyRemote({true, "+", {}, 7});
  MatchResult match;
  router.MatchCached("x", match);
  router.MatchCached("x", match);  // a hit, appended to what is there
  EXPECT_EQ(match.local.size(), 2u);
  EXPECT_EQ(match.remote, (std::vector<Destination>{7}));
}

TEST(RouterMatchCacheTest, LargeFanOutIsMatchedCorrectlyWithoutBeingKept) {
  Router router(0);
  std::vector<std::unique_ptr<Session>> sessions;
  SubscriptionOptions options;
  for (size_t i = 0; i < Router::kMaxCachedRefs + 10; ++i) {
    sessions.push_back(std::make_unique<Session>("s" + std::to_string(i), i + 1));
    router.AddLocal("big", {}, {sessions.back().get(), &options});
  }
  for (int round = 0; round < 2; ++round) {
    EXPECT_EQ(Cached(router, "big").local.size(), Router::kMaxCachedRefs + 10);
  }
  router.RemoveLocal("big", {}, sessions.front().get());
  EXPECT_EQ(Cached(router, "big").local.size(), Router::kMaxCachedRefs + 9);
}

// Random route changes among a few filters, sessions and destinations,
// with more topics than the cache has slots: after every change, every
// topic's cached match equals a fresh one.
TEST(RouterMatchCacheTest, RandomRouteChangesNeverServeAStaleMatch) {
  const std::vector<std::string> filters = {"#", "a/#", "a/+", "a/b", "+/b", "a/+/c", "+/+/+", "b"};
  std::vector<std::string> topics;
  for (const char* first : {"a", "b", "c"}) {
    for (const char* second : {"", "/b", "/x", "/b/c", "/y/c", "/b/d"}) topics.push_back(std::string(first) + second);
  }
  for (int i = 0; i < 2 * int(Router::kMatchCacheSlots); ++i) topics.push_back("n/" + std::to_string(i));
  Router router(0);
  std::vector<std::unique_ptr<Session>> sessions;
  for (int i = 0; i < 4; ++i) sessions.push_back(std::make_unique<Session>("s" + std::to_string(i), i + 1));
  SubscriptionOptions options[2];
  options[1].max_qos = QoS::kExactlyOnce;
  std::mt19937 random(20261130);  // fixed: a failure replays
  auto pick = [&random](size_t n) { return size_t(random() % n); };
  for (int step = 0; step < 3000; ++step) {
    const std::string& filter = filters[pick(filters.size())];
    Session* session = sessions[pick(sessions.size())].get();
    const std::string shared = pick(3) == 0 ? SharedKey("g" + std::to_string(pick(2)), filter) : std::string();
    const Destination destination = pick(2) == 0 ? Destination(1 + pick(3)) : NodeDestination(uint16_t(1 + pick(3)));
    switch (pick(5)) {
      case 0:
      case 1:
        router.AddLocal(filter, shared, {session, &options[pick(2)]});
        break;
      case 2:
        router.RemoveLocal(filter, shared, session);
        break;
      case 3:
        router.ApplyRemote({pick(3) != 0, filter, shared, destination});
        break;
      case 4:
        if (pick(10) == 0) router.ForgetDestination(destination);
        break;
    }
    for (int probe = 0; probe < 4; ++probe) {
      const std::string& topic = topics[pick(topics.size())];
      ASSERT_EQ(Cached(router, topic), Uncached(router, topic)) << "step " << step << " topic " << topic;
    }
  }
}

}  // namespace
}  // namespace estuary::core
