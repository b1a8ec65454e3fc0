#include "cluster-core/broker/retained_store.h"

#include <gtest/gtest.h>

#include <set>

#include "model/hlc.h"

namespace estuary::core {
namespace {

MessagePtr Retained(std::string topic, std::string payload) {
  auto message = std::make_shared<Message>();
  message->topic = std::move(topic);
  message->payload = MakePayload(std::move(payload));
  message->retain = true;
  return message;
}

// A retained message stamped as node `node` would at wall time `ms`.
MessagePtr Stamped(std::string topic, std::string payload, uint16_t node, uint64_t ms) {
  auto message = std::make_shared<Message>(*Retained(std::move(topic), std::move(payload)));
  message->id = MessageId{node, HybridLogicalClock::Pack(ms, 0), 1};
  return message;
}

std::string PayloadAt(const RetainedStore& store, std::string_view topic) {
  std::string seen = "(none)";
  store.Match(topic, [&](const MessagePtr& m) { seen = *m->payload; });
  return seen;
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

// Issue 6 leftovers: a retained value cleared while a node was down came
// back with that node's copy (recovered from its disk, or in its snapshot).
TEST(RetainedStoreTest, AClearedTopicStaysClearedWhenAnOlderValueArrivesLater) {
  RetainedStore store;
  store.Apply(Stamped("t", "old", 2, 1'000));
  EXPECT_TRUE(store.Apply(Stamped("t", "", 1, 2'000)));  // cleared on node 1
  EXPECT_EQ(store.size(), 0u);
  EXPECT_EQ(store.tombstones(), 1u);
  EXPECT_FALSE(store.Apply(Stamped("t", "old", 2, 1'000)));  // node 2's stale copy
  EXPECT_EQ(PayloadAt(store, "t"), "(none)");
  std::set<std::string> wildcard = Topics(store, "#");
  EXPECT_TRUE(wildcard.empty());
  // The tombstone travels in snapshots.
  size_t entries = 0;
  store.ForEach([&](const MessagePtr& m) { entries += m->topic == "t" && m->PayloadSize() == 0; });
  EXPECT_EQ(entries, 1u);
  // A newer value replaces the tombstone.
  EXPECT_TRUE(store.Apply(Stamped("t", "new", 2, 3'000)));
  EXPECT_EQ(PayloadAt(store, "t"), "new");
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(store.tombstones(), 0u);
}

TEST(RetainedStoreTest, NewestIdWinsWhateverTheOrderOfArrival) {
  RetainedStore store;
  EXPECT_TRUE(store.Apply(Stamped("t", "b", 1, 2'000)));
  EXPECT_FALSE(store.Apply(Stamped("t", "a", 1, 1'000)));
  EXPECT_FALSE(store.Apply(Stamped("t", "", 2, 1'500)));  // an older clear does not clear
  EXPECT_EQ(PayloadAt(store, "t"), "b");
  EXPECT_TRUE(store.Apply(Stamped("t", "c", 2, 2'000)));  // same time: the higher node id
  EXPECT_EQ(PayloadAt(store, "t"), "c");
  EXPECT_TRUE(store.Apply(Stamped("t", "c", 2, 2'000)));  // the same message again: no change
  EXPECT_EQ(store.size(), 1u);
}

TEST(RetainedStoreTest, UnstampedMessagesAlwaysApplyAndLeaveNoTombstone) {
  RetainedStore store;
  store.Apply(Stamped("t", "v", 1, 5'000));
  EXPECT_TRUE(store.Apply(Retained("t", "")));
  EXPECT_EQ(store.size(), 0u);
  EXPECT_EQ(store.tombstones(), 0u);
  EXPECT_TRUE(store.Apply(Stamped("t", "w", 1, 1'000)));
  EXPECT_EQ(PayloadAt(store, "t"), "w");
}

TEST(RetainedStoreTest, TombstonesAreDroppedAfterTheirTtl) {
  RetainedStore store;
  store.set_tombstone_ttl_ms(10'000);
  store.Apply(Stamped("t", "", 1, 100'000));
  store.Apply(Stamped("u", "v", 1, 100'000));
  EXPECT_EQ(store.ExpireBefore(109'999), 0u);
  EXPECT_EQ(store.tombstones(), 1u);
  EXPECT_EQ(store.ExpireBefore(110'001), 0u);  // tombstones are not counted as expired messages
  EXPECT_EQ(store.tombstones(), 0u);
  EXPECT_EQ(store.size(), 1u);
  EXPECT_TRUE(store.Apply(Stamped("t", "late", 2, 50'000)));  // past the TTL, an old value is back
}

}  // namespace
}  // namespace estuary::core
