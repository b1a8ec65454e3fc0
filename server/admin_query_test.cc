#include "server/admin_query.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace estuary::server {
namespace {

TEST(AdminQueryTest, PathOfCutsTheQuery) {
  EXPECT_EQ(PathOf("/api/clients?limit=5"), "/api/clients");
  EXPECT_EQ(PathOf("/api/clients"), "/api/clients");
  EXPECT_EQ(PathOf("/api/clients?"), "/api/clients");
  EXPECT_EQ(PathOf("?a=1"), "");
  EXPECT_EQ(PathOf(""), "");
}

TEST(AdminQueryTest, QueryParamDecodesPercentEscapesAndPlus) {
  const std::string target = "/api/clients?client_id=dev%2F1%20a+b&username=%e2%82%ac&address=127.0.0.1";
  EXPECT_EQ(QueryParam(target, "client_id"), "dev/1 a b");
  EXPECT_EQ(QueryParam(target, "username"), "\xe2\x82\xac");  // lower-case hex too
  EXPECT_EQ(QueryParam(target, "address"), "127.0.0.1");
  EXPECT_EQ(QueryParam(target, "x"), std::nullopt);
  EXPECT_EQ(QueryParam("/api/clients", "client_id"), std::nullopt);
  EXPECT_EQ(QueryParam("/api/clients?client_id=%2B", "client_id"), "+");
  // The name is decoded as well.
  EXPECT_EQ(QueryParam("/api/x?client%5Fid=a", "client_id"), "a");
}

TEST(AdminQueryTest, QueryParamWithoutValueIsEmpty) {
  EXPECT_EQ(QueryParam("/api/sessions?connected", "connected"), "");
  EXPECT_EQ(QueryParam("/api/sessions?connected=", "connected"), "");
  // Only the first "=" splits: the rest belongs to the value.
  EXPECT_EQ(QueryParam("/api/x?filter=a=b", "filter"), "a=b");
}

TEST(AdminQueryTest, EmptyKeysAndEmptyPairsAreSkipped) {
  EXPECT_EQ(QueryParam("/api/x?&&=1&&limit=5&", "limit"), "5");
  EXPECT_EQ(QueryParam("/api/x?=1", "limit"), std::nullopt);
  auto page = ParsePage("/api/x?=7&&limit=5&");
  ASSERT_TRUE(page) << page.error();
  EXPECT_EQ(page->limit, 5u);
}

TEST(AdminQueryTest, RepeatedFilterTakesTheFirst) {
  EXPECT_EQ(QueryParam("/api/x?client_id=a&client_id=b", "client_id"), "a");
}

TEST(AdminQueryTest, MalformedEscapesAreKeptAsTheyAre) {
  EXPECT_EQ(QueryParam("/api/x?v=%", "v"), "%");
  EXPECT_EQ(QueryParam("/api/x?v=%4", "v"), "%4");
  EXPECT_EQ(QueryParam("/api/x?v=%G1", "v"), "%G1");
  EXPECT_EQ(QueryParam("/api/x?v=%1G", "v"), "%1G");
  EXPECT_EQ(QueryParam("/api/x?v=100%", "v"), "100%");
  EXPECT_EQ(QueryParam("/api/x?v=%%41", "v"), "%A");
  EXPECT_EQ(QueryParam("/api/x?v=%00", "v"), std::string(1, '\0'));
}

TEST(AdminQueryTest, PercentDecodeOfAPathKeepsPlus) {
  // A client id may hold "+": DELETE /api/clients/dev+1 kicks "dev+1".
  EXPECT_EQ(PercentDecode("dev+1"), "dev+1");
  EXPECT_EQ(PercentDecode("dev%201"), "dev 1");
  EXPECT_EQ(PercentDecode("a%2Fb"), "a/b");
  EXPECT_EQ(PercentDecode("%zz%"), "%zz%");
  EXPECT_EQ(PercentDecode(""), "");
}

TEST(AdminQueryTest, PageDefaultsAndBounds) {
  auto page = ParsePage("/api/clients");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->limit, Page::kDefaultLimit);
  EXPECT_EQ(page->offset, 0u);

  page = ParsePage("/api/clients?limit=1000&offset=9000");
  ASSERT_TRUE(page) << page.error();
  EXPECT_EQ(page->limit, 1000u);
  EXPECT_EQ(page->offset, 9000u);
  EXPECT_EQ(page->window(), Page::kMaxWindow);

  page = ParsePage("/api/clients?limit=%35");  // "5", escaped
  ASSERT_TRUE(page) << page.error();
  EXPECT_EQ(page->limit, 5u);
}

