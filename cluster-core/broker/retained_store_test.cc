#include "cluster-core/broker/retained_store.h"

#include <gtest/gtest.h>

#include <set>

namespace estuary::core {
namespace {

MessagePtr Retained(std::string topic, std::string payload) {
  auto message = std::make_shared<Message>();
  message->topic = std::move(topic);
  message->payload = MakePayload(std::move(payload));
  message->retain = true;
  return message;
}

std::set<std::string> Topics(const RetainedStore& store, std::string_view filter) {
  std::set<std::string> topics;
  store.Match(filter, [&](const MessagePtr& m) { topics.insert(m->topic); });
  return topics;
}

TEST(RetainedStoreTest, MatchesExactAndWildcardFilters) {
  RetainedStore store;
  for (const char* topic : {"a", "a/b", "a/b/c", "ab", "b/x", "$SYS/up"}) store.Apply(Retained(topic, "v"));
  EXPECT_EQ(Topics(store, "a/b"), (std::set<std::string>{"a/b"}));
  EXPECT_EQ(Topics(store, "a/#"), (std::set<std::string>{"a", "a/b", "a/b/c"}));
  EXPECT_EQ(Topics(store, "a/+"), (std::set<std::string>{"a/b"}));
  EXPECT_EQ(Topics(store, "+/x"), (std::set<std::string>{"b/x"}));
  EXPECT_EQ(Topics(store, "#").count("$SYS/up"), 0u);  // [MQTT-4.7.2-1]
  EXPECT_EQ(Topics(store, "$SYS/#"), (std::set<std::string>{"$SYS/up"}));
}

TEST(RetainedStoreTest, EmptyPayloadClearsAndLatestWins) {
  RetainedStore store;
  store.Apply(Retained("t", "1"));
  store.Apply(Retained("t", "2"));
  std::string seen;
  store.Match("t", [&](const MessagePtr& m) { seen = *m->payload; });
  EXPECT_EQ(seen, "2");
  store.Apply(Retained("t", ""));
  EXPECT_EQ(store.size(), 0u);
}

TEST(RetainedStoreTest, ExpiresByWallClock) {
  RetainedStore store;
  auto message = std::make_shared<Message>(*Retained("t", "v"));
  message->properties.expiry_at_ms = 1000;
  store.Apply(message);
  store.Apply(Retained("forever", "v"));
  EXPECT_EQ(store.ExpireBefore(999), 0u);
  EXPECT_EQ(store.ExpireBefore(1000), 1u);
  EXPECT_EQ(store.size(), 1u);
}

}  // namespace
}  // namespace estuary::core
