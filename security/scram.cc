#include "security/scram.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <cstdlib>
#include <vector>

#include "security/password_file.h"

namespace estuary::security {
namespace {

std::string Hmac(std::string_view key, std::string_view data) {
  std::string out(EVP_MAX_MD_SIZE, '\0');
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), reinterpret_cast<unsigned char*>(out.data()), &length);
  out.resize(length);
  return out;
}

std::string Sha256(std::string_view data) {
  std::string out(SHA256_DIGEST_LENGTH, '\0');
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(),
         reinterpret_cast<unsigned char*>(out.data()));
  return out;
}

std::vector<std::string_view> SplitCommas(std::string_view text) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (;;) {
    const size_t end = text.find(',', start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

// "X=value" with the attribute letter `name`; nullopt otherwise.
std::optional<std::string_view> Attribute(std::string_view part, char name) {
  if (part.size() < 2 || part[0] != name || part[1] != '=') return std::nullopt;
  return part.substr(2);
}

// printable = %x21-2B / %x2D-7E (RFC 5802 section 7).
bool IsNonce(std::string_view nonce) {
  if (nonce.empty()) return false;
  for (char c : nonce) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x21 || byte > 0x7E || c == ',') return false;
  }
  return true;
}

}  // namespace

ScramCredential DeriveScramCredential(std::string_view password, std::string_view salt, uint32_t iterations) {
  std::string salted(kScramKeyBytes, '\0');
  if (PKCS5_PBKDF2_HMAC(password.data(), static_cast<int>(password.size()),
                        reinterpret_cast<const unsigned char*>(salt.data()), static_cast<int>(salt.size()),
                        static_cast<int>(iterations), EVP_sha256(), static_cast<int>(salted.size()),
                        reinterpret_cast<unsigned char*>(salted.data())) != 1) {
    std::abort();  // only on allocation failure inside OpenSSL
  }
  ScramCredential credential;
  credential.iterations = iterations;
  credential.salt = std::string(salt);
  credential.stored_key = Sha256(Hmac(salted, "Client Key"));
  credential.server_key = Hmac(salted, "Server Key");
  OPENSSL_cleanse(salted.data(), salted.size());
  return credential;
}

std::string_view ScramErrorName(ScramError error) {
  switch (error) {
    case ScramError::kInvalidEncoding:
      return "invalid-encoding";
    case ScramError::kExtensionsNotSupported:
      return "extensions-not-supported";
    case ScramError::kInvalidProof:
      return "invalid-proof";
    case ScramError::kChannelBindingsDontMatch:
      return "channel-bindings-dont-match";
    case ScramError::kChannelBindingNotSupported:
      return "channel-binding-not-supported";
    case ScramError::kInvalidUsernameEncoding:
      return "invalid-username-encoding";
    case ScramError::kNonceMismatch:
    case ScramError::kUnexpectedMessage:
      return "other-error";
  }
  return "other-error";
}

std::string EscapeScramName(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c == ',') {
      out += "=2C";
    } else if (c == '=') {
      out += "=3D";
    } else {
      out += c;
    }
  }
  return out;
}

std::optional<std::string> UnescapeScramName(std::string_view name) {
  std::string out;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '\0' || c == ',') return std::nullopt;
    if (c != '=') {
      out += c;
      continue;
    }
    const std::string_view code = name.substr(i + 1, 2);
    if (code == "2C") {
      out += ',';
    } else if (code == "3D") {
      out += '=';
    } else {
      return std::nullopt;
    }
    i += 2;
  }
  return out;
}

Expected<ScramClientFirst, ScramError> ParseScramClientFirst(std::string_view message) {
  if (message.size() > kScramMaxMessage) return MakeError(ScramError::kInvalidEncoding);
  if (message.substr(0, 2) == "p=") return MakeError(ScramError::kChannelBindingNotSupported);
  if (message.substr(0, 2) != "n," && message.substr(0, 2) != "y,") return MakeError(ScramError::kInvalidEncoding);
  const size_t authzid_end = message.find(',', 2);
  if (authzid_end == std::string_view::npos) return MakeError(ScramError::kInvalidEncoding);
  ScramClientFirst out;
  const std::string_view authzid = message.substr(2, authzid_end - 2);
  if (!authzid.empty()) {
    auto name = Attribute(authzid, 'a');
    if (!name || name->empty()) return MakeError(ScramError::kInvalidEncoding);
    auto unescaped = UnescapeScramName(*name);
    if (!unescaped) return MakeError(ScramError::kInvalidUsernameEncoding);
    out.authzid = std::move(*unescaped);
  }
  out.gs2_header = std::string(message.substr(0, authzid_end + 1));
  out.bare = std::string(message.substr(authzid_end + 1));
  const std::vector<std::string_view> parts = SplitCommas(out.bare);
  if (Attribute(parts[0], 'm')) return MakeError(ScramError::kExtensionsNotSupported);
  if (parts.size() < 2) return MakeError(ScramError::kInvalidEncoding);
  auto user = Attribute(parts[0], 'n');
  auto nonce = Attribute(parts[1], 'r');
  if (!user || user->empty() || !nonce || !IsNonce(*nonce)) return MakeError(ScramError::kInvalidEncoding);
  auto unescaped = UnescapeScramName(*user);
  if (!unescaped) return MakeError(ScramError::kInvalidUsernameEncoding);
  out.user = std::move(*unescaped);
  out.nonce = std::string(*nonce);
  return out;  // further attributes are extensions: ignored (RFC 5802 section 5.1)
}

