#include "security/acl.h"

#include <gtest/gtest.h>

namespace estuary::security {
namespace {

Acl Parse(const std::string& text) {
  auto acl = Acl::Parse(text, "acl");
  EXPECT_TRUE(acl.has_value()) << acl.error();
  return acl ? std::move(*acl) : *Acl::Parse("", "empty");
}

AclIdentity Anonymous(std::string_view client_id = "c1") { return {client_id, std::nullopt}; }
AclIdentity User(std::string_view name, std::string_view client_id = "c1") { return {client_id, name}; }

TEST(AclParse, ReadsEveryRuleKindAndCountsThem) {
  const Acl acl = Parse(
      "# anonymous\n"
      "topic read public/#\n"
      "\n"
      "user alice\n"
      "topic readwrite alice/#\n"
      "topic write sensors/+/data\n"
      "topic deny alice/secret\n"
      "topic plain/rw\n"
      "pattern read devices/%c/cmd\r\n"
      "  topic read spaced topic/with blanks  \n");
  EXPECT_EQ(acl.rule_count(), 7u);
  EXPECT_EQ(acl.Decide(User("alice"), "spaced topic/with blanks"), kRead);
}

TEST(AclParse, NamesTheBadLine) {
  for (const char* text : {"topic read a/#\nbogus line\n", "topic\n", "user\n",
                                  "topic sometimes a/b\n", "topic read a/#/b\n", "topic read a+\n"}) {
    auto acl = Acl::Parse(text, "/etc/estuary/acl");
    ASSERT_FALSE(acl.has_value()) << text;
    EXPECT_NE(acl.error().find("/etc/estuary/acl:"), std::string::npos) << acl.error();
  }
  EXPECT_NE(Acl::Parse("topic a\nnope\n", "f").error().find("f:2:"), std::string::npos);
  EXPECT_FALSE(Acl::Load("/nonexistent/estuary-acl").has_value());
}

TEST(AclDecide, AnEmptyFileAllowsNothing) {
  const Acl acl = Parse("# nothing\n");
  EXPECT_EQ(acl.Decide(Anonymous(), "a"), kNoAccess);
  EXPECT_EQ(acl.Decide(User("alice"), "a"), kNoAccess);
}

TEST(AclDecide, AccessWordsGrantWhatTheySay) {
  const Acl acl = Parse(
      "user u\n"
      "topic read r/#\n"
      "topic write w/#\n"
      "topic readwrite rw/#\n"
      "topic none/#\n");
  EXPECT_EQ(acl.Decide(User("u"), "r/x"), kRead);
  EXPECT_EQ(acl.Decide(User("u"), "w/x"), kWrite);
  EXPECT_EQ(acl.Decide(User("u"), "rw/x"), kReadWrite);
  EXPECT_EQ(acl.Decide(User("u"), "none/x"), kReadWrite);  // no access word: readwrite
  EXPECT_EQ(acl.Decide(User("u"), "other"), kNoAccess);
}

TEST(AclDecide, RulesBeforeTheFirstUserAreTheAnonymousClients) {
  const Acl acl = Parse(
      "topic read public/#\n"
      "user alice\n"
      "topic readwrite alice/#\n");
  EXPECT_EQ(acl.Decide(Anonymous(), "public/news"), kRead);
  EXPECT_EQ(acl.Decide(Anonymous(), "alice/x"), kNoAccess);
  EXPECT_EQ(acl.Decide(User("alice"), "public/news"), kNoAccess);  // not the anonymous rules
  EXPECT_EQ(acl.Decide(User("alice"), "alice/x"), kReadWrite);
  EXPECT_EQ(acl.Decide(User("bob"), "public/news"), kNoAccess);   // a user without rules
}

TEST(AclDecide, DenyComesBeforeAnyGrant) {
  const Acl acl = Parse(
      "user u\n"
      "topic readwrite home/#\n"
      "topic deny home/safe/#\n"
      "pattern deny home/%c/private\n");
  EXPECT_EQ(acl.Decide(User("u", "kitchen"), "home/lights"), kReadWrite);
  EXPECT_EQ(acl.Decide(User("u", "kitchen"), "home/safe"), kNoAccess);
  EXPECT_EQ(acl.Decide(User("u", "kitchen"), "home/safe/code"), kNoAccess);
  EXPECT_EQ(acl.Decide(User("u", "kitchen"), "home/kitchen/private"), kNoAccess);  // a pattern deny too
  EXPECT_EQ(acl.Decide(User("u", "hall"), "home/kitchen/private"), kReadWrite);
}

TEST(AclDecide, PatternsSubstituteClientIdAndUserName) {
  const Acl acl = Parse(
      "pattern write devices/%c/state\n"
      "user alice\n"
      "topic read x\n"
      "pattern read users/%u/#\n");  // after a user line, still every client's
  EXPECT_EQ(acl.Decide(User("alice", "dev7"), "devices/dev7/state"), kWrite);
  EXPECT_EQ(acl.Decide(User("alice", "dev7"), "devices/dev8/state"), kNoAccess);
  EXPECT_EQ(acl.Decide(Anonymous("dev8"), "devices/dev8/state"), kWrite);
  EXPECT_EQ(acl.Decide(User("bob", "b"), "users/bob/inbox"), kRead);
  EXPECT_EQ(acl.Decide(User("bob", "b"), "users/alice/inbox"), kNoAccess);
  EXPECT_EQ(acl.Decide(Anonymous("b"), "users/%u/inbox"), kNoAccess);  // %u never matches anonymous
  // Only a whole level is substituted.
  const Acl partial = Parse("pattern read dev_%c\n");
  EXPECT_EQ(partial.Decide(Anonymous("x"), "dev_x"), kNoAccess);
  EXPECT_EQ(partial.Decide(Anonymous("x"), "dev_%c"), kRead);
}

TEST(AclDecide, WildcardIdentitiesGetNoPatternGrants) {
  const Acl acl = Parse("pattern readwrite devices/%c/#\nuser u\ntopic read own\n");
  EXPECT_EQ(acl.Decide(Anonymous("a+b"), "devices/a+b/x"), kNoAccess);
  EXPECT_EQ(acl.Decide(Anonymous("#"), "devices/x"), kNoAccess);
  EXPECT_EQ(acl.Decide(User("u+", "c"), "devices/c/x"), kNoAccess);
  EXPECT_EQ(acl.Decide(User("u", "c"), "devices/c/x"), kReadWrite);
  // A slash in an id cannot stand for more than one level.
  EXPECT_EQ(acl.Decide(Anonymous("a/b"), "devices/a/b/x"), kNoAccess);
}

TEST(AclDecide, SysTopicsNeedARuleThatNamesThem) {
  const Acl acl = Parse(
      "topic readwrite #\n"
      "topic read +/broker/#\n"
      "user admin\n"
      "topic read $SYS/#\n"
      "topic readwrite #\n");
  EXPECT_EQ(acl.Decide(Anonymous(), "$SYS/broker/uptime"), kNoAccess);
  EXPECT_EQ(acl.Decide(Anonymous(), "anything/else"), kReadWrite);
  EXPECT_EQ(acl.Decide(User("admin"), "$SYS/broker/uptime"), kRead);
  EXPECT_EQ(acl.Decide(User("admin"), "$other/x"), kNoAccess);
}

TEST(AclMatching, RulesMatchByTheMqttRules) {
  EXPECT_TRUE(RuleMatches("a/#", "a", nullptr));
  EXPECT_TRUE(RuleMatches("a/+", "a/", nullptr));
  EXPECT_FALSE(RuleMatches("a/+", "a", nullptr));
  EXPECT_FALSE(RuleMatches("a/b", "a/b/c", nullptr));
  EXPECT_FALSE(RuleMatches("#", "$SYS/x", nullptr));
  EXPECT_TRUE(RuleMatches("$SYS/#", "$SYS/x", nullptr));
  const AclIdentity me{"c", "u"};
  EXPECT_TRUE(RuleMatches("%u/%c", "u/c", &me));
  EXPECT_FALSE(RuleMatches("%u/%c", "%u/%c", &me));
  EXPECT_TRUE(RuleMatches("%u/%c", "%u/%c", nullptr));  // a topic rule: plain text
}

TEST(AclMatching, OverlapAndCoverOfFilters) {
  EXPECT_TRUE(RuleOverlaps("a/+/c", "a/#", nullptr));
  EXPECT_TRUE(RuleOverlaps("a/#", "a", nullptr));
  EXPECT_TRUE(RuleOverlaps("a", "a/#", nullptr));
  EXPECT_TRUE(RuleOverlaps("+/b", "a/+", nullptr));
  EXPECT_FALSE(RuleOverlaps("a/b", "a/c", nullptr));
  EXPECT_FALSE(RuleOverlaps("a/+", "a", nullptr));
  EXPECT_FALSE(RuleOverlaps("$SYS/#", "#", nullptr));
  EXPECT_FALSE(RuleOverlaps("#", "$SYS/#", nullptr));
  EXPECT_TRUE(RuleOverlaps("$SYS/#", "$SYS/+", nullptr));
  EXPECT_TRUE(RuleCovers("a/#", "a/+/c", nullptr));
  EXPECT_TRUE(RuleCovers("a/#", "a/#", nullptr));
  EXPECT_TRUE(RuleCovers("+/+", "a/+", nullptr));
  EXPECT_FALSE(RuleCovers("a/+", "a/#", nullptr));
  EXPECT_FALSE(RuleCovers("a/b", "a/+", nullptr));
  EXPECT_FALSE(RuleCovers("#", "$SYS/#", nullptr));
  EXPECT_TRUE(RuleCovers("#", "+/x", nullptr));
}

TEST(AclSubscribe, WildcardsNeedSomeReadableTopicAndNoCoveringDeny) {
  const Acl acl = Parse(
      "user u\n"
      "topic read sensors/+/temp\n"
      "topic write commands/#\n"
      "topic deny sensors/secret/#\n");
  EXPECT_TRUE(acl.MaySubscribe(User("u"), "sensors/#"));        // partly readable: deliveries checked
  EXPECT_TRUE(acl.MaySubscribe(User("u"), "sensors/kitchen/temp"));
  EXPECT_FALSE(acl.MaySubscribe(User("u"), "sensors/kitchen/humidity"));
  EXPECT_FALSE(acl.MaySubscribe(User("u"), "sensors/secret/#"));  // all denied
  EXPECT_FALSE(acl.MaySubscribe(User("u"), "commands/#"));        // write only
  EXPECT_TRUE(acl.MaySubscribe(User("u"), "#"));
  EXPECT_FALSE(acl.MaySubscribe(User("u"), "$SYS/#"));
  EXPECT_TRUE(acl.MaySubscribe(User("u"), "$share/g/sensors/+/temp"));
  EXPECT_FALSE(acl.MaySubscribe(User("u"), "$share/g/commands/x"));
  EXPECT_FALSE(acl.MaySubscribe(User("other"), "sensors/#"));
}

TEST(AclSubscribe, PatternsCountForSubscriptions) {
  const Acl acl = Parse("pattern read devices/%c/#\npattern deny devices/%c/keys/#\n");
  EXPECT_TRUE(acl.MaySubscribe(Anonymous("d1"), "devices/d1/#"));
  EXPECT_TRUE(acl.MaySubscribe(Anonymous("d1"), "devices/+/status"));
  EXPECT_FALSE(acl.MaySubscribe(Anonymous("d1"), "devices/d2/#"));
  EXPECT_FALSE(acl.MaySubscribe(Anonymous("d1"), "devices/d1/keys/#"));
  EXPECT_FALSE(acl.MaySubscribe(Anonymous("d+"), "devices/d+/#"));
}

}  // namespace
}  // namespace estuary::security
