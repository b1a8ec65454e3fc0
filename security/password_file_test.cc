#include "security/password_file.h"

#include <gtest/gtest.h>

#include <vector>

#include "security/password_store.h"

namespace estuary::security {
namespace {

// Written by Debian's mosquitto_passwd 2.0.11: `-b FILE alice wonderland`
// (the default, $7$ with 101 iterations) and `-H sha512 -b FILE bob builder`.
constexpr const char* kAlice =
    "alice:$7$101$3UQ6SBHegEFqvQdG$N1FHwVTB5u0lrS3H33Nh22+1dWMq8QonPUi83nc0SqvDEvbU78TLwf3JBRZorhoJv1EaGktrL8/"
    "R9P7kl6t6sQ==";
constexpr const char* kBob =
    "bob:$6$Qet5jXEcUbfJpTah$rMkfQXXt7N4q/Y8Sgvo55eHThxy857K/Ni1aeySwMOEdBBzdKAnQZk8bUyB68OHGaItVhehg62JpHdbXHV9cvg==";

PasswordTable Parse(const std::string& text) {
  auto table = ParsePasswordFile(text, "users");
  EXPECT_TRUE(table.has_value()) << table.error();
  return table ? *table : PasswordTable{};
}

TEST(PasswordFile, VerifiesMosquittoPasswdPbkdf2Hashes) {
  const PasswordTable table = Parse(std::string("# users\n\n") + kAlice + "\n");
  ASSERT_EQ(table.count("alice"), 1u);
  const PasswordHash& hash = table.at("alice");
  EXPECT_EQ(hash.kind, HashKind::kPbkdf2Sha512);
  EXPECT_EQ(hash.iterations, 101u);
  EXPECT_EQ(hash.salt.size(), 12u);
  EXPECT_TRUE(VerifyPassword(hash, "wonderland"));
  EXPECT_FALSE(VerifyPassword(hash, "wonderlanD"));
  EXPECT_FALSE(VerifyPassword(hash, ""));
}

TEST(PasswordFile, VerifiesMosquittoPasswdSha512Hashes) {
  const PasswordTable table = Parse(std::string(kBob) + "\r\n");
  const PasswordHash& hash = table.at("bob");
  EXPECT_EQ(hash.kind, HashKind::kSha512);
  EXPECT_TRUE(VerifyPassword(hash, "builder"));
  EXPECT_FALSE(VerifyPassword(hash, "builder "));
}

TEST(PasswordFile, FormatsWhatItParses) {
  const PasswordTable table = Parse(std::string(kAlice) + "\n" + kBob + "\n");
  EXPECT_EQ("alice:" + FormatPasswordHash(table.at("alice")), kAlice);
  EXPECT_EQ("bob:" + FormatPasswordHash(table.at("bob")), kBob);
}

TEST(PasswordFile, NewHashesVerifyAndUseFreshSalts) {
  const PasswordHash one = HashPassword("s3cret");
  const PasswordHash two = HashPassword("s3cret");
  EXPECT_EQ(one.iterations, kMosquittoIterations);
  EXPECT_NE(one.salt, two.salt);
  EXPECT_TRUE(VerifyPassword(one, "s3cret"));
  EXPECT_FALSE(VerifyPassword(one, "s3cret!"));
  auto reparsed = ParsePasswordHash(FormatPasswordHash(one));
  ASSERT_TRUE(reparsed.has_value()) << reparsed.error();
  EXPECT_TRUE(VerifyPassword(*reparsed, "s3cret"));
}

TEST(PasswordFile, RefusesClearTextNamingFileAndLine) {
  auto table = ParsePasswordFile(std::string(kAlice) + "\n# x\ncarol:secret\n", "/etc/estuary/users");
  ASSERT_FALSE(table.has_value());
  EXPECT_NE(table.error().find("/etc/estuary/users:3:"), std::string::npos) << table.error();
  EXPECT_NE(table.error().find("carol"), std::string::npos) << table.error();
  EXPECT_NE(table.error().find("clear-text"), std::string::npos) << table.error();
}

TEST(PasswordFile, RefusesMalformedHashes) {
  const std::string good_salt = "3UQ6SBHegEFqvQdG";
  const std::string good_hash =
      "N1FHwVTB5u0lrS3H33Nh22+1dWMq8QonPUi83nc0SqvDEvbU78TLwf3JBRZorhoJv1EaGktrL8/R9P7kl6t6sQ==";
  for (const std::string& field : {
           "$7$0$" + good_salt + "$" + good_hash,           // no iterations
           "$7$abc$" + good_salt + "$" + good_hash,         // not a number
           "$7$99999999999$" + good_salt + "$" + good_hash,  // too many
           "$7$101$" + good_salt + "$" + good_hash.substr(4),  // short hash
           "$7$101$" + good_salt + "!$" + good_hash,        // not base64
           "$7$101$$" + good_hash,                          // empty salt
           "$6$" + good_salt,                               // no hash
           "$5$" + good_salt + "$" + good_hash,             // unknown kind
           "$7$101$" + good_salt + "$" + good_hash + "$",   // extra field
       }) {
    EXPECT_FALSE(ParsePasswordHash(field).has_value()) << field;
  }
  EXPECT_FALSE(ParsePasswordFile("nocolon\n", "f").has_value());
  EXPECT_FALSE(ParsePasswordFile(std::string(kAlice) + "\n" + kAlice + "\n", "f").has_value());  // twice
  EXPECT_FALSE(ParsePasswordFile(":$6$x$y\n", "f").has_value());
  EXPECT_FALSE(LoadPasswordFile("/nonexistent/estuary-users").has_value());
}

TEST(PasswordFile, SetPasswordLineReplacesOrAppends) {
  const PasswordHash hash = HashPassword("new");
  const std::string text = std::string("# keep me\n") + kAlice + "\n" + kBob + "\n";
  const std::string replaced = SetPasswordLine(text, "alice", hash);
  EXPECT_EQ(replaced, "# keep me\nalice:" + FormatPasswordHash(hash) + "\n" + kBob + "\n");
  const std::string appended = SetPasswordLine("# only a comment", "dave", hash);
  EXPECT_EQ(appended, "# only a comment\ndave:" + FormatPasswordHash(hash) + "\n");
  EXPECT_TRUE(VerifyPassword(Parse(replaced).at("alice"), "new"));
}

TEST(PasswordFile, Base64RoundTrips) {
  for (const std::string& bytes : std::vector<std::string>{"", "a", "ab", "abc", "abcd", std::string("\0\xff\x10", 3)}) {
    auto decoded = Base64Decode(Base64Encode(bytes));
    ASSERT_TRUE(decoded.has_value());
    EXPECT_EQ(*decoded, bytes);
  }
  EXPECT_FALSE(Base64Decode("abc").has_value());
  EXPECT_FALSE(Base64Decode("ab=c").has_value());
}

TEST(PasswordStore, ChecksAndRemembersOnlySuccesses) {
  PasswordStore store(Parse(std::string(kAlice) + "\n" + kBob + "\n"));
  EXPECT_EQ(store.Check("alice", "wonderland"), PasswordCheck::kAccepted);
  EXPECT_EQ(store.cached_count(), 1u);
  EXPECT_EQ(store.Check("alice", "wonderland"), PasswordCheck::kAccepted);  // from the cache
  EXPECT_EQ(store.Check("alice", "queen"), PasswordCheck::kWrongPassword);
  EXPECT_EQ(store.Check("bob", "wonderland"), PasswordCheck::kWrongPassword);
  EXPECT_EQ(store.Check("carol", "wonderland"), PasswordCheck::kUnknownUser);
  EXPECT_EQ(store.cached_count(), 1u);
}

}  // namespace
}  // namespace estuary::security
