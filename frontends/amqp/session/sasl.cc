#include "frontends/amqp/session/sasl.h"

#include <proton/sasl.h>
#include <proton/sasl_plugin.h>
#include <spdlog/spdlog.h>

namespace estuary::amqp {
namespace {

SaslState* StateOf(pn_transport_t* transport) {
  return static_cast<SaslState*>(pnx_sasl_get_context(transport));
}

core::AuthDecision Decide(SaslState& state, std::optional<std::string> user,
                          std::optional<std::string> password) {
  core::AllowAllAuthenticator allow_all;
  core::Authenticator& authenticator = state.authenticator ? *state.authenticator : allow_all;
  // The container-id is not known yet (it comes in the open frame, after
  // SASL); the connection checks it again with the user at open.
  return authenticator.Authenticate(core::Credentials{"", std::move(user), std::move(password),
                                                      state.peer_address});
}

void PostOutcome(pn_transport_t* transport, SaslState& state, core::AuthDecision decision) {
  state.decision = decision;
  if (decision == core::AuthDecision::kAllow) {
    pnx_sasl_set_succeeded(transport, state.user.c_str(), nullptr);
  } else {
    pnx_sasl_set_failed(transport);  // sasl-outcome code 1 (auth)
  }
  pnx_sasl_set_desired_state(transport, SASL_POSTED_OUTCOME);
}

// One client message of a multi-step mechanism: a challenge, or the outcome.
void StepExchange(pn_transport_t* transport, SaslState& state, std::string_view response) {
  core::AuthStep step = state.exchange->Respond(response);
  state.bytes_out = std::move(step.data);
  pnx_sasl_set_bytes_out(transport, pn_bytes(state.bytes_out.size(), state.bytes_out.data()));
  if (step.kind == core::AuthStep::Kind::kContinue) {
    pnx_sasl_set_desired_state(transport, SASL_POSTED_CHALLENGE);
    return;
  }
  state.exchange.reset();
  if (step.kind == core::AuthStep::Kind::kSucceeded) {
    state.user = step.user;
    PostOutcome(transport, state, core::AuthDecision::kAllow);
    return;
  }
  spdlog::info("amqp {}: SASL {} failed: {}", state.peer_address, state.mechanism, step.why);
  // The outcome of a failure carries no data (AMQP 1.0 section 5.3.3.6).
  state.bytes_out.clear();
  pnx_sasl_set_bytes_out(transport, pn_bytes(0, nullptr));
  PostOutcome(transport, state, core::AuthDecision::kBadCredentials);
}

void ProcessInit(pn_transport_t* transport, const char* mechanism, const pn_bytes_t* received) {
  SaslState* state = StateOf(transport);
  state->mechanism = mechanism ? mechanism : "";
  const std::string_view response = received && received->start
                                        ? std::string_view(received->start, received->size)
                                        : std::string_view();
  core::AuthDecision decision = core::AuthDecision::kBadCredentials;
  if (state->mechanism == "ANONYMOUS") {
    decision = Decide(*state, std::nullopt, std::nullopt);
    state->user = "anonymous";
  } else if (state->mechanism == "EXTERNAL" && state->external_identity) {
    // The handshake verified the certificate against --tls-ca: that is the
    // authentication. An authorization identity, if sent, must be the CN.
    if (response.empty() || response == *state->external_identity) {
      decision = core::AuthDecision::kAllow;
      state->user = *state->external_identity;
    }
  } else if (state->mechanism == "PLAIN") {
    if (auto plain = ParsePlain(response)) {
      decision = Decide(*state, plain->user, plain->password);
      state->user = plain->user;
    }
  } else if (state->authenticator != nullptr && !state->mechanism.empty()) {
    state->exchange = state->authenticator->StartExchange(state->mechanism, state->peer_address);
    if (state->exchange) {
      StepExchange(transport, *state, response);
      return;
    }
  }
  PostOutcome(transport, *state, decision);
}

void ProcessResponse(pn_transport_t* transport, const pn_bytes_t* received) {
  SaslState* state = StateOf(transport);
  if (!state->exchange) {
    // No challenge was sent: a response is a protocol error.
    PostOutcome(transport, *state, core::AuthDecision::kBadCredentials);
    return;
  }
  StepExchange(transport, *state,
               received && received->start ? std::string_view(received->start, received->size) : std::string_view());
}

bool InitServer(pn_transport_t* transport) {
  // Posting the mechanisms is what starts the exchange.
  pnx_sasl_set_desired_state(transport, SASL_POSTED_MECHANISMS);
  return true;
}

const pnx_sasl_implementation kImplementation = {
    /*free=*/[](pn_transport_t*) {},  // the state belongs to the connection
    /*list_mechanisms=*/
    [](pn_transport_t* transport) { return StateOf(transport)->mechanisms.c_str(); },
    /*init_server=*/InitServer,
    /*init_client=*/[](pn_transport_t*) { return false; },
    /*prepare_write=*/[](pn_transport_t*) {},
    /*process_init=*/ProcessInit,
    /*process_response=*/ProcessResponse,
    /*process_mechanisms=*/[](pn_transport_t*, const char*) { return false; },
    /*process_challenge=*/[](pn_transport_t*, const pn_bytes_t*) {},
    /*process_outcome=*/[](pn_transport_t*, const pn_bytes_t*) {},
    /*can_encrypt=*/[](pn_transport_t*) { return false; },
    /*max_encrypt_size=*/[](pn_transport_t*) -> ssize_t { return 0; },
    /*encode=*/[](pn_transport_t*, pn_bytes_t, pn_bytes_t*) -> ssize_t { return 0; },
    /*decode=*/[](pn_transport_t*, pn_bytes_t, pn_bytes_t*) -> ssize_t { return 0; },
};

}  // namespace

std::optional<PlainCredentials> ParsePlain(std::string_view response) {
  const size_t first = response.find('\0');
  if (first == std::string_view::npos) return std::nullopt;
  const size_t second = response.find('\0', first + 1);
  if (second == std::string_view::npos) return std::nullopt;
  PlainCredentials out;
  out.authzid = std::string(response.substr(0, first));
  out.user = std::string(response.substr(first + 1, second - first - 1));
  out.password = std::string(response.substr(second + 1));
  if (out.user.empty()) return std::nullopt;
  return out;
}

void InstallSasl(pn_transport_t* transport, SaslState* state) {
  // EXTERNAL first (a certificate is the strongest proof), then the
  // authenticator's multi-step mechanisms, then PLAIN ANONYMOUS.
  state->mechanisms = state->external_identity ? "EXTERNAL " : "";
  if (state->authenticator != nullptr) {
    for (const std::string& mechanism : state->authenticator->ExchangeMechanisms()) state->mechanisms += mechanism + " ";
  }
  state->mechanisms += kSaslMechanisms;
  pn_sasl_t* sasl = pn_sasl(transport);
  pn_sasl_set_allow_insecure_mechs(sasl, true);  // PLAIN on plain TCP: TLS is the listener's job
  pnx_sasl_set_implementation(transport, &kImplementation, state);
}

}  // namespace estuary::amqp
