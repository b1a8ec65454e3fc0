#pragma once
// Password files in the format Mosquitto's `mosquitto_passwd` writes, one
// `user:hash` a line ('#' starts a comment line, blank lines are skipped):
//   $7$ITERATIONS$SALT$HASH  PBKDF2-HMAC-SHA512, 64-byte hash (mosquitto 2's default)
//   $6$SALT$HASH             SHA-512 of password then salt (mosquitto 1.6 and earlier)
//   SCRAM-SHA-256$ITERATIONS:SALT$STOREDKEY:SERVERKEY
//                            SCRAM (RFC 5802/7677) keys from PBKDF2-HMAC-SHA256,
//                            PostgreSQL's layout; serves SCRAM-SHA-256 and PLAIN
// SALT and HASH are standard base64 with padding. A line whose password is
// not one of these (clear text) is refused with the file name and line.
// Pure functions and immutable values: any thread may use them at once.
// The crypto is OpenSSL's (PKCS5_PBKDF2_HMAC, EVP SHA-512, CRYPTO_memcmp).
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/expected.h"

namespace estuary::security {

enum class HashKind : uint8_t { kSha512, kPbkdf2Sha512, kScramSha256 };

struct PasswordHash {
  HashKind kind = HashKind::kPbkdf2Sha512;
  uint32_t iterations = 0;  // kPbkdf2Sha512 and kScramSha256
  std::string salt;         // raw bytes
  std::string hash;         // raw bytes (64); kScramSha256: the StoredKey (32)
  std::string server_key;   // kScramSha256 only: the ServerKey (32)
};

// Mosquitto 2.0's mosquitto_passwd writes 101 iterations and a 12-byte salt.
inline constexpr uint32_t kMosquittoIterations = 101;
// Iterations above this are refused: each CONNECT pays for them on a shard.
inline constexpr uint32_t kMaxIterations = 10'000'000;
inline constexpr size_t kSaltBytes = 12;

// The users of a password file: user name -> hash.
using PasswordTable = std::unordered_map<std::string, PasswordHash>;

// Parses a whole file's text; `source` names it in errors
// ("FILE:LINE: what"). Duplicate users are an error.
Expected<PasswordTable, std::string> ParsePasswordFile(std::string_view text, std::string_view source);
// Reads and parses `path`.
Expected<PasswordTable, std::string> LoadPasswordFile(const std::string& path);

// One hash field ("$7$101$salt$hash"); the error says what is wrong.
Expected<PasswordHash, std::string> ParsePasswordHash(std::string_view field);
// The field as mosquitto_passwd writes it.
std::string FormatPasswordHash(const PasswordHash& hash);

// Whether `password` hashes to `stored`, compared in constant time.
bool VerifyPassword(const PasswordHash& stored, std::string_view password);

// A new PBKDF2-SHA512 hash of `password` with a random salt (RAND_bytes).
PasswordHash HashPassword(std::string_view password, uint32_t iterations = kMosquittoIterations);
// New SCRAM-SHA-256 keys for `password` with a random 16-byte salt
// (security/scram.h; 4096 iterations unless told).
PasswordHash HashPasswordScram(std::string_view password, uint32_t iterations = 4096);

// `text` (a password file) with USER's line set to `hash`: replaced where it
// was, appended otherwise; other lines, comments included, stay as they were.
std::string SetPasswordLine(std::string_view text, std::string_view user, const PasswordHash& hash);

// Standard base64 with padding (OpenSSL's EVP_EncodeBlock/EVP_DecodeBlock).
std::string Base64Encode(std::string_view bytes);
Expected<std::string, std::string> Base64Decode(std::string_view text);

}  // namespace estuary::security
