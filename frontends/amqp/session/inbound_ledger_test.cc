#include "frontends/amqp/session/inbound_ledger.h"

#include <gtest/gtest.h>

#include <map>

namespace estuary::amqp {
namespace {

TEST(InboundLedgerTest, AReattachRecoversTheKeptTagsOfItsName) {  // §2.6.13
  InboundLedger ledger;
  auto record = ledger.Attach("c", "link", {});
  record->tags["t"] = InboundOutcome{InboundOutcome::Kind::kAccepted, {}, {}};
  ledger.Detach(record, record->generation, /*closed=*/false);
  EXPECT_EQ(ledger.suspended(), 1u);
  auto again = ledger.Attach("c", "link", {});
  EXPECT_EQ(again, record);
  EXPECT_EQ(ledger.suspended(), 0u);
  EXPECT_EQ(ledger.Kept("c", "link"), 1u);
  EXPECT_EQ(ledger.Kept("c/l", "ink"), 0u) << "the container-id's length splits the key";
}

TEST(InboundLedgerTest, ADetachWithNothingKeptOrACloseForgetsTheLink) {  // §2.6.6
  InboundLedger ledger;
  auto empty = ledger.Attach("c", "empty", {});
  ledger.Detach(empty, empty->generation, false);
  auto closed = ledger.Attach("c", "closed", {});
  closed->tags["t"] = {};
  ledger.Detach(closed, closed->generation, true);
  EXPECT_EQ(ledger.links(), 0u);
}

TEST(InboundLedgerTest, AStaleDetachOfAReattachedLinkIsIgnored) {
  InboundLedger ledger;
  auto record = ledger.Attach("c", "l", {});
  const uint64_t first = record->generation;
  record->tags["t"] = {};
  ledger.Attach("c", "l", {});  // the newest attach holds it (another connection)
  ledger.Detach(record, first, false);
  EXPECT_TRUE(record->attached) << "the older link's detach does not suspend the newer one";
  ledger.Detach(record, record->generation, false);
  EXPECT_EQ(ledger.suspended(), 1u);
}

TEST(InboundLedgerTest, TheOldestSuspendedLinksGoPastTheBound) {
  InboundLedger ledger(16, 2);
  for (const char* name : {"a", "b", "c"}) {
    auto record = ledger.Attach("c", name, {});
    record->tags["t"] = {};
    ledger.Detach(record, record->generation, false);
  }
  EXPECT_EQ(ledger.suspended(), 2u);
  EXPECT_EQ(ledger.forgotten_links(), 1u);
  EXPECT_EQ(ledger.Kept("c", "a"), 0u);
  EXPECT_EQ(ledger.Kept("c", "c"), 1u);
}

}  // namespace
}  // namespace estuary::amqp

namespace estuary::amqp {
namespace {

// With a data dir (docs/storage.md, `a` keys): decided outcomes are written,
// settled ones deleted, and a restart reads them back as suspended links.
TEST(InboundLedgerTest, DecidedOutcomesAreWrittenAndReadBack) {
  std::map<std::string, std::string> store;
  InboundLedger::Persistence persistence{[&](std::string key, std::string value) { store[key] = value; },
                                         [&](std::string key) { store.erase(key); }};
  InboundLedger ledger;
  ledger.set_persistence(persistence);
  auto record = ledger.Attach("c", "link", {});
  ledger.Keep(*record, "pending", {});
  EXPECT_TRUE(store.empty()) << "an outcome not yet decided is not written";
  ledger.Keep(*record, "t1", {InboundOutcome::Kind::kAccepted, {}, {}});
  ledger.Keep(*record, "t2", {InboundOutcome::Kind::kRejected, "amqp:invalid-field", "no topic"});
  ledger.Keep(*record, "t3", {InboundOutcome::Kind::kAccepted, {}, {}});
  ledger.Drop(*record, "t3");  // the client settled it
  EXPECT_EQ(store.size(), 2u);

  InboundLedger restarted;
  for (const auto& [key, value] : store) EXPECT_TRUE(restarted.Restore(key, value));
  EXPECT_EQ(restarted.suspended(), 1u);
  EXPECT_EQ(restarted.Kept("c", "link"), 2u);
  auto again = restarted.Attach("c", "link", {});
  ASSERT_EQ(again->tags.count("t2"), 1u);
  EXPECT_EQ(again->tags["t2"].condition, "amqp:invalid-field");
  EXPECT_EQ(again->tags["t2"].description, "no topic");
  EXPECT_EQ(again->tags["t1"].kind, InboundOutcome::Kind::kAccepted);
  EXPECT_FALSE(restarted.Restore("a\x00\x00\x00\x09short", "A")) << "a key shorter than its length";
  EXPECT_FALSE(restarted.Restore(std::string("a\x00\x00\x00\x01xt", 7), "?"));
}

TEST(InboundLedgerTest, ClosingALinkDeletesItsWrittenOutcomes) {  // §2.6.6
  std::map<std::string, std::string> store;
  InboundLedger ledger;
  ledger.set_persistence({[&](std::string key, std::string value) { store[key] = value; },
                          [&](std::string key) { store.erase(key); }});
  auto record = ledger.Attach("c", "link", {});
  ledger.Keep(*record, "t1", {InboundOutcome::Kind::kAccepted, {}, {}});
  ledger.Detach(record, record->generation, /*closed=*/true);
  EXPECT_TRUE(store.empty());
}

}  // namespace
}  // namespace estuary::amqp
