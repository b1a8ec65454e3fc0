#include "server/password_authenticator.h"

namespace estuary::server {

Expected<std::unique_ptr<PasswordFileAuthenticator>, std::string> PasswordFileAuthenticator::Load(
    const std::string& path) {
  auto store = security::PasswordStore::Load(path);
  if (!store) return MakeError(store.error());
  return std::make_unique<PasswordFileAuthenticator>(std::move(*store));
}

core::AuthDecision PasswordFileAuthenticator::Authenticate(const core::Credentials& credentials) {
  if (!credentials.username) return core::AuthDecision::kNotAuthorized;
  if (!credentials.password) return core::AuthDecision::kBadCredentials;
  const security::PasswordCheck check = store_->Check(*credentials.username, *credentials.password);
  return check == security::PasswordCheck::kAccepted ? core::AuthDecision::kAllow
                                                     : core::AuthDecision::kBadCredentials;
}

}  // namespace estuary::server
