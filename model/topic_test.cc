#include "model/topic.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace estuary {
namespace {

using namespace std::string_literals;

std::vector<std::string> Levels(std::string_view text) {
  std::vector<std::string> levels;
  TopicLevels cursor(text);
  while (!cursor.done()) levels.emplace_back(cursor.Next());
  return levels;
}

TEST(TopicLevelsTest, SplitsOnSlashKeepingEmptyLevels) {
  EXPECT_EQ(Levels("a"), (std::vector<std::string>{"a"}));
  EXPECT_EQ(Levels("a//b/"), (std::vector<std::string>{"a", "", "b", ""}));
  EXPECT_EQ(Levels("/"), (std::vector<std::string>{"", ""}));
  EXPECT_EQ(Levels(""), (std::vector<std::string>{""}));
}

TEST(Utf8Test, AcceptsWellFormedText) {
  EXPECT_TRUE(IsValidMqttUtf8(""));
  EXPECT_TRUE(IsValidMqttUtf8("plain/ascii"));
  EXPECT_TRUE(IsValidMqttUtf8("caf\xC3\xA9"));                 // U+00E9
  EXPECT_TRUE(IsValidMqttUtf8("\xE2\x82\xAC"));                // U+20AC
  EXPECT_TRUE(IsValidMqttUtf8("\xED\x9F\xBF"));                // U+D7FF, below surrogates
  EXPECT_TRUE(IsValidMqttUtf8("\xEE\x80\x80"));                // U+E000, above surrogates
  EXPECT_TRUE(IsValidMqttUtf8("\xF0\x9F\x98\x80"));            // U+1F600
  EXPECT_TRUE(IsValidMqttUtf8("\xF4\x8F\xBF\xBF"));            // U+10FFFF
  EXPECT_TRUE(IsValidMqttUtf8("\xEF\xBB\xBF"));                // BOM is allowed [MQTT-1.5.4-3]
}

// [MQTT-1.5.4-2]: U+0000 is not allowed.
TEST(Utf8Test, MQTT_1_5_4_2_RejectsNullCharacter) {
  EXPECT_FALSE(IsValidMqttUtf8("a\0b"s));
  EXPECT_FALSE(IsValidMqttUtf8("\0"s));
  EXPECT_FALSE(IsValidMqttUtf8("\xC0\x80"));  // "modified UTF-8" null, overlong
}

// [MQTT-1.5.4-1]: ill-formed UTF-8 and surrogate code points are rejected.
TEST(Utf8Test, MQTT_1_5_4_1_RejectsIllFormedAndSurrogates) {
  EXPECT_FALSE(IsValidMqttUtf8("\xED\xA0\x80"));          // U+D800
  EXPECT_FALSE(IsValidMqttUtf8("\xED\xBF\xBF"));          // U+DFFF
  EXPECT_FALSE(IsValidMqttUtf8("\xC1\xBF"));              // overlong two-byte
  EXPECT_FALSE(IsValidMqttUtf8("\xE0\x9F\xBF"));          // overlong three-byte
  EXPECT_FALSE(IsValidMqttUtf8("\xF0\x8F\xBF\xBF"));      // overlong four-byte
  EXPECT_FALSE(IsValidMqttUtf8("\xF4\x90\x80\x80"));      // above U+10FFFF
  EXPECT_FALSE(IsValidMqttUtf8("\xF5\x80\x80\x80"));      // lead byte never valid
  EXPECT_FALSE(IsValidMqttUtf8("\xFF"));
  EXPECT_FALSE(IsValidMqttUtf8("\x80"));                  // lone continuation
  EXPECT_FALSE(IsValidMqttUtf8("a\xC3"));                 // truncated at the end
  EXPECT_FALSE(IsValidMqttUtf8("\xE2\x82"));              // truncated three-byte
  EXPECT_FALSE(IsValidMqttUtf8("\xE2\x28\xA1"));          // bad continuation
  EXPECT_FALSE(IsValidMqttUtf8("\xF0\x9F\x98"));          // truncated four-byte
}

TEST(TopicNameTest, AcceptsOrdinaryNames) {
  for (const char* name : {"a", "a/b/c", "/", "a//b", "/leading", "trailing/", "$SYS/broker",
                           "sport/tennis/player1", " space "}) {
    EXPECT_TRUE(ValidateTopicName(name)) << name;
  }
}

// [MQTT-4.7.3-1]: names and filters are at least one character long.
TEST(TopicNameTest, MQTT_4_7_3_1_RejectsEmpty) {
  EXPECT_EQ(ValidateTopicName("").error(), TopicError::kEmpty);
  EXPECT_EQ(ValidateTopicFilter("").error(), TopicError::kEmpty);
}

// [MQTT-4.7.0-1]: wildcards must not be used within a topic name.
TEST(TopicNameTest, MQTT_4_7_0_1_RejectsWildcards) {
  for (const char* name : {"+", "#", "a/+", "a/#", "a+b", "a#/b"}) {
    ASSERT_FALSE(ValidateTopicName(name)) << name;
    EXPECT_EQ(ValidateTopicName(name).error(), TopicError::kWildcardInName) << name;
  }
}

// [MQTT-4.7.3-2] and [MQTT-4.7.3-3]: no U+0000, at most 65535 bytes.
TEST(TopicNameTest, MQTT_4_7_3_2_And_3_RejectNullAndOverlong) {
  EXPECT_EQ(ValidateTopicName("a\0b"s).error(), TopicError::kInvalidUtf8);
  EXPECT_EQ(ValidateTopicFilter("a/\0"s).error(), TopicError::kInvalidUtf8);
  EXPECT_EQ(ValidateTopicName("a/\xED\xA0\x80").error(), TopicError::kInvalidUtf8);
  EXPECT_TRUE(ValidateTopicName(std::string(kMaxTopicBytes, 'x')));
  EXPECT_EQ(ValidateTopicName(std::string(kMaxTopicBytes + 1, 'x')).error(), TopicError::kTooLong);
  EXPECT_EQ(ValidateTopicFilter(std::string(kMaxTopicBytes + 1, 'x')).error(),
            TopicError::kTooLong);
}

TEST(TopicFilterTest, AcceptsValidFilters) {
  for (const char* filter : {"a", "#", "+", "+/+", "/+", "+/", "a/#", "a/+/b", "+/tennis/#",
                             "sport/+/player1", "a//#", "$SYS/#", "//", "$share"}) {
    EXPECT_TRUE(ValidateTopicFilter(filter)) << filter;
    EXPECT_TRUE(HasValidWildcards(filter)) << filter;
  }
}

// [MQTT-4.7.1-2]: '#' alone in its level and last. [MQTT-4.7.1-3]: '+'
// occupies an entire level.
TEST(TopicFilterTest, MQTT_4_7_1_2_And_3_RejectMisplacedWildcards) {
  for (const char* filter : {"sport/tennis#", "sport/tennis/#/ranking", "#/", "#/a", "a#",
                             "sport+", "sport/+tennis", "+a", "a/b+/c", "++", "##", "+#"}) {
    ASSERT_FALSE(ValidateTopicFilter(filter)) << filter;
    EXPECT_EQ(ValidateTopicFilter(filter).error(), TopicError::kBadWildcard) << filter;
    EXPECT_FALSE(HasValidWildcards(filter)) << filter;
  }
}

TEST(SharedFilterTest, Recognises) {
  EXPECT_TRUE(IsSharedFilter("$share/g/a"));
  EXPECT_FALSE(IsSharedFilter("$share"));
  EXPECT_FALSE(IsSharedFilter("$SHARE/g/a"));
  EXPECT_FALSE(IsSharedFilter("a/$share/g/a"));
}

// MQTT 5.0 §4.8.2 [MQTT-4.8.2-1], [MQTT-4.8.2-2].
TEST(SharedFilterTest, ParsesGroupAndFilter) {
  auto shared = ParseSharedFilter("$share/consumers/sport/+/player1");
  ASSERT_TRUE(shared);
  EXPECT_EQ(shared->group, "consumers");
  EXPECT_EQ(shared->filter, "sport/+/player1");
  auto everything = ParseSharedFilter("$share/g/#");
  ASSERT_TRUE(everything);
  EXPECT_EQ(everything->filter, "#");
  auto leading_slash = ParseSharedFilter("$share/g//a");
  ASSERT_TRUE(leading_slash);
  EXPECT_EQ(leading_slash->filter, "/a");
}

TEST(SharedFilterTest, MQTT_4_8_2_RejectsBadGroupOrFilter) {
  for (const char* filter : {"$share//a", "$share/g", "$share/g/", "$share/g+/a", "$share/#/a",
                             "$share/+/a", "$share/g/a#", "$share/g/#/b", "not/shared"}) {
    ASSERT_FALSE(ParseSharedFilter(filter)) << filter;
    EXPECT_EQ(ParseSharedFilter(filter).error(), TopicError::kBadSharedFilter) << filter;
  }
  EXPECT_EQ(ParseSharedFilter("$share/g/\xC0").error(), TopicError::kInvalidUtf8);
}

TEST(TopicMatchesTest, LiteralLevels) {
  EXPECT_TRUE(TopicMatches("a/b", "a/b"));
  EXPECT_FALSE(TopicMatches("a/b", "a/b/c"));
  EXPECT_FALSE(TopicMatches("a/b/c", "a/b"));
  EXPECT_FALSE(TopicMatches("a/b", "a/bc"));
  EXPECT_FALSE(TopicMatches("/a", "a"));  // [MQTT-4.7.3]: leading '/' is a level
  EXPECT_TRUE(TopicMatches("a/", "a/"));
  EXPECT_FALSE(TopicMatches("a/", "a"));
}

// MQTT 3.1.1 §4.7.1.2 examples.
TEST(TopicMatchesTest, MultiLevelWildcard) {
  EXPECT_TRUE(TopicMatches("sport/tennis/player1/#", "sport/tennis/player1"));
  EXPECT_TRUE(TopicMatches("sport/tennis/player1/#", "sport/tennis/player1/ranking"));
  EXPECT_TRUE(TopicMatches("sport/tennis/player1/#", "sport/tennis/player1/score/wimbledon"));
  EXPECT_TRUE(TopicMatches("sport/#", "sport"));  // '#' matches the parent level
  EXPECT_TRUE(TopicMatches("#", "a/b/c"));
  EXPECT_TRUE(TopicMatches("#", "/"));
  EXPECT_TRUE(TopicMatches("a/#", "a/"));
  EXPECT_FALSE(TopicMatches("a/#", "ab"));
  EXPECT_FALSE(TopicMatches("a/b/#", "a"));
}

// MQTT 3.1.1 §4.7.1.3 examples.
TEST(TopicMatchesTest, SingleLevelWildcard) {
  EXPECT_TRUE(TopicMatches("sport/tennis/+", "sport/tennis/player1"));
  EXPECT_FALSE(TopicMatches("sport/tennis/+", "sport/tennis/player1/ranking"));
  EXPECT_FALSE(TopicMatches("sport/+", "sport"));
  EXPECT_TRUE(TopicMatches("sport/+", "sport/"));  // '+' matches an empty level
  EXPECT_TRUE(TopicMatches("+/+", "/finance"));
  EXPECT_TRUE(TopicMatches("/+", "/finance"));
  EXPECT_FALSE(TopicMatches("+", "/finance"));
  EXPECT_TRUE(TopicMatches("+/+/+", "//"));
  EXPECT_TRUE(TopicMatches("a/+/c", "a//c"));
  EXPECT_TRUE(TopicMatches("+/tennis/#", "sport/tennis"));
}

// [MQTT-4.7.2-1]: a filter starting with a wildcard does not match a topic
// starting with '$'.
TEST(TopicMatchesTest, MQTT_4_7_2_1_WildcardsSkipDollarTopics) {
  EXPECT_FALSE(TopicMatches("#", "$SYS/broker/uptime"));
  EXPECT_FALSE(TopicMatches("+/monitor/Clients", "$SYS/monitor/Clients"));
  EXPECT_FALSE(TopicMatches("+", "$SYS"));
  EXPECT_FALSE(TopicMatches("#", "$"));
  EXPECT_TRUE(TopicMatches("$SYS/#", "$SYS/monitor/Clients"));
  EXPECT_TRUE(TopicMatches("$SYS/monitor/+", "$SYS/monitor/Clients"));
  EXPECT_TRUE(TopicMatches("$SYS/#", "$SYS"));
  // Only the first level is protected; '$' further in is an ordinary byte.
  EXPECT_TRUE(TopicMatches("a/+", "a/$b"));
  EXPECT_TRUE(TopicMatches("#", "a/$b"));
}

TEST(TopicErrorTest, EveryErrorHasText) {
  for (TopicError error : {TopicError::kEmpty, TopicError::kTooLong, TopicError::kInvalidUtf8,
                           TopicError::kWildcardInName, TopicError::kBadWildcard,
                           TopicError::kBadSharedFilter}) {
    EXPECT_STRNE(ToString(error), "unknown topic error");
  }
}

}  // namespace
}  // namespace estuary
