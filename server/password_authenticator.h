#pragma once
// PasswordFileAuthenticator: --password-file, the users of a file in the
// format mosquitto_passwd writes ($7$ PBKDF2-SHA512 and $6$ SHA-512 lines,
// security/password_file.h), plus SCRAM-SHA-256 entries. Clients must give
// a user name and its password (any entry), or run SCRAM-SHA-256 (SCRAM
// entries only: a $7$/$6$ line cannot give SCRAM keys); anonymous clients
// are refused. Thread-safe: every shard calls
// Authenticate at once, and Reload (SIGHUP, on shard 0) swaps the users.
#include <memory>
#include <string>

#include "base/expected.h"
#include "cluster-core/broker/authenticator.h"
#include "security/password_store.h"

namespace estuary::server {

class PasswordFileAuthenticator final : public core::Authenticator {
 public:
  explicit PasswordFileAuthenticator(std::unique_ptr<security::PasswordStore> store) : store_(std::move(store)) {}
  // The error names the file and the line.
  static Expected<std::unique_ptr<PasswordFileAuthenticator>, std::string> Load(const std::string& path);
  // New CONNECTs and SASL exchanges use `path`'s users; on an error the old ones stay.
  Expected<void, std::string> Reload(const std::string& path) { return store_->Reload(path); }
  core::AuthDecision Authenticate(const core::Credentials& credentials) override;
  std::vector<std::string> ExchangeMechanisms() const override;
  std::unique_ptr<core::AuthExchange> StartExchange(std::string_view mechanism,
                                                    const std::string& peer_address) override;
  size_t user_count() const { return store_->user_count(); }

 private:
  std::unique_ptr<security::PasswordStore> store_;
};

}  // namespace estuary::server
