#include "io/uv/admin_token.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "io/uv/test_util.h"

namespace estuary::io {
namespace {

constexpr const char* kToken = "s3cret-token-0123456789";

class AdminTokenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/estuary-admin-token-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text, mode_t mode = 0600) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
    return path;
  }

  std::string dir_;
};

TEST_F(AdminTokenTest, ReadsTheFirstLineTrimmed) {
  auto token = ReadAdminTokenFile(Write("t", std::string("  ") + kToken + " \r\nignored\n"));
  ASSERT_TRUE(token.has_value()) << token.error();
  EXPECT_EQ(*token, kToken);
}

TEST_F(AdminTokenTest, RefusesEmptyShortAndWorldReadableFiles) {
  auto empty = ReadAdminTokenFile(Write("empty", "   \n"));
  ASSERT_FALSE(empty.has_value());
  EXPECT_NE(empty.error().find("no token"), std::string::npos) << empty.error();
  auto short_one = ReadAdminTokenFile(Write("short", "abc\n"));
  ASSERT_FALSE(short_one.has_value());
  EXPECT_NE(short_one.error().find("shorter than 16"), std::string::npos) << short_one.error();
  auto open = ReadAdminTokenFile(Write("open", std::string(kToken) + "\n", 0644));
  ASSERT_FALSE(open.has_value());
  EXPECT_NE(open.error().find("chmod 600"), std::string::npos) << open.error();
  EXPECT_TRUE(ReadAdminTokenFile(Write("group", std::string(kToken) + "\n", 0640)).has_value());
  EXPECT_FALSE(ReadAdminTokenFile(dir_ + "/missing").has_value());
}

TEST_F(AdminTokenTest, ChecksBearerAndLetsHealthzThrough) {
  auto token = AdminToken::Load(Write("t", std::string(kToken) + "\n"));
  ASSERT_TRUE(token.has_value()) << token.error();
  AdminToken& gate = **token;
  EXPECT_FALSE(gate.Check("GET", "/metrics", std::string("Bearer ") + kToken).has_value());
  EXPECT_FALSE(gate.Check("POST", "/api/drain", std::string("bearer ") + kToken).has_value());
  EXPECT_FALSE(gate.Check("GET", "/healthz", "").has_value());
  EXPECT_FALSE(gate.Check("HEAD", "/healthz?verbose", "").has_value());
  EXPECT_EQ(gate.refused(), 0u);

  for (const std::string& wrong : {std::string(), std::string("Bearer ") + kToken + "x",
                                   std::string("Bearer ") + std::string(kToken).substr(1), std::string("Basic abc"),
                                   std::string(kToken), std::string("Bearer ")}) {
    auto refused = gate.Check("GET", "/api/load", wrong);
    ASSERT_TRUE(refused.has_value()) << wrong;
    EXPECT_EQ(refused->status, 401);
    EXPECT_EQ(refused->content_type, "application/json");
    EXPECT_NE(refused->body.find("\"error\":\"unauthorized\""), std::string::npos);
    ASSERT_EQ(refused->headers.size(), 1u);
    EXPECT_EQ(refused->headers[0].first, "WWW-Authenticate");
    EXPECT_EQ(refused->headers[0].second.rfind("Bearer", 0), 0u);
  }
  EXPECT_EQ(gate.refused(), 6u);
  // A POST to /healthz is not a probe.
  EXPECT_TRUE(gate.Check("POST", "/healthz", "").has_value());
}

TEST_F(AdminTokenTest, ReloadSwapsTheTokenAndKeepsItOnFailure) {
  const std::string path = Write("t", std::string(kToken) + "\n");
  auto token = AdminToken::Load(path);
  ASSERT_TRUE(token.has_value());
  Write("t", "another-token-abcdefghij\n");
  ASSERT_TRUE((*token)->Reload().has_value());
  EXPECT_FALSE((*token)->Accepts(std::string("Bearer ") + kToken));
  EXPECT_TRUE((*token)->Accepts("Bearer another-token-abcdefghij"));
  Write("t", "\n");
  EXPECT_FALSE((*token)->Reload().has_value());
  EXPECT_TRUE((*token)->Accepts("Bearer another-token-abcdefghij"));
}

TEST(AdminTokenLoopback, NamesLoopbackHosts) {
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("127.1.2.3"));
  EXPECT_TRUE(IsLoopbackHost("localhost"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_FALSE(IsLoopbackHost("0.0.0.0"));
  EXPECT_FALSE(IsLoopbackHost("10.0.0.1"));
  EXPECT_FALSE(IsLoopbackHost("::"));
  EXPECT_FALSE(IsLoopbackHost("example.com"));
}

// Over a real socket: the gate answers before the handler, with the header.
TEST_F(AdminTokenTest, HttpServerSendsTheGatesAnswer) {
  auto token = AdminToken::Load(Write("t", std::string(kToken) + "\n"));
  ASSERT_TRUE(token.has_value());
  UvLoop loop;
  int handled = 0;
  auto server = HttpServer::Start(loop, {"127.0.0.1", 0}, [&](const std::string&, const std::string&) {
    ++handled;
    return HttpResponse{200, "text/plain; charset=utf-8", "fine\n"};
  });
  ASSERT_TRUE(server.has_value());
  AdminToken* gate = token->get();
  (*server)->set_gate([gate](std::string_view method, std::string_view path, std::string_view authorization) {
    return gate->Check(method, path, authorization);
  });
  auto ask = [&](const std::string& request) {
    std::string reply;
    std::atomic<bool> done{false};
    std::thread client([&, port = (*server)->port()] {
      testing::BlockingClient socket(port);
      socket.SendAll(request);
      reply = socket.ReadToEnd();
      done = true;
      loop.mailbox().Send([] {});
    });
    EXPECT_TRUE(testing::RunUntil(loop, [&] { return done.load(); }));
    client.join();
    return reply;
  };
  std::string refused = ask("GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(refused.rfind("HTTP/1.1 401 Unauthorized\r\n", 0), 0u) << refused;
  EXPECT_NE(refused.find("\r\nWWW-Authenticate: Bearer realm=\"estuary\"\r\n"), std::string::npos) << refused;
  EXPECT_EQ(handled, 0);
  std::string allowed =
      ask(std::string("GET /metrics HTTP/1.1\r\nAuthorization: Bearer ") + kToken + "\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(allowed.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << allowed;
  std::string probe = ask("GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(probe.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << probe;
  EXPECT_EQ(handled, 2);
  std::string twice = ask(std::string("GET /metrics HTTP/1.1\r\nAuthorization: Bearer ") + kToken +
                          "\r\nAuthorization: Bearer x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(twice.rfind("HTTP/1.1 400", 0), 0u) << twice;
  EXPECT_EQ(gate->refused(), 1u);
}

}  // namespace
}  // namespace estuary::io
