#include "frontends/amqp/session/inbound_ledger.h"

#include <gtest/gtest.h>

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
