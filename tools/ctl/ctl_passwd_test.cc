#include "tools/ctl/ctl_passwd.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "security/password_file.h"
#include "security/text_file.h"

namespace estuary::ctl {
namespace {

class PasswdTest : public ::testing::Test {
 protected:
  void TearDown() override { std::remove(file_.c_str()); }
  int Run(const std::string& user, const std::string& stdin_text, bool scram = false) {
    std::istringstream in(stdin_text);
    std::ostringstream out;
    err_.str("");
    return RunPasswd({file_, user, scram ? 0u : 101u, scram}, in, /*terminal=*/false, out, err_);
  }
  security::PasswordTable Table() {
    auto table = security::LoadPasswordFile(file_);
    EXPECT_TRUE(table.has_value()) << table.error();
    return table ? *table : security::PasswordTable{};
  }
  std::string file_ = ::testing::TempDir() + "estuary-ctl-passwd-" + std::to_string(::getpid());
  std::ostringstream err_;
};

TEST_F(PasswdTest, CreatesAddsAndReplacesUsersFromStdin) {
  ASSERT_EQ(Run("alice", "first\n"), 0) << err_.str();
  struct stat info{};
  ASSERT_EQ(::stat(file_.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  ASSERT_EQ(Run("bob", "other\r\n"), 0) << err_.str();
  ASSERT_EQ(Run("alice", "second\n"), 0) << err_.str();
  const auto table = Table();
  ASSERT_EQ(table.size(), 2u);
  EXPECT_TRUE(security::VerifyPassword(table.at("alice"), "second"));
  EXPECT_FALSE(security::VerifyPassword(table.at("alice"), "first"));
  EXPECT_TRUE(security::VerifyPassword(table.at("bob"), "other"));
}

TEST_F(PasswdTest, RefusesBadUsersEmptyInputAndFilesEstuarydWouldRefuse) {
  EXPECT_EQ(Run("a:b", "x\n"), 1);
  EXPECT_EQ(Run("alice", ""), 1);
  EXPECT_NE(err_.str().find("stdin"), std::string::npos) << err_.str();
  std::ofstream(file_) << "# keep\ncarol:clear-text\n";
  EXPECT_EQ(Run("alice", "x\n"), 1);
  EXPECT_NE(err_.str().find(":2:"), std::string::npos) << err_.str();
  EXPECT_EQ(*security::ReadTextFile(file_), "# keep\ncarol:clear-text\n");  // untouched
}

TEST_F(PasswdTest, ScramWritesSaltIterationsAndKeysBesideMosquittoLines) {
  ASSERT_EQ(Run("alice", "first\n"), 0) << err_.str();
  ASSERT_EQ(Run("sam", "pencil\n", /*scram=*/true), 0) << err_.str();
  const auto text = *security::ReadTextFile(file_);
  EXPECT_NE(text.find("sam:SCRAM-SHA-256$4096:"), std::string::npos) << text;
  EXPECT_NE(text.find("alice:$7$101$"), std::string::npos) << text;
  const auto table = Table();
  const security::PasswordHash& sam = table.at("sam");
  EXPECT_EQ(sam.kind, security::HashKind::kScramSha256);
  EXPECT_EQ(sam.iterations, 4096u);
  EXPECT_TRUE(security::VerifyPassword(sam, "pencil"));
  // Back to $7$: the line is replaced, not duplicated.
  ASSERT_EQ(Run("sam", "pencil\n"), 0) << err_.str();
  EXPECT_EQ(Table().at("sam").kind, security::HashKind::kPbkdf2Sha512);
}

}  // namespace
}  // namespace estuary::ctl
