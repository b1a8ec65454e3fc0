#pragma once
// SASL for the AMQP front end: ANONYMOUS and PLAIN, decided by the node's
// core::Authenticator (the one MQTT uses), the authenticator's multi-step
// mechanisms (SCRAM-SHA-256 with --password-file: sasl-challenge and
// sasl-response frames, the server-final in the outcome's additional-data),
// and EXTERNAL over TLS with a verified client certificate (the user is its
// subject CN). Debian's Proton has no Cyrus
// SASL, so this is a Proton SASL implementation (sasl_plugin.h) installed
// per transport. Runs on the thread that owns the connection.
#include <proton/transport.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "cluster-core/broker/authenticator.h"

namespace estuary::amqp {

// Per-connection SASL state; owned by the connection and kept alive as long
// as its transport (Proton keeps the user name pointer, not a copy).
struct SaslState {
  core::Authenticator* authenticator = nullptr;  // null = allow all
  std::string peer_address;
  // The verified client certificate's CN: EXTERNAL is offered, first.
  std::optional<std::string> external_identity;
  std::string mechanism;  // the one the client chose
  std::string user;       // the authenticated user ("anonymous" for ANONYMOUS)
  std::optional<core::AuthDecision> decision;
  std::string mechanisms;  // offered, space separated; built at install (Proton keeps the pointer)
  std::unique_ptr<core::AuthExchange> exchange;  // a multi-step mechanism running
  std::string bytes_out;  // the challenge or outcome data being sent (Proton keeps the pointer)
};

// The mechanisms offered, space separated: EXTERNAL first with a client
// certificate, then the authenticator's multi-step ones (SCRAM-SHA-256),
// then these two.
inline constexpr const char* kSaslMechanisms = "PLAIN ANONYMOUS";

struct PlainCredentials {
  std::string authzid;
  std::string user;
  std::string password;
};
// Parses a PLAIN initial response: [authzid] NUL authcid NUL passwd (RFC 4616).
std::optional<PlainCredentials> ParsePlain(std::string_view response);

// Installs the implementation on `transport` (after pn_sasl(transport)).
void InstallSasl(pn_transport_t* transport, SaslState* state);

}  // namespace estuary::amqp
