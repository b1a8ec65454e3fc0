#include "security/password_file.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <charconv>
#include <cstdlib>
#include <vector>

#include "security/scram.h"
#include "security/text_file.h"

namespace estuary::security {
namespace {

constexpr size_t kHashBytes = 64;  // SHA-512
constexpr size_t kMaxSaltBytes = 64;

bool IsBase64Char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

std::string Digest(const PasswordHash& stored, std::string_view password) {
  std::string out(kHashBytes, '\0');
  auto* bytes = reinterpret_cast<unsigned char*>(out.data());
  if (stored.kind == HashKind::kPbkdf2Sha512) {
    const int ok = PKCS5_PBKDF2_HMAC(password.data(), static_cast<int>(password.size()),
                                     reinterpret_cast<const unsigned char*>(stored.salt.data()),
                                     static_cast<int>(stored.salt.size()), static_cast<int>(stored.iterations),
                                     EVP_sha512(), static_cast<int>(kHashBytes), bytes);
    if (ok != 1) return {};
    return out;
  }
  EVP_MD_CTX* context = EVP_MD_CTX_new();
  unsigned int length = 0;
  const bool ok = context != nullptr && EVP_DigestInit_ex(context, EVP_sha512(), nullptr) == 1 &&
                  EVP_DigestUpdate(context, password.data(), password.size()) == 1 &&
                  EVP_DigestUpdate(context, stored.salt.data(), stored.salt.size()) == 1 &&
                  EVP_DigestFinal_ex(context, bytes, &length) == 1 && length == kHashBytes;
  EVP_MD_CTX_free(context);
  return ok ? out : std::string();
}

std::vector<std::string_view> SplitDollar(std::string_view field) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (;;) {
    const size_t end = field.find('$', start);
    parts.push_back(field.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

Expected<std::string, std::string> DecodeField(std::string_view text, const char* what, size_t min, size_t max) {
  auto decoded = Base64Decode(text);
  if (!decoded) return MakeError(std::string(what) + ": " + decoded.error());
  if (decoded->size() < min || decoded->size() > max) {
    return MakeError(std::string(what) + " of " + std::to_string(decoded->size()) + " bytes");
  }
  return decoded;
}

constexpr std::string_view kScramPrefix = "SCRAM-SHA-256$";

// "SCRAM-SHA-256$ITERATIONS:SALT$STOREDKEY:SERVERKEY".
Expected<PasswordHash, std::string> ParseScramHash(std::string_view field) {
  const std::string_view rest = field.substr(kScramPrefix.size());
  const size_t dollar = rest.find('$');
  const std::string_view left = rest.substr(0, dollar);
  const std::string_view right = dollar == std::string_view::npos ? std::string_view() : rest.substr(dollar + 1);
  const size_t left_colon = left.find(':');
  const size_t right_colon = right.find(':');
  if (dollar == std::string_view::npos || left_colon == std::string_view::npos ||
      right_colon == std::string_view::npos) {
    return MakeError(std::string("a SCRAM entry has the form SCRAM-SHA-256$ITERATIONS:SALT$STOREDKEY:SERVERKEY"));
  }
  PasswordHash hash;
  hash.kind = HashKind::kScramSha256;
  const std::string_view count = left.substr(0, left_colon);
  const auto [end, error] = std::from_chars(count.data(), count.data() + count.size(), hash.iterations);
  if (error != std::errc() || end != count.data() + count.size() || hash.iterations < 1 ||
      hash.iterations > kScramMaxIterations) {
    return MakeError("iterations must be a number from 1 to " + std::to_string(kScramMaxIterations));
  }
  auto salt = DecodeField(left.substr(left_colon + 1), "salt", 1, kMaxSaltBytes);
  if (!salt) return MakeError(salt.error());
  auto stored = DecodeField(right.substr(0, right_colon), "StoredKey", kScramKeyBytes, kScramKeyBytes);
  if (!stored) return MakeError(stored.error());
  auto server = DecodeField(right.substr(right_colon + 1), "ServerKey", kScramKeyBytes, kScramKeyBytes);
  if (!server) return MakeError(server.error());
  hash.salt = std::move(*salt);
  hash.hash = std::move(*stored);
  hash.server_key = std::move(*server);
  return hash;
}

}  // namespace

std::string Base64Encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');  // EVP_EncodeBlock adds a NUL
  const int written = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                      reinterpret_cast<const unsigned char*>(bytes.data()),
                                      static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(written));
  return out;
}

Expected<std::string, std::string> Base64Decode(std::string_view text) {
  if (text.size() % 4 != 0) return MakeError(std::string("base64 length is not a multiple of 4"));
  size_t padding = 0;
  while (padding < 2 && padding < text.size() && text[text.size() - 1 - padding] == '=') ++padding;
  for (size_t i = 0; i < text.size() - padding; ++i) {
    if (!IsBase64Char(text[i])) return MakeError(std::string("not base64"));
  }
  std::string out(3 * (text.size() / 4), '\0');
  const int written = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                      reinterpret_cast<const unsigned char*>(text.data()),
                                      static_cast<int>(text.size()));
  if (written < 0) return MakeError(std::string("not base64"));
  out.resize(static_cast<size_t>(written) - padding);  // EVP_DecodeBlock counts padding as zero bytes
  return out;
}

