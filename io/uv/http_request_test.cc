#include "io/uv/http_request.h"

#include <gtest/gtest.h>

namespace estuary::io {
namespace {

using Status = HttpParseResult::Status;

TEST(HttpRequestTest, ParsesAGetWithHeaders) {
  std::string text = "GET /healthz?verbose=1 HTTP/1.1\r\nHost: localhost\r\nUser-Agent: probe\r\n\r\nNEXT";
  HttpParseResult parsed = ParseHttpRequest(text);
  ASSERT_EQ(parsed.status, Status::kComplete) << parsed.error;
  EXPECT_EQ(parsed.request.method, "GET");
  EXPECT_EQ(parsed.request.target, "/healthz?verbose=1");
  EXPECT_EQ(parsed.request.minor_version, 1);
  EXPECT_TRUE(parsed.request.keep_alive);
  EXPECT_EQ(parsed.request.consumed, text.size() - 4);
}

TEST(HttpRequestTest, NoHeadersAtAll) {
  HttpParseResult parsed = ParseHttpRequest("GET / HTTP/1.1\r\n\r\n");
  ASSERT_EQ(parsed.status, Status::kComplete) << parsed.error;
  EXPECT_EQ(parsed.request.target, "/");
}

TEST(HttpRequestTest, EveryPrefixIsIncomplete) {
  std::string text = "GET /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc";
  for (size_t size = 0; size < text.size(); ++size) {
    EXPECT_EQ(ParseHttpRequest(text.substr(0, size)).status, Status::kIncomplete) << size;
  }
  HttpParseResult parsed = ParseHttpRequest(text);
  ASSERT_EQ(parsed.status, Status::kComplete);
  EXPECT_EQ(parsed.request.consumed, text.size());
}

TEST(HttpRequestTest, ConnectionHeaderAndVersionDecideKeepAlive) {
  auto keep_alive = [](const std::string& text) {
    HttpParseResult parsed = ParseHttpRequest(text);
    EXPECT_EQ(parsed.status, Status::kComplete) << text << parsed.error;
    return parsed.request.keep_alive;
  };
  EXPECT_TRUE(keep_alive("GET / HTTP/1.1\r\n\r\n"));
  EXPECT_FALSE(keep_alive("GET / HTTP/1.1\r\nConnection: close\r\n\r\n"));
  EXPECT_FALSE(keep_alive("GET / HTTP/1.1\r\nconnection: Upgrade, CLOSE\r\n\r\n"));
  EXPECT_FALSE(keep_alive("GET / HTTP/1.0\r\n\r\n"));
  EXPECT_TRUE(keep_alive("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
}

TEST(HttpRequestTest, MalformedRequestsAreBad) {
  for (const char* text : {
           "garbage\r\n",
           "GET\r\n\r\n",
           "GET /\r\n\r\n",
           "GET  / HTTP/1.1\r\n\r\n",
           "GET / HTTP/2.0\r\n\r\n",
           "GET nopath HTTP/1.1\r\n\r\n",
           "G(T / HTTP/1.1\r\n\r\n",
           "GET / HTTP/1.1\r\nNoColon\r\n\r\n",
           "GET / HTTP/1.1\r\nName : value\r\n\r\n",
           "GET / HTTP/1.1\r\n folded: value\r\n\r\n",
           "GET / HTTP/1.1\r\nX: a\x01" "b\r\n\r\n",
           "GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n",
           "GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
           "GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
       }) {
    HttpParseResult parsed = ParseHttpRequest(text);
    EXPECT_EQ(parsed.status, Status::kBad) << text;
    EXPECT_FALSE(parsed.error.empty());
  }
}

TEST(HttpRequestTest, RequestsOverTheLimitAreBad) {
  std::string huge_header = "GET / HTTP/1.1\r\nX: " + std::string(9000, 'a');
  EXPECT_EQ(ParseHttpRequest(huge_header).status, Status::kBad);
  std::string no_line_end(kMaxHttpRequestBytes, 'G');
  EXPECT_EQ(ParseHttpRequest(no_line_end).status, Status::kBad);
  std::string big_body = "GET / HTTP/1.1\r\nContent-Length: 9000\r\n\r\n";
  EXPECT_EQ(ParseHttpRequest(big_body).status, Status::kBad);
  std::string just_fits = "GET / HTTP/1.1\r\nX: ";
  just_fits += std::string(kMaxHttpRequestBytes - just_fits.size() - 4, 'a') + "\r\n\r\n";
  ASSERT_EQ(just_fits.size(), kMaxHttpRequestBytes);
  EXPECT_EQ(ParseHttpRequest(just_fits).status, Status::kComplete);
}

}  // namespace
}  // namespace estuary::io
