#include "io/tls/tls_context.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <array>
#include <cstdio>

#include "io/tls/tls_session.h"

namespace estuary::io {
namespace {

// TLS 1.2 suites: forward secret AEADs only (Mozilla's "intermediate"
// list). TLS 1.3 keeps OpenSSL's default suites, which are all AEADs.
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
// Resumption with a client certificate needs a session id context.
constexpr unsigned char kSessionIdContext[] = "estuary";

Expected<void, std::string> LoadCrls(SSL_CTX* context, const std::string& file) {
  BIO* bio = BIO_new_file(file.c_str(), "r");
  if (bio == nullptr) return MakeError(file + ": cannot open (" + OpenSslErrors() + ")");
  X509_STORE* store = SSL_CTX_get_cert_store(context);
  int loaded = 0;
  while (X509_CRL* crl = PEM_read_bio_X509_CRL(bio, nullptr, nullptr, nullptr)) {
    X509_STORE_add_crl(store, crl);
    X509_CRL_free(crl);
    ++loaded;
  }
  BIO_free(bio);
  ERR_clear_error();  // the read that ended the loop
  if (loaded == 0) return MakeError(file + ": no PEM CRL in it");
  X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK);
  return {};
}

// Records why a client certificate was refused, for the log line.
int VerifyCallback(int preverify_ok, X509_STORE_CTX* store) {
  if (preverify_ok) return 1;
  auto* ssl = static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  auto* session = ssl ? static_cast<TlsSessionNotes*>(SSL_get_app_data(ssl)) : nullptr;
  if (session != nullptr && session->verify_error == 0) {
    session->verify_error = X509_STORE_CTX_get_error(store);
    if (X509* cert = X509_STORE_CTX_get_current_cert(store)) {
      std::array<char, 256> subject{};
      X509_NAME_oneline(X509_get_subject_name(cert), subject.data(), subject.size());
      session->subject = subject.data();
    }
  }
  return 0;
}

Expected<void, std::string> LoadPair(SSL_CTX* context, const TlsSettings& settings) {
  const std::string& flag = settings.flag_prefix;
  if (SSL_CTX_use_certificate_chain_file(context, settings.cert_file.c_str()) != 1) {
    return MakeError(flag + "-cert " + settings.cert_file + ": " + OpenSslErrors());
  }
  if (SSL_CTX_use_PrivateKey_file(context, settings.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return MakeError(flag + "-key " + settings.key_file + ": " + OpenSslErrors());
  }
  if (SSL_CTX_check_private_key(context) != 1) {
    return MakeError(flag + "-key " + settings.key_file + " does not match " + flag + "-cert " + settings.cert_file);
  }
  return {};
}

Expected<void, std::string> LoadFiles(SSL_CTX* context, const TlsSettings& settings) {
  if (auto pair = LoadPair(context, settings); !pair) return pair;
  if (settings.ca_file.empty()) return {};
  if (SSL_CTX_load_verify_locations(context, settings.ca_file.c_str(), nullptr) != 1) {
    return MakeError(settings.flag_prefix + "-ca " + settings.ca_file + ": " + OpenSslErrors());
  }
  STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(settings.ca_file.c_str());
  if (names == nullptr) return MakeError(settings.flag_prefix + "-ca " + settings.ca_file + ": no certificate in it");
  SSL_CTX_set_client_CA_list(context, names);
  const int mode = SSL_VERIFY_PEER | (settings.require_client_cert ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0);
  SSL_CTX_set_verify(context, mode, VerifyCallback);
  if (!settings.crl_file.empty()) {
    if (auto crls = LoadCrls(context, settings.crl_file); !crls) {
      return MakeError(settings.flag_prefix + "-crl " + crls.error());
    }
  }
  return {};
}

}  // namespace

Expected<std::shared_ptr<ssl_ctx_st>, std::string> BuildServerContext(const TlsSettings& settings) {
  std::shared_ptr<SSL_CTX> context(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  if (!context) return MakeError("TLS: " + OpenSslErrors());
  const int min_version = settings.min_version == "1.3" ? TLS1_3_VERSION : TLS1_2_VERSION;
  SSL_CTX_set_min_proto_version(context.get(), min_version);
  if (SSL_CTX_set_cipher_list(context.get(), kTls12Ciphers) != 1) return MakeError("TLS: " + OpenSslErrors());
  // Renegotiation is a DoS lever and no MQTT/AMQP client needs it.
  SSL_CTX_set_options(context.get(), SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  // Idle connections give their record buffers back (docs/benchmarks.md,
  // memory per idle TLS connection).
  SSL_CTX_set_mode(context.get(), SSL_MODE_RELEASE_BUFFERS);
  // Stateless tickets for resumption (one per full TLS 1.3 handshake);
  // the server-side cache is not needed with them.
  SSL_CTX_set_num_tickets(context.get(), 1);
  SSL_CTX_set_session_cache_mode(context.get(), SSL_SESS_CACHE_OFF);
  SSL_CTX_set_session_id_context(context.get(), kSessionIdContext, sizeof(kSessionIdContext) - 1);
  if (auto loaded = LoadFiles(context.get(), settings); !loaded) return MakeError(loaded.error());
  return context;
}

Expected<std::shared_ptr<ssl_ctx_st>, std::string> BuildClientContext(const std::string& ca_file,
                                                                       const std::string& cert_file,
                                                                       const std::string& key_file) {
  std::shared_ptr<SSL_CTX> context(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  if (!context) return MakeError("TLS: " + OpenSslErrors());
  SSL_CTX_set_min_proto_version(context.get(), TLS1_2_VERSION);
  if (SSL_CTX_load_verify_locations(context.get(), ca_file.c_str(), nullptr) != 1) {
    return MakeError(ca_file + ": " + OpenSslErrors());
  }
  SSL_CTX_set_verify(context.get(), SSL_VERIFY_PEER, nullptr);
  SSL_CTX_set_mode(context.get(), SSL_MODE_RELEASE_BUFFERS);
  // Clients keep the tickets they receive (TlsSession::TakeTicket).
  SSL_CTX_set_session_cache_mode(context.get(), SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  if (!cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(context.get(), cert_file.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(context.get(), key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      return MakeError(cert_file + ": " + OpenSslErrors());
    }
  }
  return context;
}

Expected<std::shared_ptr<ssl_ctx_st>, std::string> BuildPeerClientContext(const TlsSettings& settings) {
  std::shared_ptr<SSL_CTX> context(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  if (!context) return MakeError("TLS: " + OpenSslErrors());
  SSL_CTX_set_min_proto_version(context.get(), settings.min_version == "1.3" ? TLS1_3_VERSION : TLS1_2_VERSION);
  if (SSL_CTX_set_cipher_list(context.get(), kTls12Ciphers) != 1) return MakeError("TLS: " + OpenSslErrors());
  SSL_CTX_set_options(context.get(), SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  SSL_CTX_set_mode(context.get(), SSL_MODE_RELEASE_BUFFERS);
  if (auto pair = LoadPair(context.get(), settings); !pair) return MakeError(pair.error());
  if (SSL_CTX_load_verify_locations(context.get(), settings.ca_file.c_str(), nullptr) != 1) {
    return MakeError(settings.flag_prefix + "-ca " + settings.ca_file + ": " + OpenSslErrors());
  }
  SSL_CTX_set_verify(context.get(), SSL_VERIFY_PEER, VerifyCallback);
  return context;
}

Expected<std::shared_ptr<TlsContext>, std::string> TlsContext::Create(const TlsSettings& settings) {
  auto built = BuildServerContext(settings);
  if (!built) return MakeError(built.error());
  std::shared_ptr<TlsContext> context(new TlsContext(settings, /*peer=*/false));
  context->current_ = std::move(*built);
  return context;
}

Expected<std::shared_ptr<TlsContext>, std::string> TlsContext::CreatePeer(TlsSettings settings) {
  settings.require_client_cert = true;
  if (settings.ca_file.empty()) return MakeError(settings.flag_prefix + "-ca is needed: peers verify each other");
  auto server = BuildServerContext(settings);
  if (!server) return MakeError(server.error());
  auto client = BuildPeerClientContext(settings);
  if (!client) return MakeError(client.error());
  std::shared_ptr<TlsContext> context(new TlsContext(settings, /*peer=*/true));
  context->current_ = std::move(*server);
  context->client_ = std::move(*client);
  return context;
}

TlsContext::~TlsContext() = default;

Expected<void, std::string> TlsContext::Reload() {
  auto built = BuildServerContext(settings_);
  if (!built) return MakeError(built.error());
  std::shared_ptr<SSL_CTX> client;
  if (peer_) {
    auto made = BuildPeerClientContext(settings_);
    if (!made) return MakeError(made.error());
    client = std::move(*made);
  }
  std::lock_guard lock(mutex_);
  if (peer_) client_ = std::move(client);
  // Tickets issued under the old pair still resume.
  std::array<unsigned char, 80> keys{};
  if (SSL_CTX_get_tlsext_ticket_keys(current_.get(), keys.data(), keys.size()) == 1) {
    SSL_CTX_set_tlsext_ticket_keys(built->get(), keys.data(), keys.size());
  }
  current_ = std::move(*built);
  return {};
}

std::unique_ptr<TlsSession> TlsContext::NewSession() {
  std::shared_ptr<SSL_CTX> context;
  {
    std::lock_guard lock(mutex_);
    context = current_;
  }
  return std::make_unique<TlsSession>(std::move(context), /*server=*/true);
}

std::unique_ptr<TlsSession> TlsContext::NewClientSession() {
  std::shared_ptr<SSL_CTX> context;
  {
    std::lock_guard lock(mutex_);
    context = client_;
  }
  if (!context) return nullptr;
  return std::make_unique<TlsSession>(std::move(context), /*server=*/false);
}

}  // namespace estuary::io
