#include "security/password_store.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdlib>

namespace estuary::security {

PasswordStore::PasswordStore(PasswordTable table)
    : table_(std::make_shared<const PasswordTable>(std::move(table))), dummy_(HashPassword("")) {
  if (RAND_bytes(cache_key_.data(), static_cast<int>(cache_key_.size())) != 1) std::abort();
  unknown_user_key_.resize(32);
  if (RAND_bytes(reinterpret_cast<unsigned char*>(unknown_user_key_.data()), 32) != 1) std::abort();
}

Expected<std::unique_ptr<PasswordStore>, std::string> PasswordStore::Load(const std::string& path) {
  auto table = LoadPasswordFile(path);
  if (!table) return MakeError(table.error());
  return std::make_unique<PasswordStore>(std::move(*table));
}

Expected<void, std::string> PasswordStore::Reload(const std::string& path) {
  auto table = LoadPasswordFile(path);
  if (!table) return MakeError(table.error());
  auto fresh = std::make_shared<const PasswordTable>(std::move(*table));
  std::lock_guard lock(mutex_);
  table_ = std::move(fresh);
  verified_.clear();  // not needed for correctness (the key holds the hash): frees the memory
  return {};
}

std::string PasswordStore::CacheKey(std::string_view user, std::string_view password,
                                    const PasswordHash& hash) const {
  // Length-prefixed fields, so that no two different triples share bytes.
  std::string input;
  for (std::string_view field : {user, password, std::string_view(hash.salt), std::string_view(hash.hash)}) {
    const uint32_t size = static_cast<uint32_t>(field.size());
    input.append(reinterpret_cast<const char*>(&size), sizeof size);
    input.append(field);
  }
  std::string out(EVP_MAX_MD_SIZE, '\0');
  unsigned int length = 0;
  HMAC(EVP_sha256(), cache_key_.data(), static_cast<int>(cache_key_.size()),
       reinterpret_cast<const unsigned char*>(input.data()), input.size(),
       reinterpret_cast<unsigned char*>(out.data()), &length);
  out.resize(length);
  return out;
}

PasswordCheck PasswordStore::Check(std::string_view user, std::string_view password) {
  std::shared_ptr<const PasswordTable> table;
  {
    std::lock_guard lock(mutex_);
    table = table_;
  }
  auto it = table->find(std::string(user));
  if (it == table->end()) {
    VerifyPassword(dummy_, password);
    return PasswordCheck::kUnknownUser;
  }
  const std::string key = CacheKey(user, password, it->second);
  {
    std::lock_guard lock(mutex_);
    if (verified_.count(key) != 0) return PasswordCheck::kAccepted;
  }
  if (!VerifyPassword(it->second, password)) return PasswordCheck::kWrongPassword;
  std::lock_guard lock(mutex_);
  if (verified_.size() >= kMaxCached) verified_.clear();
  verified_.insert(key);
  return PasswordCheck::kAccepted;
}

std::optional<ScramCredential> PasswordStore::ScramCredentialFor(std::string_view user) const {
  std::shared_ptr<const PasswordTable> table;
  {
    std::lock_guard lock(mutex_);
    table = table_;
  }
  auto it = table->find(std::string(user));
  if (it == table->end() || it->second.kind != HashKind::kScramSha256) return std::nullopt;
  return ScramCredential{it->second.iterations, it->second.salt, it->second.hash, it->second.server_key};
}

bool PasswordStore::HasUser(std::string_view user) const {
  std::lock_guard lock(mutex_);
  return table_->count(std::string(user)) != 0;
}

size_t PasswordStore::user_count() const {
  std::lock_guard lock(mutex_);
  return table_->size();
}

size_t PasswordStore::cached_count() const {
  std::lock_guard lock(mutex_);
  return verified_.size();
}

}  // namespace estuary::security
