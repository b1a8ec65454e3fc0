#include <gtest/gtest.h>
#include <netinet/in.h>

#include "io/uv/sockaddr.h"
#include "io/uv/tcp.h"

namespace estuary::io {
namespace {

TEST(ParseEndpointTest, AcceptsIpv4Ipv6AndHostNames) {
  auto v4 = ParseEndpoint("127.0.0.1:1883");
  ASSERT_TRUE(v4.has_value()) << v4.error();
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 1883);

  auto v6 = ParseEndpoint("[::1]:0");
  ASSERT_TRUE(v6.has_value()) << v6.error();
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 0);

  auto name = ParseEndpoint("localhost:5672");
  ASSERT_TRUE(name.has_value()) << name.error();
  EXPECT_EQ(name->host, "localhost");

  auto any = ParseEndpoint("0.0.0.0:65535");
  ASSERT_TRUE(any.has_value()) << any.error();
  EXPECT_EQ(any->port, 65535);
}

TEST(ParseEndpointTest, RejectsMalformedTextWithAReason) {
  struct Case {
    const char* text;
    const char* reason;
  };
  for (const Case& c : {Case{"", "empty"}, Case{"127.0.0.1", "missing ':PORT'"},
                        Case{":1883", "missing host"}, Case{"127.0.0.1:", "missing port"},
                        Case{"127.0.0.1:65536", "0 to 65535"}, Case{"127.0.0.1:80x", "0 to 65535"},
                        Case{"127.0.0.1:-1", "0 to 65535"}, Case{"::1:1883", "need brackets"},
                        Case{"[::1:1883", "missing ']'"}, Case{"[::1]1883", "missing ':PORT'"},
                        Case{"[127.0.0.1]:1", "not an IPv6"}, Case{"300.1.1.1:1", "neither"},
                        Case{"bad host:1", "neither"}, Case{"a..b:1", "neither"}}) {
    auto parsed = ParseEndpoint(c.text);
    ASSERT_FALSE(parsed.has_value()) << c.text;
    EXPECT_NE(parsed.error().find(c.reason), std::string::npos) << c.text << " -> " << parsed.error();
    EXPECT_NE(parsed.error().find(c.text), std::string::npos) << "error should quote the input";
  }
}

TEST(ParseEndpointTest, ToStringRoundTrips) {
  for (const char* text : {"127.0.0.1:1883", "[::1]:8080", "broker-1.example:1"}) {
    auto parsed = ParseEndpoint(text);
    ASSERT_TRUE(parsed.has_value()) << text;
    EXPECT_EQ(parsed->ToString(), text);
  }
}

TEST(SockaddrTest, NumericHostsAndLocalhostNeedNoResolver) {
  auto v4 = detail::NumericAddress({"localhost", 80});
  ASSERT_TRUE(v4.has_value());
  EXPECT_EQ(detail::FormatAddress(reinterpret_cast<sockaddr*>(&*v4)), "127.0.0.1:80");
  auto v6 = detail::NumericAddress({"::1", 443});
  ASSERT_TRUE(v6.has_value());
  EXPECT_EQ(detail::FormatAddress(reinterpret_cast<sockaddr*>(&*v6)), "[::1]:443");
  EXPECT_FALSE(detail::NumericAddress({"example.invalid", 1}).has_value());
}

}  // namespace
}  // namespace estuary::io
