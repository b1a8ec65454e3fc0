#pragma once
// SCRAM-SHA-256 (RFC 5802, RFC 7677), the server side, as a pure state
// machine: no socket, no clock, no randomness of its own (the server nonce
// is handed in). The transport (AMQP SASL challenge/response, MQTT 5 AUTH)
// carries the messages; ScramServer only reads and writes them:
//
//   client-first  "n,,n=USER,r=CNONCE"          -> server-first "r=CNONCE+SNONCE,s=SALT,i=N"
//   client-final  "c=biws,r=CNONCE+SNONCE,p=PROOF" -> server-final "v=SIGNATURE"
//
// Channel binding: only "n" and "y" (the client does not bind; the server
// offers no -PLUS mechanism); "p=..." is refused (channel-binding-not-
// supported). No SASLprep: user names and passwords are compared as the
// UTF-8 bytes the client sends (docs/security.md says so). A user the
// lookup does not know gets a fake salt derived from `unknown_user_key`
// and fails at the proof, as a wrong password does, so the exchange does
// not tell which users exist.
//
// The crypto is OpenSSL's (PKCS5_PBKDF2_HMAC, HMAC, SHA256, CRYPTO_memcmp).
// A ScramServer belongs to one exchange on one thread; the free functions
// are pure.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "base/expected.h"

namespace estuary::security {

inline constexpr std::string_view kScramMechanism = "SCRAM-SHA-256";
// RFC 7677 section 4: at least 4096 iterations.
inline constexpr uint32_t kScramIterations = 4096;
inline constexpr size_t kScramSaltBytes = 16;
inline constexpr size_t kScramKeyBytes = 32;  // SHA-256
// Bounds that keep one exchange cheap to hold and to parse.
inline constexpr size_t kScramMaxMessage = 4096;
inline constexpr uint32_t kScramMaxIterations = 10'000'000;

// What a password file holds for a SCRAM user (password_file.h).
struct ScramCredential {
  uint32_t iterations = kScramIterations;
  std::string salt;        // raw bytes
  std::string stored_key;  // H(HMAC(SaltedPassword, "Client Key")), 32 bytes
  std::string server_key;  // HMAC(SaltedPassword, "Server Key"), 32 bytes
};

// SaltedPassword = PBKDF2-HMAC-SHA256(password, salt, iterations) and the
// two keys derived from it.
ScramCredential DeriveScramCredential(std::string_view password, std::string_view salt, uint32_t iterations);

// The RFC 5802 section 7 server-error-value names, plus the cases the
// exchange itself refuses. ScramErrorName gives the wire name.
enum class ScramError : uint8_t {
  kInvalidEncoding,             // "invalid-encoding": a message that does not parse
  kExtensionsNotSupported,      // "extensions-not-supported": an m= extension
  kInvalidProof,                // "invalid-proof": wrong password (or unknown user)
  kChannelBindingsDontMatch,    // "channel-bindings-dont-match": c= is not the gs2 header
  kChannelBindingNotSupported,  // "channel-binding-not-supported": p= in the gs2 header
  kInvalidUsernameEncoding,     // "invalid-username-encoding": a bad =XX escape
  kNonceMismatch,               // "other-error": r= is not the nonce of server-first
  kUnexpectedMessage,           // "other-error": a message after the exchange ended
};
std::string_view ScramErrorName(ScramError error);

struct ScramClientFirst {
  std::string gs2_header;  // "n,," or "y,,", with the authzid when given: "n,a=NAME,"
  std::string authzid;     // unescaped; empty when not given
  std::string user;        // unescaped (=2C -> ',', =3D -> '=')
  std::string nonce;       // the client's
  std::string bare;        // client-first-message-bare, as sent
};
Expected<ScramClientFirst, ScramError> ParseScramClientFirst(std::string_view message);

struct ScramClientFinal {
  std::string channel_binding;  // c=, base64-decoded
  std::string nonce;            // r=
  std::string proof;            // p=, base64-decoded
  std::string without_proof;    // client-final-message-without-proof, as sent
};
Expected<ScramClientFinal, ScramError> ParseScramClientFinal(std::string_view message);

// saslname escaping (RFC 5802 section 5.1): ',' as =2C and '=' as =3D.
std::string EscapeScramName(std::string_view name);
std::optional<std::string> UnescapeScramName(std::string_view name);

// A fresh server nonce for one exchange: 18 RAND_bytes, base64 (no ',').
std::string MakeScramNonce();

struct ScramStep {
  enum class Kind : uint8_t { kContinue, kSucceeded, kFailed };
  Kind kind = Kind::kFailed;
  // To send: server-first (kContinue), server-final "v=..." (kSucceeded),
  // "e=NAME" after a client-final (kFailed; empty when the client-first
  // failed: there is no server-first to carry an error).
  std::string message;
  std::optional<ScramError> error;  // kFailed only
  bool unknown_user = false;        // kFailed: the lookup had no credential (for the log)
};

class ScramServer {
 public:
  // The credential of a user, or nullopt (unknown, or no SCRAM keys).
  using Lookup = std::function<std::optional<ScramCredential>(std::string_view user)>;

  // `server_nonce`: printable ASCII without ',' (MakeScramNonce in
  // production, a fixed string in tests). `unknown_user_key`: a secret
  // from which unknown users' fake salts are derived (stable per user).
  ScramServer(Lookup lookup, std::string server_nonce, std::string unknown_user_key);

  // The next client message: client-first, then client-final.
  ScramStep Receive(std::string_view message);

  // The authenticated user once Receive returned kSucceeded; the name the
  // client gave (for logs) otherwise.
  const std::string& user() const { return user_; }
  bool done() const { return state_ == State::kDone; }

 private:
  enum class State : uint8_t { kAwaitingFirst, kAwaitingFinal, kDone };
  ScramStep OnFirst(std::string_view message);
  ScramStep OnFinal(std::string_view message);
  ScramStep Failed(ScramError error, bool with_message);

  Lookup lookup_;
  std::string server_nonce_;
  std::string unknown_user_key_;
  State state_ = State::kAwaitingFirst;
  std::string user_;
  std::string gs2_header_;
  std::string nonce_;                // client + server
  std::string auth_message_prefix_;  // client-first-bare "," server-first ","
  ScramCredential credential_;
  bool known_user_ = false;
};

}  // namespace estuary::security
