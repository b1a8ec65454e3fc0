#include "server/password_authenticator.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

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

TEST(PasswordFileAuthenticator, AcceptsListedUsersWithTheirPasswords) {
  auto loaded = PasswordFileAuthenticator::Load(WriteFile("users", "# comment\nalice:wonder:land\n\nbob:\r\n"));
  ASSERT_TRUE(loaded.has_value()) << loaded.error();
  auto& authenticator = **loaded;
  EXPECT_EQ(authenticator.Authenticate(User("alice", "wonder:land")), core::AuthDecision::kAllow);
  EXPECT_EQ(authenticator.Authenticate(User("bob", "")), core::AuthDecision::kAllow);
  EXPECT_EQ(authenticator.Authenticate(User("alice", "wonder")), core::AuthDecision::kBadCredentials);
  EXPECT_EQ(authenticator.Authenticate(User("alice", std::nullopt)), core::AuthDecision::kBadCredentials);
  EXPECT_EQ(authenticator.Authenticate(User("carol", "x")), core::AuthDecision::kBadCredentials);
  EXPECT_EQ(authenticator.Authenticate(User(std::nullopt, std::nullopt)), core::AuthDecision::kNotAuthorized);
}

TEST(PasswordFileAuthenticator, NamesTheBadLine) {
  auto loaded = PasswordFileAuthenticator::Load(WriteFile("bad-users", "alice:x\nnocolon\n"));
  ASSERT_FALSE(loaded.has_value());
  EXPECT_NE(loaded.error().find(":2:"), std::string::npos) << loaded.error();
  EXPECT_FALSE(PasswordFileAuthenticator::Load("/nonexistent/estuary-users").has_value());
}

}  // namespace
}  // namespace estuary::server
