#pragma once
// Authenticator: decides whether a client may connect. Both frontends (MQTT
// CONNECT username/password, AMQP SASL PLAIN/ANONYMOUS) ask the same one.
// Called on the shard thread that owns the connection; must not block.
#include <optional>
#include <string>

namespace estuary::core {

struct Credentials {
  std::string client_id;
  std::optional<std::string> username;
  std::optional<std::string> password;
  std::string peer_address;
};

enum class AuthDecision { kAllow, kBadCredentials, kNotAuthorized };

class Authenticator {
 public:
  virtual ~Authenticator() = default;
  virtual AuthDecision Authenticate(const Credentials& credentials) = 0;
};

// The default: everyone may connect.
class AllowAllAuthenticator final : public Authenticator {
 public:
  AuthDecision Authenticate(const Credentials&) override { return AuthDecision::kAllow; }
};

}  // namespace estuary::core
