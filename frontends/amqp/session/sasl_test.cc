#include "frontends/amqp/session/sasl.h"

#include <gtest/gtest.h>

#include "frontends/amqp/session/connection.h"

namespace estuary::amqp {
namespace {

using namespace std::string_literals;

TEST(SaslPlain, ParsesAuthzidUserAndPassword) {  // RFC 4616 §2
  auto parsed = ParsePlain("admin\0alice\0secret"s);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->authzid, "admin");
  EXPECT_EQ(parsed->user, "alice");
  EXPECT_EQ(parsed->password, "secret");
}

TEST(SaslPlain, EmptyAuthzidAndPasswordAreAllowed) {
  auto parsed = ParsePlain("\0bob\0"s);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->authzid, "");
  EXPECT_EQ(parsed->user, "bob");
  EXPECT_EQ(parsed->password, "");
}

TEST(SaslPlain, RejectsMalformedResponses) {
  EXPECT_FALSE(ParsePlain("").has_value());
  EXPECT_FALSE(ParsePlain("alice").has_value());
  EXPECT_FALSE(ParsePlain("\0alice"s).has_value());
  EXPECT_FALSE(ParsePlain("\0\0secret"s).has_value());  // no user name
}

TEST(DurableSessionId, CannotCollideWithAnMqttClientId) {
  const std::string id = DurableSessionId("container-1", "link-a");
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(id[0], '\0');  // MQTT client ids never contain U+0000
  EXPECT_NE(DurableSessionId("a/b", "c"), DurableSessionId("a", "b/c")) << "ids must be unambiguous";
}

}  // namespace
}  // namespace estuary::amqp
