#include "security/address_limits.h"

#include <gtest/gtest.h>

#include "io/clock.h"

namespace estuary::security {
namespace {

using Verdict = AddressLimits::Verdict;

TEST(AddressLimits, CapsConcurrentConnectionsPerAddressOnly) {
  io::ManualClock clock;
  AddressLimits limits({.max_connections_per_address = 3});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(limits.Admit("127.0.0.1", clock.NowMs()), Verdict::kAdmit);
  EXPECT_EQ(limits.Admit("127.0.0.1", clock.NowMs()), Verdict::kTooManyConnections);
  EXPECT_EQ(limits.Admit("127.0.0.2", clock.NowMs()), Verdict::kAdmit);  // another address is not affected
  limits.Release("127.0.0.1", clock.NowMs());
  EXPECT_EQ(limits.open("127.0.0.1"), 2u);
  EXPECT_EQ(limits.Admit("127.0.0.1", clock.NowMs()), Verdict::kAdmit);
}

TEST(AddressLimits, ConnectRateIsATokenBucketPerAddress) {
  io::ManualClock clock;
  AddressLimits limits({.connect_rate_per_address = 5});
  for (int i = 0; i < 5; ++i) EXPECT_EQ(limits.Admit("10.0.0.1", clock.NowMs()), Verdict::kAdmit) << i;
  EXPECT_EQ(limits.Admit("10.0.0.1", clock.NowMs()), Verdict::kConnectRate);
  EXPECT_EQ(limits.Admit("10.0.0.2", clock.NowMs()), Verdict::kAdmit);
  clock.Advance(199);
  EXPECT_EQ(limits.Admit("10.0.0.1", clock.NowMs()), Verdict::kConnectRate);
  clock.Advance(1);  // one new connection per 200 ms
  EXPECT_EQ(limits.Admit("10.0.0.1", clock.NowMs()), Verdict::kAdmit);
  EXPECT_EQ(limits.Admit("10.0.0.1", clock.NowMs()), Verdict::kConnectRate);
}

TEST(AddressLimits, RefusalsAtTheConcurrencyCapSpendNoRate) {
  io::ManualClock clock;
  AddressLimits limits({.max_connections_per_address = 1, .connect_rate_per_address = 2});
  EXPECT_EQ(limits.Admit("10.0.0.1", clock.NowMs()), Verdict::kAdmit);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(limits.Admit("10.0.0.1", clock.NowMs()), Verdict::kTooManyConnections);
  limits.Release("10.0.0.1", clock.NowMs());
  EXPECT_EQ(limits.Admit("10.0.0.1", clock.NowMs()), Verdict::kAdmit);  // the second token is still there
}

TEST(AddressLimits, AuthFailuresBackOffDoublingUpToTheMaximum) {
  io::ManualClock clock;
  AddressLimits limits({.auth_failures_before_backoff = 2, .auth_backoff_ms = 1000, .auth_backoff_max_ms = 4000});
  EXPECT_EQ(limits.AuthFailed("10.0.0.1", clock.NowMs()), 0);
  EXPECT_EQ(limits.AuthFailed("10.0.0.1", clock.NowMs()), 0);
  EXPECT_EQ(limits.Admit("10.0.0.1", clock.NowMs()), Verdict::kAdmit);
  limits.Release("10.0.0.1", clock.NowMs());
  EXPECT_EQ(limits.AuthFailed("10.0.0.1", clock.NowMs()), 1000);  // the third: back-off starts
  EXPECT_EQ(limits.Admit("10.0.0.1", clock.NowMs()), Verdict::kAuthBackoff);
  EXPECT_EQ(limits.Admit("10.0.0.9", clock.NowMs()), Verdict::kAdmit);  // others are served
  clock.Advance(999);
  EXPECT_EQ(limits.Admit("10.0.0.1", clock.NowMs()), Verdict::kAuthBackoff);
  clock.Advance(1);
  EXPECT_EQ(limits.Admit("10.0.0.1", clock.NowMs()), Verdict::kAdmit);
  EXPECT_EQ(limits.AuthFailed("10.0.0.1", clock.NowMs()), 2000);
  EXPECT_EQ(limits.AuthFailed("10.0.0.1", clock.NowMs()), 4000);
  EXPECT_EQ(limits.AuthFailed("10.0.0.1", clock.NowMs()), 4000);  // bounded
  clock.Advance(4000);
  limits.AuthSucceeded("10.0.0.1", clock.NowMs());  // a success forgives
  EXPECT_EQ(limits.AuthFailed("10.0.0.1", clock.NowMs()), 0);
}

TEST(AddressLimits, OldFailuresAreForgotten) {
  io::ManualClock clock;
  AddressLimits limits({.auth_failures_before_backoff = 1, .auth_backoff_ms = 100, .failure_memory_ms = 10'000});
  EXPECT_EQ(limits.AuthFailed("10.0.0.1", clock.NowMs()), 0);
  clock.Advance(10'000);
  EXPECT_EQ(limits.AuthFailed("10.0.0.1", clock.NowMs()), 0);  // the first again
  EXPECT_EQ(limits.AuthFailed("10.0.0.1", clock.NowMs()), 100);
}

TEST(AddressLimits, NoBackoffWhenOff) {
  io::ManualClock clock;
  AddressLimits limits({.auth_backoff_ms = 0});
  for (int i = 0; i < 100; ++i) EXPECT_EQ(limits.AuthFailed("10.0.0.1", clock.NowMs()), 0);
  EXPECT_EQ(limits.Admit("10.0.0.1", clock.NowMs()), Verdict::kAdmit);
}

TEST(AddressLimits, AFloodOfAddressesKeepsTheTableBounded) {
  io::ManualClock clock;
  AddressLimits limits({.connect_rate_per_address = 1, .max_addresses = 100});
  EXPECT_EQ(limits.Admit("192.168.0.1", clock.NowMs()), Verdict::kAdmit);  // stays open
  for (int i = 0; i < 100'000; ++i) {
    const std::string address = "10." + std::to_string(i >> 16) + "." + std::to_string((i >> 8) & 255) + "." +
                                std::to_string(i & 255);
    ASSERT_EQ(limits.Admit(address, clock.NowMs()), Verdict::kAdmit) << address;
    limits.Release(address, clock.NowMs());
    ASSERT_LE(limits.size(), 100u);
  }
  // The address with an open connection was never evicted.
  EXPECT_EQ(limits.open("192.168.0.1"), 1u);
}

TEST(AddressLimits, IdleEntriesExpireWithoutASweep) {
  io::ManualClock clock;
  AddressLimits limits({.connect_rate_per_address = 10});
  for (int i = 0; i < 50; ++i) {
    const std::string address = "10.0.0." + std::to_string(i);
    limits.Admit(address, clock.NowMs());
    limits.Release(address, clock.NowMs());
  }
  EXPECT_EQ(limits.size(), 50u);
  clock.Advance(1000);  // every bucket refilled: nothing left to remember
  for (int i = 0; i < 30; ++i) limits.Admit("10.1.0.1", clock.NowMs());
  EXPECT_EQ(limits.size(), 1u);
}

TEST(AddressLimits, TableFullOfOpenConnectionsRefusesNewAddresses) {
  io::ManualClock clock;
  AddressLimits limits({.max_connections_per_address = 10, .max_addresses = 4});
  for (int i = 0; i < 4; ++i) EXPECT_EQ(limits.Admit("10.0.0." + std::to_string(i), clock.NowMs()), Verdict::kAdmit);
  EXPECT_EQ(limits.Admit("10.0.0.200", clock.NowMs()), Verdict::kTableFull);
  EXPECT_EQ(limits.Admit("10.0.0.1", clock.NowMs()), Verdict::kAdmit);  // known addresses still are
  limits.Release("10.0.0.2", clock.NowMs());
  EXPECT_EQ(limits.Admit("10.0.0.200", clock.NowMs()), Verdict::kAdmit);  // evicts 10.0.0.2's idle entry
}

TEST(AddressKey, IPv4IPv6AndMapped) {
  EXPECT_EQ(AddressKey("127.0.0.1:5555"), "127.0.0.1");
  EXPECT_EQ(AddressKey("127.0.0.2"), "127.0.0.2");
  EXPECT_EQ(AddressKey("[2001:db8:1:2:3:4:5:6]:1883"), "2001:db8:1:2::/64");
  EXPECT_EQ(AddressKey("2001:db8:1:2:ffff::1"), "2001:db8:1:2::/64");
  EXPECT_EQ(AddressKey("[::ffff:10.1.2.3]:80"), "10.1.2.3");
  EXPECT_EQ(AddressKey("not an address"), "");
  EXPECT_EQ(AddressKey(""), "");
}

}  // namespace
}  // namespace estuary::security
