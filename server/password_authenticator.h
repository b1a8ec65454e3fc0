#pragma once
// PasswordFileAuthenticator: the users of a "user:password" file (one a
// line, '#' comments). Clients must give a user name and its password;
// anonymous clients are refused. Read once at start-up; immutable after,
// so every shard may call it at once.
#include <memory>
#include <string>
#include <unordered_map>

#include "cluster-core/broker/authenticator.h"
#include "model/result.h"

namespace estuary::server {

class PasswordFileAuthenticator final : public core::Authenticator {
 public:
  static Expected<std::unique_ptr<PasswordFileAuthenticator>, std::string> Load(const std::string& path);
  core::AuthDecision Authenticate(const core::Credentials& credentials) override;

 private:
  std::unordered_map<std::string, std::string> passwords_;
};

}  // namespace estuary::server
