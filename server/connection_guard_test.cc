// ConnectionGuard (issue 21 point 6) on an injected clock: tickets hold an
// address's slot and the pending slot until dropped, from any thread;
// refusals are counted by reason.
#include "server/connection_guard.h"

#include <gtest/gtest.h>

#include <thread>

#include "io/clock.h"

namespace estuary::server {
namespace {

ConnectionGuardSettings PerIp(uint32_t cap, uint32_t pending = 0) {
  ConnectionGuardSettings settings;
  settings.address.max_connections_per_address = cap;
  settings.address.auth_backoff_ms = 0;
  settings.max_pending = pending;
  return settings;
}

TEST(ConnectionGuard, NoLimitMeansDisabled) {
  io::ManualClock clock;
  ConnectionGuardSettings none;
  none.address.auth_backoff_ms = 0;
  EXPECT_FALSE(ConnectionGuard(none, clock).enabled());
  EXPECT_TRUE(ConnectionGuard(PerIp(1), clock).enabled());
}

TEST(ConnectionGuard, TicketsHoldTheAddressUntilTheLastCopyGoes) {
  io::ManualClock clock;
  ConnectionGuard guard(PerIp(2), clock);
  auto first = guard.Admit("10.0.0.1:1000");
  auto second = guard.Admit("10.0.0.1:1001");  // another port, the same address
  ASSERT_TRUE(first && second);
  EXPECT_EQ(guard.Admit("10.0.0.1:1002"), nullptr);
  EXPECT_EQ(guard.refused(ConnectionGuard::kPerIp), 1u);
  auto moved = first;  // as a hand-off to another shard copies it
  first.reset();
  EXPECT_EQ(guard.Admit("10.0.0.1:1003"), nullptr);  // still held by the copy
  std::thread other_shard([&moved] { moved.reset(); });
  other_shard.join();
  EXPECT_NE(guard.Admit("10.0.0.1:1004"), nullptr);
}

TEST(ConnectionGuard, PendingUntilEstablished) {
  io::ManualClock clock;
  ConnectionGuard guard(PerIp(0, 2), clock);
  auto a = guard.Admit("10.0.0.1:1");
  auto b = guard.Admit("10.0.0.2:1");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(guard.pending(), 2u);
  EXPECT_EQ(guard.Admit("10.0.0.3:1"), nullptr);
  EXPECT_EQ(guard.refused(ConnectionGuard::kPending), 1u);
  a->Established();
  a->Established();  // idempotent
  EXPECT_EQ(guard.pending(), 1u);
  auto c = guard.Admit("10.0.0.3:1");
  EXPECT_NE(c, nullptr);
  b.reset();  // closed before its CONNECT
  EXPECT_EQ(guard.pending(), 1u);
}

TEST(ConnectionGuard, AuthFailuresFromOneAddressRefuseItForTheBackoff) {
  io::ManualClock clock;
  ConnectionGuardSettings settings;
  settings.address.auth_failures_before_backoff = 1;
  settings.address.auth_backoff_ms = 500;
  ConnectionGuard guard(settings, clock);
  guard.AuthFailed("[2001:db8::1]:5000");
  guard.AuthFailed("[2001:db8::2]:5000");  // the same /64
  EXPECT_EQ(guard.Admit("[2001:db8::3]:5000"), nullptr);
  EXPECT_EQ(guard.refused(ConnectionGuard::kAuthBackoff), 1u);
  EXPECT_NE(guard.Admit("[2001:db9::1]:5000"), nullptr);  // another /64
  clock.Advance(500);
  EXPECT_NE(guard.Admit("[2001:db8::3]:5000"), nullptr);
  EXPECT_EQ(guard.auth_failures(), 2u);
  const std::string metrics = guard.MetricsText(7);
  EXPECT_NE(metrics.find("estuary_connections_refused_total{node=\"7\",reason=\"auth_backoff\"} 1"), std::string::npos);
  EXPECT_NE(metrics.find("estuary_auth_failures_total{node=\"7\"} 2"), std::string::npos);
}

TEST(ConnectionGuard, AnAddressThatCannotBeReadIsRefused) {
  io::ManualClock clock;
  ConnectionGuard guard(PerIp(5), clock);
  EXPECT_EQ(guard.Admit(""), nullptr);
  EXPECT_EQ(guard.refused(ConnectionGuard::kUnknownAddress), 1u);
}

}  // namespace
}  // namespace estuary::server
