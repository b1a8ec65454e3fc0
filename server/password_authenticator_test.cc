#include "server/password_authenticator.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "io/clock.h"
#include "security/password_file.h"
#include "server/acl_authorizer.h"
#include "server/connection_guard.h"

namespace estuary::server {
namespace {

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name + "-" + std::to_string(::getpid());
  std::ofstream(path) << text;
  return path;
}

core::Credentials User(std::optional<std::string> user, std::optional<std::string> password) {
  return core::Credentials{"client", std::move(user), std::move(password), "127.0.0.1:1"};
}

std::string Line(const std::string& user, const std::string& password) {
  return user + ":" + security::FormatPasswordHash(security::HashPassword(password)) + "\n";
}

TEST(PasswordFileAuthenticator, AcceptsListedUsersWithTheirPasswords) {
  auto loaded = PasswordFileAuthenticator::Load(
      WriteFile("users", "# comment\n" + Line("alice", "wonder:land") + "\n" + Line("bob", "")));
  ASSERT_TRUE(loaded.has_value()) << loaded.error();
  auto& authenticator = **loaded;
  EXPECT_EQ(authenticator.Authenticate(User("alice", "wonder:land")), core::AuthDecision::kAllow);
  EXPECT_EQ(authenticator.Authenticate(User("bob", "")), core::AuthDecision::kAllow);
  EXPECT_EQ(authenticator.Authenticate(User("alice", "wonder")), core::AuthDecision::kBadCredentials);
  EXPECT_EQ(authenticator.Authenticate(User("alice", std::nullopt)), core::AuthDecision::kBadCredentials);
  EXPECT_EQ(authenticator.Authenticate(User("carol", "x")), core::AuthDecision::kBadCredentials);
  EXPECT_EQ(authenticator.Authenticate(User(std::nullopt, std::nullopt)), core::AuthDecision::kNotAuthorized);
}

// SCRAM-SHA-256 lines: a password still logs in (PLAIN); the exchange is
// offered, a wrong proof fails with e=invalid-proof, and the abuse guard
// counts it. (The RFC 7677 exchange itself: security/scram_test.cc; a whole
// exchange with a real client: conformance/security/scram_process.py.)
TEST(PasswordFileAuthenticator, ScramLinesServePasswordsAndExchanges) {
  auto loaded = PasswordFileAuthenticator::Load(WriteFile(
      "scram-users", "sam:" + security::FormatPasswordHash(security::HashPasswordScram("pencil")) + "\n" +
                         Line("alice", "wonderland")));
  ASSERT_TRUE(loaded.has_value()) << loaded.error();
  auto& authenticator = **loaded;
  EXPECT_EQ(authenticator.Authenticate(User("sam", "pencil")), core::AuthDecision::kAllow);
  EXPECT_EQ(authenticator.Authenticate(User("sam", "crayon")), core::AuthDecision::kBadCredentials);
  EXPECT_EQ(authenticator.ExchangeMechanisms(), std::vector<std::string>{"SCRAM-SHA-256"});
  EXPECT_EQ(authenticator.StartExchange("SCRAM-SHA-1", "127.0.0.1:1"), nullptr);

  io::ManualClock clock;
  ConnectionGuardSettings settings;
  settings.address.auth_backoff_ms = 1000;
  settings.address.auth_failures_before_backoff = 5;
  ConnectionGuard guard(settings, clock);
  GuardedAuthenticator guarded(authenticator, guard);
  for (const char* user : {"sam", "alice", "nobody"}) {
    auto exchange = guarded.StartExchange("SCRAM-SHA-256", "10.0.0.1:1");
    ASSERT_NE(exchange, nullptr);
    const core::AuthStep first = exchange->Respond("n,,n=" + std::string(user) + ",r=abc");
    ASSERT_EQ(first.kind, core::AuthStep::Kind::kContinue) << user;
    ASSERT_EQ(first.data.rfind("r=abc", 0), 0u) << first.data;
    const std::string nonce = first.data.substr(2, first.data.find(',') - 2);
    const core::AuthStep last =
        exchange->Respond("c=biws,r=" + nonce + ",p=" + security::Base64Encode(std::string(32, 'x')));
    EXPECT_EQ(last.kind, core::AuthStep::Kind::kFailed) << user;
    EXPECT_EQ(last.data, "e=invalid-proof");
    EXPECT_FALSE(last.why.empty());
  }
  EXPECT_EQ(guard.auth_failures(), 3u);
}

TEST(PasswordFileAuthenticator, NamesTheBadLine) {
  auto loaded = PasswordFileAuthenticator::Load(WriteFile("bad-users", Line("alice", "x") + "nocolon\n"));
  ASSERT_FALSE(loaded.has_value());
  EXPECT_NE(loaded.error().find(":2:"), std::string::npos) << loaded.error();
  auto clear = PasswordFileAuthenticator::Load(WriteFile("clear-users", "alice:x\n"));
  ASSERT_FALSE(clear.has_value());
  EXPECT_NE(clear.error().find(":1:"), std::string::npos) << clear.error();
  EXPECT_FALSE(PasswordFileAuthenticator::Load("/nonexistent/estuary-users").has_value());
}

TEST(AclAuthorizer, GivesEachClientItsRights) {
  auto loaded = AclAuthorizer::Load(WriteFile("acl", "topic read public/#\nuser alice\ntopic readwrite alice/#\n"));
  ASSERT_TRUE(loaded.has_value()) << loaded.error();
  auto anonymous = (*loaded)->ForClient({"c1", std::nullopt});
  auto alice = (*loaded)->ForClient({"c2", "alice"});
  EXPECT_TRUE(anonymous->MayReceive("public/x"));
  EXPECT_FALSE(anonymous->MayPublish("public/x"));
  EXPECT_FALSE(anonymous->MaySubscribe("alice/#"));
  EXPECT_TRUE(alice->MayPublish("alice/x"));
  EXPECT_TRUE(alice->MaySubscribe("alice/#"));
  EXPECT_FALSE(alice->MayReceive("public/x"));
}

}  // namespace
}  // namespace estuary::server
