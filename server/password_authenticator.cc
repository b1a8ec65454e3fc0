#include "server/password_authenticator.h"

#include <fstream>
#include <memory>

namespace estuary::server {

Expected<std::unique_ptr<PasswordFileAuthenticator>, std::string> PasswordFileAuthenticator::Load(
    const std::string& path) {
  std::ifstream in(path);
  if (!in) return MakeError("cannot read password file " + path);
  auto authenticator = std::make_unique<PasswordFileAuthenticator>();
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos || colon == 0) {
      return MakeError(path + ":" + std::to_string(number) + ": expected user:password");
    }
    authenticator->passwords_[line.substr(0, colon)] = line.substr(colon + 1);
  }
  return authenticator;
}

core::AuthDecision PasswordFileAuthenticator::Authenticate(const core::Credentials& credentials) {
  if (!credentials.username) return core::AuthDecision::kNotAuthorized;
  auto it = passwords_.find(*credentials.username);
  if (it == passwords_.end() || !credentials.password || *credentials.password != it->second) {
    return core::AuthDecision::kBadCredentials;
  }
  return core::AuthDecision::kAllow;
}

}  // namespace estuary::server
