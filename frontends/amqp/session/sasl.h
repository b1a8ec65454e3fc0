#pragma once
// SASL for the AMQP front end: ANONYMOUS and PLAIN, decided by the node's
// core::Authenticator (the one MQTT uses), and EXTERNAL over TLS with a
// verified client certificate (the user is its subject CN). Debian's Proton has no Cyrus
// SASL, so this is a Proton SASL implementation (sasl_plugin.h) installed
// per transport. Runs on the thread that owns the connection.
#include <proton/transport.h>

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
};

// The mechanisms offered, space separated (with a client certificate:
// kSaslMechanismsWithExternal).
inline constexpr const char* kSaslMechanisms = "PLAIN ANONYMOUS";
inline constexpr const char* kSaslMechanismsWithExternal = "EXTERNAL PLAIN ANONYMOUS";

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
