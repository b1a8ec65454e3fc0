#pragma once
// Authenticator: decides whether a client may connect. Both frontends (MQTT
// CONNECT username/password, AMQP SASL PLAIN/ANONYMOUS) ask the same one.
// Multi-step mechanisms (SCRAM-SHA-256 over AMQP SASL and MQTT 5 enhanced
// authentication) run as an AuthExchange made by StartExchange.
// Called on the shard thread that owns the connection; must not block.
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace estuary::core {

struct Credentials {
  std::string client_id;
  std::optional<std::string> username;
  std::optional<std::string> password;
  std::string peer_address;
};

enum class AuthDecision { kAllow, kBadCredentials, kNotAuthorized };

// One answer of an exchange to the client's latest message.
struct AuthStep {
  enum class Kind : uint8_t { kContinue, kSucceeded, kFailed };
  Kind kind = Kind::kFailed;
  // For the client: a challenge (kContinue), the mechanism's final message
  // (kSucceeded, e.g. SCRAM's "v=..."), or its error message (kFailed, may
  // be empty).
  std::string data;
  std::string user;  // kSucceeded: who authenticated
  std::string why;   // kFailed: for the log, never for the client
};

// One multi-step authentication, owned by the connection running it, on
// its thread. Respond is called with each client message in turn; after a
// kSucceeded or kFailed answer the exchange is over.
class AuthExchange {
 public:
  virtual ~AuthExchange() = default;
  virtual AuthStep Respond(std::string_view client_data) = 0;
};

class Authenticator {
 public:
  virtual ~Authenticator() = default;
  virtual AuthDecision Authenticate(const Credentials& credentials) = 0;
  // The multi-step mechanisms StartExchange knows (SASL names); none by default.
  virtual std::vector<std::string> ExchangeMechanisms() const { return {}; }
  // A new exchange for `mechanism`, or null when it is not one of them.
  virtual std::unique_ptr<AuthExchange> StartExchange(std::string_view /*mechanism*/,
                                                      const std::string& /*peer_address*/) {
    return nullptr;
  }
};

// The default: everyone may connect.
class AllowAllAuthenticator final : public Authenticator {
 public:
  AuthDecision Authenticate(const Credentials&) override { return AuthDecision::kAllow; }
};

}  // namespace estuary::core
