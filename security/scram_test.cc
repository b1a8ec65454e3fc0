#include "security/scram.h"

#include <gtest/gtest.h>

#include "security/password_file.h"
#include "security/password_store.h"

namespace estuary::security {
namespace {

// RFC 7677 section 3: user "user", password "pencil".
constexpr const char* kClientFirst = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
constexpr const char* kServerNonce = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
constexpr const char* kServerFirst =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
constexpr const char* kClientFinal =
    "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
constexpr const char* kServerFinal = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

ScramCredential PencilCredential() {
  return DeriveScramCredential("pencil", *Base64Decode("W22ZaJ0SNY7soEsUEjb6gQ=="), 4096);
}

ScramServer PencilServer() {
  return ScramServer(
      [](std::string_view user) -> std::optional<ScramCredential> {
        if (user != "user") return std::nullopt;
        return PencilCredential();
      },
      kServerNonce, "unknown-user-key");
}

TEST(Scram, Rfc7677TestVector) {
  ScramServer server = PencilServer();
  const ScramStep first = server.Receive(kClientFirst);
  ASSERT_EQ(first.kind, ScramStep::Kind::kContinue);
  EXPECT_EQ(first.message, kServerFirst);
  const ScramStep final_step = server.Receive(kClientFinal);
  ASSERT_EQ(final_step.kind, ScramStep::Kind::kSucceeded);
  EXPECT_EQ(final_step.message, kServerFinal);
  EXPECT_EQ(server.user(), "user");
  EXPECT_TRUE(server.done());
  // Nothing is accepted after the end.
  EXPECT_EQ(server.Receive(kClientFinal).kind, ScramStep::Kind::kFailed);
}

TEST(Scram, WrongProofIsInvalidProof) {
  ScramServer server = PencilServer();
  ASSERT_EQ(server.Receive(kClientFirst).kind, ScramStep::Kind::kContinue);
  std::string wrong = kClientFinal;
  wrong[wrong.size() - 3] = wrong[wrong.size() - 3] == 'A' ? 'B' : 'A';  // one proof bit off
  const ScramStep step = server.Receive(wrong);
  EXPECT_EQ(step.kind, ScramStep::Kind::kFailed);
  EXPECT_EQ(step.message, "e=invalid-proof");
  EXPECT_EQ(step.error, ScramError::kInvalidProof);
  EXPECT_FALSE(step.unknown_user);
}

TEST(Scram, UnknownUserGetsAStableFakeSaltAndFailsAtTheProof) {
  ScramServer a = PencilServer();
  ScramServer b = PencilServer();
  const ScramStep first_a = a.Receive("n,,n=mallory,r=abc");
  const ScramStep first_b = b.Receive("n,,n=mallory,r=abc");
  ASSERT_EQ(first_a.kind, ScramStep::Kind::kContinue);
  EXPECT_EQ(first_a.message, first_b.message);  // the same salt every time
  EXPECT_NE(first_a.message.find(",i=4096"), std::string::npos);
  const std::string nonce = "abc" + std::string(kServerNonce);
  const ScramStep step = a.Receive("c=biws,r=" + nonce + ",p=" + Base64Encode(std::string(32, 'x')));
  EXPECT_EQ(step.message, "e=invalid-proof");
  EXPECT_TRUE(step.unknown_user);
}

TEST(Scram, ChannelBindingRefusedAndChecked) {
  ScramServer plus = PencilServer();
  const ScramStep step = plus.Receive("p=tls-unique,,n=user,r=abc");
  EXPECT_EQ(step.kind, ScramStep::Kind::kFailed);
  EXPECT_EQ(step.error, ScramError::kChannelBindingNotSupported);
  EXPECT_TRUE(step.message.empty());

  // "y": the client could bind but thinks we cannot; c= must then be "y,,".
  ScramServer yes = PencilServer();
  ASSERT_EQ(yes.Receive("y,,n=user,r=abc").kind, ScramStep::Kind::kContinue);
  const ScramStep mismatch = yes.Receive("c=biws,r=abc" + std::string(kServerNonce) + ",p=AAAA");
  EXPECT_EQ(mismatch.message, "e=channel-bindings-dont-match");
}

TEST(Scram, NonceMustBeTheCombinedOne) {
  ScramServer server = PencilServer();
  ASSERT_EQ(server.Receive(kClientFirst).kind, ScramStep::Kind::kContinue);
  const ScramStep step = server.Receive("c=biws,r=rOprNGfwEbeRWgbNEkqO,p=AAAA");
  EXPECT_EQ(step.error, ScramError::kNonceMismatch);
  EXPECT_EQ(step.message, "e=other-error");
}

TEST(Scram, ParsesClientFirst) {
  auto first = ParseScramClientFirst("n,a=bo=2Cb,n=bo=2Cb=3Dc,r=xyz,ext=1");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->gs2_header, "n,a=bo=2Cb,");
  EXPECT_EQ(first->authzid, "bo,b");
  EXPECT_EQ(first->user, "bo,b=c");
  EXPECT_EQ(first->nonce, "xyz");
  EXPECT_EQ(first->bare, "n=bo=2Cb=3Dc,r=xyz,ext=1");
  EXPECT_EQ(ParseScramClientFirst("n,,m=x,n=u,r=a").error(), ScramError::kExtensionsNotSupported);
  EXPECT_EQ(ParseScramClientFirst("n,,n=a=2Xb,r=a").error(), ScramError::kInvalidUsernameEncoding);
  EXPECT_EQ(ParseScramClientFirst("n,,n=a=,r=a").error(), ScramError::kInvalidUsernameEncoding);
  for (const char* bad : {"", "n", "n,", "n,,", "x,,n=u,r=a", "n,,n=,r=a", "n,,n=u", "n,,n=u,r=", "n,,r=a,n=u",
                          "n,b=x,n=u,r=a", "n,,n=u,r=a b"}) {
    EXPECT_FALSE(ParseScramClientFirst(bad).has_value()) << bad;
  }
  EXPECT_FALSE(ParseScramClientFirst("n,,n=u,r=" + std::string(kScramMaxMessage, 'a')).has_value());
}

TEST(Scram, ParsesClientFinal) {
  auto final_message = ParseScramClientFinal(kClientFinal);
  ASSERT_TRUE(final_message.has_value());
  EXPECT_EQ(final_message->channel_binding, "n,,");
  EXPECT_EQ(final_message->proof.size(), 32u);
  EXPECT_EQ(final_message->without_proof, "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0");
  for (const char* bad :
       {"", "c=biws", "c=biws,r=a", "c=biws,r=a,p=", "c=b!ws,r=a,p=AAAA", "r=a,c=biws,p=AAAA", "c=biws,r=a,p=AAA"}) {
    EXPECT_FALSE(ParseScramClientFinal(bad).has_value()) << bad;
  }
}

TEST(Scram, EscapesNames) {
  EXPECT_EQ(EscapeScramName("a,b=c"), "a=2Cb=3Dc");
  EXPECT_EQ(UnescapeScramName(EscapeScramName("a,b=c==,")), "a,b=c==,");
  EXPECT_FALSE(UnescapeScramName("a,b").has_value());
}

TEST(Scram, NoncesAreFreshAndPrintable) {
  const std::string a = MakeScramNonce();
  EXPECT_EQ(a.size(), 24u);
  EXPECT_NE(a, MakeScramNonce());
  EXPECT_EQ(a.find(','), std::string::npos);
}

TEST(ScramPasswordFile, EntryRoundTripsAndServesPlainAndScram) {
  const PasswordHash hash = HashPasswordScram("pencil");
  EXPECT_EQ(hash.kind, HashKind::kScramSha256);
  EXPECT_EQ(hash.iterations, 4096u);
  EXPECT_EQ(hash.salt.size(), kScramSaltBytes);
  const std::string line = FormatPasswordHash(hash);
  EXPECT_EQ(line.rfind("SCRAM-SHA-256$4096:", 0), 0u);
  auto table = ParsePasswordFile("alice:" + line + "\n", "users");
  ASSERT_TRUE(table.has_value()) << table.error();
  const PasswordHash& parsed = table->at("alice");
  EXPECT_EQ(parsed.hash, hash.hash);
  EXPECT_EQ(parsed.server_key, hash.server_key);
  EXPECT_TRUE(VerifyPassword(parsed, "pencil"));
  EXPECT_FALSE(VerifyPassword(parsed, "pencil "));

  PasswordStore store(std::move(*table));
  EXPECT_EQ(store.Check("alice", "pencil"), PasswordCheck::kAccepted);
  EXPECT_EQ(store.Check("alice", "wrong"), PasswordCheck::kWrongPassword);
  auto credential = store.ScramCredentialFor("alice");
  ASSERT_TRUE(credential.has_value());
  EXPECT_EQ(credential->stored_key, hash.hash);
  EXPECT_FALSE(store.ScramCredentialFor("bob").has_value());
}

TEST(ScramPasswordFile, TheRfcVectorsKeysInPostgresLayout) {
  const ScramCredential credential = PencilCredential();
  const std::string field = "SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$" + Base64Encode(credential.stored_key) + ":" +
                            Base64Encode(credential.server_key);
  auto hash = ParsePasswordHash(field);
  ASSERT_TRUE(hash.has_value()) << hash.error();
  EXPECT_EQ(FormatPasswordHash(*hash), field);
  EXPECT_TRUE(VerifyPassword(*hash, "pencil"));
}

TEST(ScramPasswordFile, MalformedEntriesNameTheProblem) {
  const std::string keys = Base64Encode(std::string(32, 'k'));
  const struct {
    std::string field;
    const char* error;
  } cases[] = {
      {"SCRAM-SHA-256$", "has the form"},
      {"SCRAM-SHA-256$4096:c2FsdA==$" + keys, "has the form"},
      {"SCRAM-SHA-256$0:c2FsdA==$" + keys + ":" + keys, "iterations"},
      {"SCRAM-SHA-256$4096x:c2FsdA==$" + keys + ":" + keys, "iterations"},
      {"SCRAM-SHA-256$4096:$" + keys + ":" + keys, "salt"},
      {"SCRAM-SHA-256$4096:c2FsdA==$c2FsdA==:" + keys, "StoredKey"},
      {"SCRAM-SHA-256$4096:c2FsdA==$" + keys + ":!!!!", "ServerKey"},
      {"pencil", "clear-text"},
  };
  for (const auto& c : cases) {
    auto hash = ParsePasswordHash(c.field);
    ASSERT_FALSE(hash.has_value()) << c.field;
    EXPECT_NE(hash.error().find(c.error), std::string::npos) << c.field << ": " << hash.error();
  }
  auto file = ParsePasswordFile("a:" + cases[2].field + "\n", "users");
  ASSERT_FALSE(file.has_value());
  EXPECT_EQ(file.error().rfind("users:1:", 0), 0u) << file.error();
}

}  // namespace
}  // namespace estuary::security
