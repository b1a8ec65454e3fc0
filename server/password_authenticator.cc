#include "server/password_authenticator.h"

#include "security/scram.h"

namespace estuary::server {
namespace {

// SCRAM-SHA-256 (security/scram.h) against the store's SCRAM entries.
class ScramExchange final : public core::AuthExchange {
 public:
  explicit ScramExchange(security::PasswordStore& store)
      : store_(store),
        server_([&store](std::string_view user) { return store.ScramCredentialFor(user); },
                security::MakeScramNonce(), store.unknown_user_key()) {}

  core::AuthStep Respond(std::string_view client_data) override {
    const security::ScramStep step = server_.Receive(client_data);
    core::AuthStep out;
    out.data = step.message;
    switch (step.kind) {
      case security::ScramStep::Kind::kContinue: out.kind = core::AuthStep::Kind::kContinue; break;
      case security::ScramStep::Kind::kSucceeded:
        out.kind = core::AuthStep::Kind::kSucceeded;
        out.user = server_.user();
        break;
      case security::ScramStep::Kind::kFailed:
        out.kind = core::AuthStep::Kind::kFailed;
        out.why = Why(step);
        break;
    }
    return out;
  }

 private:
  std::string Why(const security::ScramStep& step) const {
    std::string why = "SCRAM-SHA-256 for user '" + server_.user() + "': ";
    if (step.unknown_user && step.error == security::ScramError::kInvalidProof) {
      return why + (store_.HasUser(server_.user()) ? "the password file holds no SCRAM keys for this user"
                                                   : "unknown user");
    }
    return why + std::string(security::ScramErrorName(*step.error));
  }

  security::PasswordStore& store_;
  security::ScramServer server_;
};

}  // namespace

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

std::vector<std::string> PasswordFileAuthenticator::ExchangeMechanisms() const {
  return {std::string(security::kScramMechanism)};
}

std::unique_ptr<core::AuthExchange> PasswordFileAuthenticator::StartExchange(std::string_view mechanism,
                                                                             const std::string&) {
  if (mechanism != security::kScramMechanism) return nullptr;
  return std::make_unique<ScramExchange>(*store_);
}

}  // namespace estuary::server
