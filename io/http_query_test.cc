#include "io/http_query.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace estuary::io {
namespace {

TEST(HttpQueryTest, PathAndQueryOfATarget) {
  EXPECT_EQ(PathOf("/api/x?a=1?b"), "/api/x");
  EXPECT_EQ(QueryOf("/api/x?a=1?b"), "a=1?b");  // only the first "?" splits
  EXPECT_EQ(PathOf("/api/x"), "/api/x");
  EXPECT_EQ(QueryOf("/api/x"), "");
  EXPECT_EQ(QueryOf("/api/x?"), "");
  EXPECT_EQ(QueryOf(""), "");
}

struct Seen {
  std::string name, value;
  bool has_equals;
  bool operator==(const Seen&) const = default;
};

std::vector<Seen> Pairs(std::string_view query) {
  std::vector<Seen> seen;
  ForEachQueryPair(query, [&seen](const QueryPair& pair) {
    seen.push_back({std::string(pair.name), std::string(pair.value), pair.has_equals});
    return true;
  });
  return seen;
}

TEST(HttpQueryTest, PairsSplitOnAmpersandThenOnTheFirstEquals) {
  EXPECT_EQ(Pairs("a=1&b=x=y&flag&c="),
            (std::vector<Seen>{{"a", "1", true}, {"b", "x=y", true}, {"flag", "", false}, {"c", "", true}}));
  // Pairs stay encoded: decoding is the caller's choice of rules.
  EXPECT_EQ(Pairs("a%3D=%26"), (std::vector<Seen>{{"a%3D", "%26", true}}));
  // Empty pairs are passed on as empty names; an empty query has none.
  EXPECT_EQ(Pairs("&=1&"), (std::vector<Seen>{{"", "", false}, {"", "1", true}}));
  EXPECT_TRUE(Pairs("").empty());
}

TEST(HttpQueryTest, PairsStopWhenAskedTo) {
  int calls = 0;
  ForEachQueryPair("a=1&b=2&c=3", [&calls](const QueryPair& pair) {
    ++calls;
    return pair.name != "b";
  });
  EXPECT_EQ(calls, 2);
}

TEST(HttpQueryTest, PlusIsASpaceOnlyInAQuery) {
  EXPECT_EQ(PercentDecode("a+b%2B", PlusIs::kSpace), "a b+");
  EXPECT_EQ(PercentDecode("a+b%2B", PlusIs::kPlus), "a+b+");
  EXPECT_EQ(*PercentDecodeStrict("a+b%20", PlusIs::kSpace), "a b ");
  EXPECT_EQ(*PercentDecodeStrict("a+b%20", PlusIs::kPlus), "a+b ");
}

TEST(HttpQueryTest, EscapesOfEveryByteDecodeInEitherCase) {
  EXPECT_EQ(PercentDecode("%e2%82%AC", PlusIs::kPlus), "\xe2\x82\xac");
  EXPECT_EQ(PercentDecode("%00", PlusIs::kPlus), std::string(1, '\0'));
  // %FF is well formed: it decodes, and the caller decides whether the byte
  // is allowed (membership refuses it in an address, a filter matches it).
  EXPECT_EQ(*PercentDecodeStrict("%FF:80", PlusIs::kSpace), "\xff:80");
  for (int byte = 0; byte < 256; ++byte) {
    const std::string escaped = fmt::format("%{:02X}", byte);
    ASSERT_EQ(*PercentDecodeStrict(escaped, PlusIs::kPlus), std::string(1, static_cast<char>(byte))) << escaped;
  }
}

TEST(HttpQueryTest, LenientDecodingKeepsMalformedEscapes) {
  for (const char* text : {"%", "%4", "%G1", "%1G", "100%", "%-1", "%+1", "% 1"}) {
    EXPECT_EQ(PercentDecode(text, PlusIs::kPlus), text) << text;
  }
  EXPECT_EQ(PercentDecode("%%41", PlusIs::kPlus), "%A");
  EXPECT_EQ(PercentDecode("%zz%", PlusIs::kSpace), "%zz%");
}

void ExpectRefused(std::string_view text, const std::string& error) {
  auto decoded = PercentDecodeStrict(text, PlusIs::kSpace);
  ASSERT_FALSE(decoded) << text << " decoded to " << *decoded;
  EXPECT_EQ(decoded.error(), error) << text;
}

TEST(HttpQueryTest, StrictDecodingRefusesMalformedEscapesByName) {
  ExpectRefused("%G1", "malformed percent escape \"%G1\" at byte 0: want % and two hex digits");
  ExpectRefused("ab%1G", "malformed percent escape \"%1G\" at byte 2: want % and two hex digits");
  ExpectRefused("h:8%", "malformed percent escape \"%\" at byte 3: want % and two hex digits");
  ExpectRefused("%4", "malformed percent escape \"%4\" at byte 0: want % and two hex digits");
  // A sign is not a hex digit (a from_chars-based decoder once read "%-1"
  // as the byte 0xFF).
  ExpectRefused("%-1", "malformed percent escape \"%-1\" at byte 0: want % and two hex digits");
  ExpectRefused("%+1", "malformed percent escape \"%+1\" at byte 0: want % and two hex digits");
  // The first bad escape is named, after good ones; outside bytes are quoted
  // as printable ASCII.
  ExpectRefused("%41%\xff\x01", "malformed percent escape \"%%FF%01\" at byte 3: want % and two hex digits");
}

TEST(HttpQueryTest, DecodingNeverGrowsTheText) {
  for (const char* text : {"", "%", "%%", "%41%", "+++", "%2B%2b", "abc"}) {
    EXPECT_LE(PercentDecode(text, PlusIs::kSpace).size(), std::string_view(text).size()) << text;
  }
}

TEST(HttpQueryTest, PrintableEscapesControlAndHighBytes) {
  EXPECT_EQ(Printable("plain text 100%"), "plain text 100%");
  EXPECT_EQ(Printable(std::string("a\0b", 3)), "a%00b");
  EXPECT_EQ(Printable("\x7f\x80\xff"), "%7F%80%FF");
  EXPECT_EQ(Printable("abcdef", 3), "abc...");
  EXPECT_EQ(Printable("abc", 3), "abc");
}

}  // namespace
}  // namespace estuary::io
