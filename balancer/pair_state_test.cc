#include "balancer/pair_state.h"

#include <gtest/gtest.h>

namespace estuary::balancer {
namespace {

Heartbeat From(const PairState& state) {
  return {state.epoch(), state.role(), state.priority(), state.id(), {}};
}

TEST(PairStateTest, HeartbeatRoundTrip) {
  Heartbeat heartbeat{7, Role::kActive, 1, "127.0.0.1:7946", {{"127.0.0.1:8080", true, false, 3.5}}};
  auto decoded = DecodeHeartbeat(EncodeHeartbeat(heartbeat));
  ASSERT_TRUE(decoded) << decoded.error();
  EXPECT_EQ(*decoded, heartbeat);
  EXPECT_FALSE(DecodeHeartbeat("{}"));
  EXPECT_FALSE(DecodeHeartbeat(R"({"v":1,"epoch":1,"role":"boss","id":"x"})"));
  EXPECT_FALSE(DecodeHeartbeat("\x01\x02"));
}

TEST(PairStateTest, WrongTypesInAHeartbeatAreErrorsNotExceptions) {
  EXPECT_FALSE(DecodeHeartbeat(R"({"v":"1","epoch":1,"role":"active","id":"x"})"));
  EXPECT_FALSE(DecodeHeartbeat(R"({"v":1,"epoch":-1,"role":"active","id":"x"})"));
  auto odd = DecodeHeartbeat(
      R"({"v":1,"epoch":1,"role":"active","id":"x","nodes":[{"admin":"a:1","score":null,"healthy":"yes"}]})");
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->nodes[0], (SharedNode{"a:1", false, false, 0}));
  // A node that never reported (infinite score) still encodes.
  Heartbeat unknown{1, Role::kActive, 0, "y", {{"b:1", false, false, 1.0 / 0.0}}};
  auto decoded = DecodeHeartbeat(EncodeHeartbeat(unknown));
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->nodes[0].score, -1.0);
}

TEST(PairStateTest, AnActiveAloneTakesTheRoleAfterTheStartupWait) {
  PairState a(Role::kActive, "a", {}, 0);
  EXPECT_EQ(a.role(), Role::kStandby);
  EXPECT_TRUE(a.deciding());
  EXPECT_FALSE(a.Tick(299));
  EXPECT_TRUE(a.Tick(300));
  EXPECT_EQ(a.role(), Role::kActive);
  EXPECT_EQ(a.epoch(), 1u);
}

TEST(PairStateTest, StandbyTakesOverAfterOneSecondOfSilenceWithAHigherEpoch) {
  PairState a(Role::kActive, "a", {}, 0);
  PairState b(Role::kStandby, "b", {}, 0);
  a.Tick(300);
  int64_t now = 300;
  for (; now <= 2000; now += 100) {  // heartbeats every 100 ms
    b.OnHeartbeat(From(a), now);
    a.OnHeartbeat(From(b), now);
    EXPECT_FALSE(b.Tick(now));
  }
  EXPECT_EQ(b.role(), Role::kStandby);
  EXPECT_EQ(b.epoch(), 1u);
  const int64_t last_heard = now - 100;
  // a dies: b stays standby for just under the timeout, then takes over.
  EXPECT_FALSE(b.Tick(last_heard + 999));
  EXPECT_TRUE(b.Tick(last_heard + 1000));
  EXPECT_EQ(b.role(), Role::kActive);
  EXPECT_EQ(b.epoch(), 2u);
}