Expected<ScramClientFinal, ScramError> ParseScramClientFinal(std::string_view message) {
  if (message.size() > kScramMaxMessage) return MakeError(ScramError::kInvalidEncoding);
  const std::vector<std::string_view> parts = SplitCommas(message);
  if (parts.size() < 3) return MakeError(ScramError::kInvalidEncoding);
  auto binding = Attribute(parts.front(), 'c');
  auto nonce = Attribute(parts[1], 'r');
  auto proof = Attribute(parts.back(), 'p');
  if (!binding || !nonce || !proof || !IsNonce(*nonce)) return MakeError(ScramError::kInvalidEncoding);
  auto binding_bytes = Base64Decode(*binding);
  auto proof_bytes = Base64Decode(*proof);
  if (!binding_bytes || !proof_bytes || proof_bytes->empty()) return MakeError(ScramError::kInvalidEncoding);
  ScramClientFinal out;
  out.channel_binding = std::move(*binding_bytes);
  out.nonce = std::string(*nonce);
  out.proof = std::move(*proof_bytes);
  out.without_proof = std::string(message.substr(0, message.size() - parts.back().size() - 1));
  return out;
}

std::string MakeScramNonce() {
  std::string bytes(18, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(bytes.data()), static_cast<int>(bytes.size())) != 1) {
    std::abort();  // no entropy source at all
  }
  return Base64Encode(bytes);
}

ScramServer::ScramServer(Lookup lookup, std::string server_nonce, std::string unknown_user_key)
    : lookup_(std::move(lookup)),
      server_nonce_(std::move(server_nonce)),
      unknown_user_key_(std::move(unknown_user_key)) {}

ScramStep ScramServer::Receive(std::string_view message) {
  switch (state_) {
    case State::kAwaitingFirst:
      return OnFirst(message);
    case State::kAwaitingFinal:
      return OnFinal(message);
    case State::kDone:
      break;
  }
  return Failed(ScramError::kUnexpectedMessage, false);
}

ScramStep ScramServer::Failed(ScramError error, bool with_message) {
  state_ = State::kDone;
  ScramStep step;
  step.kind = ScramStep::Kind::kFailed;
  step.error = error;
  step.unknown_user = !known_user_;
  if (with_message) step.message = "e=" + std::string(ScramErrorName(error));
  return step;
}

ScramStep ScramServer::OnFirst(std::string_view message) {
  auto first = ParseScramClientFirst(message);
  if (!first) return Failed(first.error(), false);
  user_ = first->user;
  // An authorization identity other than the user would let one user act
  // as another: only the user itself (or none) is accepted.
  if (!first->authzid.empty() && first->authzid != first->user) return Failed(ScramError::kInvalidProof, false);
  std::optional<ScramCredential> credential = lookup_ ? lookup_(user_) : std::nullopt;
  known_user_ = credential.has_value();
  if (credential) {
    credential_ = std::move(*credential);
  } else {
    // Stable per user, so that asking twice does not tell a fake from a real salt.
    credential_.iterations = kScramIterations;
    credential_.salt = Hmac(unknown_user_key_, "salt:" + user_).substr(0, kScramSaltBytes);
    credential_.stored_key = Hmac(unknown_user_key_, "stored:" + user_);
    credential_.server_key = Hmac(unknown_user_key_, "server:" + user_);
  }
  gs2_header_ = first->gs2_header;
  nonce_ = first->nonce + server_nonce_;
  std::string server_first =
      "r=" + nonce_ + ",s=" + Base64Encode(credential_.salt) + ",i=" + std::to_string(credential_.iterations);
  auth_message_prefix_ = first->bare + "," + server_first + ",";
  state_ = State::kAwaitingFinal;
  ScramStep step;
  step.kind = ScramStep::Kind::kContinue;
  step.message = std::move(server_first);
  return step;
}

ScramStep ScramServer::OnFinal(std::string_view message) {
  auto final_message = ParseScramClientFinal(message);
  if (!final_message) return Failed(final_message.error(), true);
  if (final_message->channel_binding != gs2_header_) return Failed(ScramError::kChannelBindingsDontMatch, true);
  if (final_message->nonce != nonce_) return Failed(ScramError::kNonceMismatch, true);
  if (final_message->proof.size() != kScramKeyBytes || credential_.stored_key.size() != kScramKeyBytes) {
    return Failed(ScramError::kInvalidProof, true);
  }
  const std::string auth_message = auth_message_prefix_ + final_message->without_proof;
  std::string client_key = Hmac(credential_.stored_key, auth_message);  // the ClientSignature, then
  for (size_t i = 0; i < client_key.size(); ++i) client_key[i] ^= final_message->proof[i];
  const std::string computed = Sha256(client_key);
  if (!known_user_ || CRYPTO_memcmp(computed.data(), credential_.stored_key.data(), kScramKeyBytes) != 0) {
    return Failed(ScramError::kInvalidProof, true);
  }
  state_ = State::kDone;
  ScramStep step;
  step.kind = ScramStep::Kind::kSucceeded;
  step.message = "v=" + Base64Encode(Hmac(credential_.server_key, auth_message));
  return step;
}

}  // namespace estuary::security