Expected<PasswordHash, std::string> ParsePasswordHash(std::string_view field) {
  if (field.substr(0, kScramPrefix.size()) == kScramPrefix) return ParseScramHash(field);
  const std::vector<std::string_view> parts = SplitDollar(field);
  // "$7$N$salt$hash" splits into "", "7", N, salt, hash; "$6$salt$hash" into four.
  if (parts.size() < 2 || !parts[0].empty() || (parts[1] != "6" && parts[1] != "7")) {
    return MakeError(std::string("not a $6$, $7$ or SCRAM-SHA-256$ hash (a clear-text password?)"));
  }
  PasswordHash hash;
  size_t next = 2;
  if (parts[1] == "7") {
    if (parts.size() != 5) return MakeError(std::string("a $7$ hash has the form $7$ITERATIONS$SALT$HASH"));
    hash.kind = HashKind::kPbkdf2Sha512;
    const std::string_view count = parts[2];
    const auto [end, error] = std::from_chars(count.data(), count.data() + count.size(), hash.iterations);
    if (error != std::errc() || end != count.data() + count.size() || hash.iterations < 1 ||
        hash.iterations > kMaxIterations) {
      return MakeError("iterations must be a number from 1 to " + std::to_string(kMaxIterations));
    }
    next = 3;
  } else {
    if (parts.size() != 4) return MakeError(std::string("a $6$ hash has the form $6$SALT$HASH"));
    hash.kind = HashKind::kSha512;
  }
  auto salt = DecodeField(parts[next], "salt", 1, kMaxSaltBytes);
  if (!salt) return MakeError(salt.error());
  auto digest = DecodeField(parts[next + 1], "hash", kHashBytes, kHashBytes);
  if (!digest) return MakeError(digest.error());
  hash.salt = std::move(*salt);
  hash.hash = std::move(*digest);
  return hash;
}

std::string FormatPasswordHash(const PasswordHash& hash) {
  if (hash.kind == HashKind::kScramSha256) {
    return std::string(kScramPrefix) + std::to_string(hash.iterations) + ":" + Base64Encode(hash.salt) + "$" +
           Base64Encode(hash.hash) + ":" + Base64Encode(hash.server_key);
  }
  if (hash.kind == HashKind::kSha512) return "$6$" + Base64Encode(hash.salt) + "$" + Base64Encode(hash.hash);
  return "$7$" + std::to_string(hash.iterations) + "$" + Base64Encode(hash.salt) + "$" + Base64Encode(hash.hash);
}

Expected<PasswordTable, std::string> ParsePasswordFile(std::string_view text, std::string_view source) {
  PasswordTable table;
  auto parsed = ForEachEntry(text, source, [&table](std::string_view line) -> std::string {
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return "expected user:hash";
    const std::string user(TrimBlanks(line.substr(0, colon)));
    if (user.empty()) return "empty user name";
    auto hash = ParsePasswordHash(TrimBlanks(line.substr(colon + 1)));
    if (!hash) {
      return "user '" + user + "': " + hash.error() +
             "; hash it with `estuaryctl passwd FILE USER` or `mosquitto_passwd -U FILE`";
    }
    if (!table.emplace(user, std::move(*hash)).second) return "user '" + user + "' appears twice";
    return {};
  });
  if (!parsed) return MakeError(parsed.error());
  return table;
}

Expected<PasswordTable, std::string> LoadPasswordFile(const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text) return MakeError("cannot read password file " + path + ": " + text.error());
  return ParsePasswordFile(*text, path);
}

bool VerifyPassword(const PasswordHash& stored, std::string_view password) {
  if (stored.kind == HashKind::kScramSha256) {
    // PLAIN against a SCRAM entry: derive the StoredKey and compare it.
    const ScramCredential derived = DeriveScramCredential(password, stored.salt, stored.iterations);
    return derived.stored_key.size() == stored.hash.size() &&
           CRYPTO_memcmp(derived.stored_key.data(), stored.hash.data(), stored.hash.size()) == 0;
  }
  const std::string computed = Digest(stored, password);
  return computed.size() == stored.hash.size() && !computed.empty() &&
         CRYPTO_memcmp(computed.data(), stored.hash.data(), computed.size()) == 0;
}

PasswordHash HashPassword(std::string_view password, uint32_t iterations) {
  PasswordHash hash;
  hash.kind = HashKind::kPbkdf2Sha512;
  hash.iterations = iterations;
  hash.salt.resize(kSaltBytes);
  // RAND_bytes fails only when the system has no entropy source at all.
  if (RAND_bytes(reinterpret_cast<unsigned char*>(hash.salt.data()), static_cast<int>(kSaltBytes)) != 1) {
    std::abort();
  }
  hash.hash = Digest(hash, password);
  return hash;
}

PasswordHash HashPasswordScram(std::string_view password, uint32_t iterations) {
  std::string salt(kScramSaltBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(salt.data()), static_cast<int>(salt.size())) != 1) std::abort();
  const ScramCredential credential = DeriveScramCredential(password, salt, iterations);
  PasswordHash hash;
  hash.kind = HashKind::kScramSha256;
  hash.iterations = iterations;
  hash.salt = credential.salt;
  hash.hash = credential.stored_key;
  hash.server_key = credential.server_key;
  return hash;
}

std::string SetPasswordLine(std::string_view text, std::string_view user, const PasswordHash& hash) {
  const std::string entry = std::string(user) + ":" + FormatPasswordHash(hash);
  std::string out;
  bool replaced = false;
  ForEachLine(text, [&](size_t, std::string_view line) {
    const std::string_view trimmed = TrimBlanks(line);
    const size_t colon = trimmed.find(':');
    const bool ours = !trimmed.empty() && trimmed[0] != '#' && colon != std::string_view::npos &&
                      TrimBlanks(trimmed.substr(0, colon)) == user;
    if (ours && replaced) return;  // a duplicate: the file keeps one line per user
    out += ours ? std::string_view(entry) : line;
    out += '\n';
    replaced = replaced || ours;
  });
  if (!replaced) out += entry + "\n";
  return out;
}

}  // namespace estuary::security
