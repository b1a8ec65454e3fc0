#include "security/acl_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "security/password_store.h"

namespace estuary::security {
namespace {

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "estuary-" + name + "-" + std::to_string(::getpid());
  std::ofstream(path) << text;
  return path;
}

TEST(AclStore, ClientsSeeAReloadAtTheirNextCheck) {
  const std::string path = WriteFile("acl", "topic read a/#\n");
  auto store = AclStore::Load(path);
  ASSERT_TRUE(store.has_value()) << store.error();
  AclClient client(**store, "c1", std::nullopt);
  EXPECT_TRUE(client.MayRead("a/x"));
  EXPECT_FALSE(client.MayWrite("a/x"));
  EXPECT_TRUE(client.MayRead("a/x"));  // cached
  std::ofstream(path) << "topic write a/#\n";
  ASSERT_TRUE((*store)->Reload(path).has_value());
  EXPECT_FALSE(client.MayRead("a/x"));
  EXPECT_TRUE(client.MayWrite("a/x"));
  EXPECT_FALSE(client.MaySubscribe("a/#"));
  // A file that fails to parse keeps the rules in force.
  std::ofstream(path) << "topic read a/#\ngarbage\n";
  auto failed = (*store)->Reload(path);
  ASSERT_FALSE(failed.has_value());
  EXPECT_NE(failed.error().find(":2:"), std::string::npos) << failed.error();
  EXPECT_TRUE(client.MayWrite("a/x"));
  std::remove(path.c_str());
}

TEST(AclStore, TheCacheStaysBounded) {
  const std::string path = WriteFile("acl-bounded", "topic read t/#\n");
  auto store = AclStore::Load(path);
  ASSERT_TRUE(store.has_value());
  AclClient client(**store, "c1", std::nullopt);
  for (size_t i = 0; i < 3 * AclClient::kMaxCachedTopics; ++i) {
    ASSERT_TRUE(client.MayRead("t/" + std::to_string(i)));
  }
  EXPECT_FALSE(client.MayRead("u/1"));
  std::remove(path.c_str());
}

TEST(PasswordStore, ReloadReplacesUsersAndKeepsThemOnAnError) {
  const std::string path = WriteFile("users", "alice:" + FormatPasswordHash(HashPassword("one")) + "\n");
  auto store = PasswordStore::Load(path);
  ASSERT_TRUE(store.has_value()) << store.error();
  EXPECT_EQ((*store)->Check("alice", "one"), PasswordCheck::kAccepted);
  std::ofstream(path) << "alice:" << FormatPasswordHash(HashPassword("two")) << "\n";
  ASSERT_TRUE((*store)->Reload(path).has_value());
  EXPECT_EQ((*store)->Check("alice", "one"), PasswordCheck::kWrongPassword);  // the cached success is gone
  EXPECT_EQ((*store)->Check("alice", "two"), PasswordCheck::kAccepted);
  std::ofstream(path) << "alice:clear\n";
  auto failed = (*store)->Reload(path);
  ASSERT_FALSE(failed.has_value());
  EXPECT_NE(failed.error().find(path + ":1:"), std::string::npos) << failed.error();
  EXPECT_EQ((*store)->Check("alice", "two"), PasswordCheck::kAccepted);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace estuary::security
