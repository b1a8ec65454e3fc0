#pragma once
// PasswordStore: the users of a password file (password_file.h), checked
// by every shard at once and replaced whole by Reload (SIGHUP).
//
// Verifying a $7$ hash runs PBKDF2 on the caller's thread (a shard loop):
// 101 iterations, mosquitto_passwd's default, cost tens of microseconds;
// an operator who writes 10,000 or more pays milliseconds per CONNECT.
// So a successful check is remembered: the cache key is an HMAC-SHA256,
// under a random key made at start-up, of the user, the password and the
// stored hash, so no password is kept and a changed hash misses. A hit
// costs one HMAC (about a microsecond). Failures are never cached. The
// cache holds at most kMaxCached entries and is emptied when full.
// docs/security.md records the figures.
//
// Thread-safe: a mutex guards the table pointer and the cache; the
// PBKDF2 work runs outside it.
#include <array>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

#include "base/expected.h"
#include "security/password_file.h"
#include "security/scram.h"

namespace estuary::security {

enum class PasswordCheck : uint8_t { kAccepted, kWrongPassword, kUnknownUser };

class PasswordStore {
 public:
  static constexpr size_t kMaxCached = 65'536;

  explicit PasswordStore(PasswordTable table);
  // Reads `path`; the error names the file and line.
  static Expected<std::unique_ptr<PasswordStore>, std::string> Load(const std::string& path);

  // Replaces the users with `path`'s; on an error the old ones stay.
  Expected<void, std::string> Reload(const std::string& path);

  PasswordCheck Check(std::string_view user, std::string_view password);
  // The SCRAM-SHA-256 keys of `user`; nullopt when the user is unknown or
  // its line holds another hash ($7$ and $6$ cannot give SCRAM keys).
  std::optional<ScramCredential> ScramCredentialFor(std::string_view user) const;
  bool HasUser(std::string_view user) const;
  // A random secret made at start-up: unknown users' fake SCRAM salts.
  const std::string& unknown_user_key() const { return unknown_user_key_; }
  size_t user_count() const;
  size_t cached_count() const;

 private:
  std::string CacheKey(std::string_view user, std::string_view password, const PasswordHash& hash) const;

  mutable std::mutex mutex_;
  std::shared_ptr<const PasswordTable> table_;
  std::unordered_set<std::string> verified_;
  std::array<unsigned char, 32> cache_key_{};
  PasswordHash dummy_;
  std::string unknown_user_key_;  // verified for unknown users, so they cost what known ones do
};

}  // namespace estuary::security