void ExpectPageError(const std::string& target, const std::string& error) {
  auto page = ParsePage(target);
  ASSERT_FALSE(page) << target << " gave limit " << page->limit << " offset " << page->offset;
  EXPECT_EQ(page.error(), error) << target;
}

TEST(AdminQueryTest, PageRefusesWhatIsNotANumber) {
  ExpectPageError("/api/x?limit=abc", "limit=abc is not a number");
  ExpectPageError("/api/x?limit=", "limit= is not a number");
  ExpectPageError("/api/x?limit", "limit= is not a number");
  ExpectPageError("/api/x?limit=-1", "limit=-1 is not a number");
  ExpectPageError("/api/x?limit=+5", "limit= 5 is not a number");  // "+" is a space
  ExpectPageError("/api/x?limit=%2B5", "limit=+5 is not a number");
  ExpectPageError("/api/x?limit=5x", "limit=5x is not a number");
  ExpectPageError("/api/x?limit=0x10", "limit=0x10 is not a number");
  ExpectPageError("/api/x?offset=1.5", "offset=1.5 is not a number");
  ExpectPageError("/api/x?limit=99999999999999999999999x", "limit=99999999999999999999999x is not a number");
}

TEST(AdminQueryTest, PageRefusesWhatIsOutOfBounds) {
  ExpectPageError("/api/x?limit=1001", "limit=1001 is over the maximum 1000");
  ExpectPageError("/api/x?offset=10001", "offset=10001 is over the maximum 10000");
  ExpectPageError("/api/x?limit=99999999999999999999999", "limit=99999999999999999999999 is over the maximum 1000");
  ExpectPageError("/api/x?limit=0", "limit=0: ask for at least one row");
  ExpectPageError("/api/x?offset=9999&limit=2", "offset + limit is over 10000: narrow the filter instead");
  ExpectPageError("/api/x?offset=10000", "offset + limit is over 10000: narrow the filter instead");
}

TEST(AdminQueryTest, PageRefusesARepeatedKey) {
  // Which of two would win is a guess the API does not make.
  ExpectPageError("/api/x?limit=5&limit=2000", "limit is given 2 times: give it once");
  ExpectPageError("/api/x?offset=1&limit=5&offset=2&offset=3", "offset is given 3 times: give it once");
  ExpectPageError("/api/x?limit=5&li%6Dit=6", "limit is given 2 times: give it once");
}

TEST(AdminQueryTest, ErrorsQuoteOutsideBytesAsPrintableAscii) {
  // A byte that is not UTF-8 once made nlohmann's dump throw and the node
  // terminate ("GET /api/clients?limit=%FF").
  auto page = ParsePage("/api/x?limit=%FF%0A%1B[2J");
  ASSERT_FALSE(page);
  EXPECT_EQ(page.error(), "limit=%FF%0A%1B[2J is not a number");
  const nlohmann::json body = {{"error", page.error()}};
  EXPECT_NO_THROW((void)body.dump());
}

TEST(AdminQueryTest, OverlongInputIsCutInTheError) {
  const std::string digits(5000, '7');
  auto page = ParsePage("/api/x?offset=" + digits);
  ASSERT_FALSE(page);
  EXPECT_EQ(page.error(), "offset=" + std::string(64, '7') + "... is over the maximum 10000");

  const std::string junk(100'000, 'z');
  page = ParsePage("/api/x?limit=" + junk);
  ASSERT_FALSE(page);
  EXPECT_EQ(page.error(), "limit=" + std::string(64, 'z') + "... is not a number");
  // A long query with the key at its end is still found.
  EXPECT_EQ(QueryParam("/api/x?" + std::string(100'000, '&') + "topic=t", "topic"), "t");
}

TEST(AdminQueryTest, PrintableEscapesControlAndHighBytes) {
  EXPECT_EQ(Printable("plain text 100%"), "plain text 100%");
  EXPECT_EQ(Printable(std::string("a\0b", 3)), "a%00b");
  EXPECT_EQ(Printable("\x7f\x80\xff"), "%7F%80%FF");
  EXPECT_EQ(Printable("abcdef", 3), "abc...");
  EXPECT_EQ(Printable("abc", 3), "abc");
}

TEST(AdminQueryTest, ContainsIsASubstringFilter) {
  EXPECT_TRUE(Contains("sensor-12", ""));
  EXPECT_TRUE(Contains("sensor-12", "or-1"));
  EXPECT_FALSE(Contains("sensor-12", "13"));
  EXPECT_FALSE(Contains("", "a"));
}

}  // namespace
}  // namespace estuary::server