TEST(PairStateTest, AReturningOldActiveStaysStandby) {
  PairState b(Role::kStandby, "b", {}, 0);
  b.Tick(1000);  // the old active is gone: b active at epoch 1
  ASSERT_EQ(b.role(), Role::kActive);
  // The old active restarts with --role active and hears b within its wait.
  PairState a(Role::kActive, "a", {}, 5000);
  EXPECT_FALSE(a.OnHeartbeat(From(b), 5100));
  EXPECT_FALSE(a.deciding());
  EXPECT_EQ(a.role(), Role::kStandby);
  EXPECT_EQ(a.epoch(), b.epoch());
  EXPECT_FALSE(a.Tick(5400));  // the start-up wait passing changes nothing
  EXPECT_FALSE(a.Tick(6000));
  EXPECT_EQ(a.role(), Role::kStandby);
  EXPECT_EQ(a.NextDeadline(6000), 100);
}

TEST(PairStateTest, TwoActivesResolveToTheHigherEpoch) {
  PairState a(Role::kActive, "a", {}, 0);
  PairState b(Role::kStandby, "b", {}, 0);
  a.Tick(300);     // a active, epoch 1
  b.Tick(1000);    // partitioned: b never heard a, active at epoch 1
  b.OnHeartbeat({1, Role::kStandby, 0, "x", {}}, 1000);
  // Heal. Equal epochs: a has priority (started as active); b steps down.
  EXPECT_FALSE(a.OnHeartbeat(From(b), 1100));
  EXPECT_TRUE(b.OnHeartbeat(From(a), 1100));
  EXPECT_EQ(a.role(), Role::kActive);
  EXPECT_EQ(b.role(), Role::kStandby);
  // A higher epoch always wins.
  EXPECT_TRUE(a.OnHeartbeat({5, Role::kActive, 0, "z", {}}, 1200));
  EXPECT_EQ(a.role(), Role::kStandby);
  EXPECT_EQ(a.epoch(), 5u);
}

TEST(PairStateTest, TwoStandbysElectOneAndOwnDatagramsAreIgnored) {
  PairState a(Role::kStandby, "a", {}, 0);
  PairState b(Role::kStandby, "b", {}, 0);
  EXPECT_FALSE(a.OnHeartbeat(From(a), 10));
  for (int64_t now = 0; now < 1000; now += 100) {
    a.OnHeartbeat(From(b), now);
    b.OnHeartbeat(From(a), now);
  }
  a.Tick(1000);
  b.Tick(1000);
  ASSERT_EQ(a.role(), Role::kActive);
  ASSERT_EQ(b.role(), Role::kActive);
  a.OnHeartbeat(From(b), 1100);
  b.OnHeartbeat(From(a), 1100);
  EXPECT_NE(a.role(), b.role());  // the larger id stays
  EXPECT_EQ(b.role(), Role::kActive);
}

// The shell ticks only at NextDeadline (balancer.cc, TickPair): that is
// enough when a tick before the deadline never changes the role, one at the
// deadline does, and heartbeats only move the deadline later.
TEST(PairStateTest, TickingOnlyAtTheNextDeadlineTakesOverOnTime) {
  PairState active(Role::kActive, "a", {}, 0);
  EXPECT_EQ(active.NextDeadline(0), 300);  // the start-up wait
  EXPECT_FALSE(active.Tick(299));
  EXPECT_TRUE(active.Tick(300));

  PairState standby(Role::kStandby, "b", {}, 0);
  int64_t due = 0 + standby.NextDeadline(0);
  for (int64_t now = 100; now <= 2000; now += 100) {  // heartbeats every 100 ms
    standby.OnHeartbeat(From(active), now);
    const int64_t next = now + standby.NextDeadline(now);
    EXPECT_GE(next, due);
    due = next;
  }
  EXPECT_EQ(due, 3000);
  // Silence from 2000: ticks set for an earlier deadline change nothing.
  EXPECT_FALSE(standby.Tick(1100));
  EXPECT_FALSE(standby.Tick(2999));
  EXPECT_EQ(standby.NextDeadline(2999), 1);
  EXPECT_TRUE(standby.Tick(3000));
  EXPECT_EQ(standby.role(), Role::kActive);
  EXPECT_GT(standby.epoch(), active.epoch());
}

}  // namespace
}  // namespace estuary::balancer
