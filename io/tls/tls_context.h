#pragma once
// TLS for client listeners on OpenSSL 3 (docs/security.md "TLS"): a
// TlsContext is the server side's configuration (certificate chain and key,
// client CA bundle, CRL, minimum version, ciphers, session tickets), and a
// TlsSession is one connection's state on memory BIOs, fed and drained by
// the caller, with no socket inside (so a session can move between loops
// with its socket, and tests pair two sessions in memory).
//
// Threads: a TlsContext is shared by every shard; NewSession() and Reload()
// are thread-safe. A TlsSession is used by one thread at a time; it may be
// handed to another thread through a Mailbox (which orders the handover).
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "base/expected.h"

using ssl_ctx_st = struct ssl_ctx_st;

namespace estuary::io {

class TlsSession;

struct TlsSettings {
  std::string cert_file;  // PEM chain, leaf first
  std::string key_file;   // PEM private key
  std::string ca_file;    // PEM bundle of CAs that sign client certificates; empty: none asked for
  std::string crl_file;   // PEM CRLs of those CAs; empty: no revocation check
  std::string min_version = "1.2";  // "1.2" or "1.3"
  bool require_client_cert = false;  // refuse a handshake without a verified client certificate
  // Names the flags in error messages: "--tls" (client listeners) or
  // "--cluster-tls" (inter-node links).
  std::string flag_prefix = "--tls";
};

class TlsContext {
 public:
  // Reads the files and builds the context; errors name the file and what
  // OpenSSL said.
  static Expected<std::shared_ptr<TlsContext>, std::string> Create(const TlsSettings& settings);
  // Both ends of mutual TLS between peers (the inter-node links,
  // docs/internode.md "TLS"): each side presents cert_file and verifies the
  // other's certificate chain against ca_file (no host name check: the CA
  // is the cluster's own). Accepting sessions come from NewSession(),
  // dialling ones from NewClientSession(). min_version applies to both
  // ends; require_client_cert is forced on.
  static Expected<std::shared_ptr<TlsContext>, std::string> CreatePeer(TlsSettings settings);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  // Reads the files again (SIGHUP). On success new sessions use the new
  // certificate, key, CA and CRL; sessions already made keep theirs, and
  // session tickets issued before still resume (the ticket keys are kept).
  // On failure nothing changes.
  Expected<void, std::string> Reload();
  // A server-side session for one accepted connection.
  std::unique_ptr<TlsSession> NewSession();
  // A client-side session (CreatePeer contexts only; nullptr otherwise).
  std::unique_ptr<TlsSession> NewClientSession();
  const TlsSettings& settings() const { return settings_; }

 private:
  explicit TlsContext(TlsSettings settings, bool peer) : settings_(std::move(settings)), peer_(peer) {}
  TlsSettings settings_;
  const bool peer_;
  std::mutex mutex_;
  std::shared_ptr<ssl_ctx_st> current_;  // guarded by mutex_
  std::shared_ptr<ssl_ctx_st> client_;   // CreatePeer only; guarded by mutex_
};

// Builds an SSL_CTX from `settings` (exposed for TlsContext and its tests).
Expected<std::shared_ptr<ssl_ctx_st>, std::string> BuildServerContext(const TlsSettings& settings);
// The dialling side of CreatePeer: presents the certificate, verifies the
// peer's chain against ca_file, records why a certificate was refused.
Expected<std::shared_ptr<ssl_ctx_st>, std::string> BuildPeerClientContext(const TlsSettings& settings);
// A client SSL_CTX (tests, estuary-bench) that verifies the server against
// `ca_file` (and its name, when `TlsSession::Connect` is given one) and
// presents `cert_file`/`key_file` when they are set.
Expected<std::shared_ptr<ssl_ctx_st>, std::string> BuildClientContext(const std::string& ca_file,
                                                                       const std::string& cert_file = {},
                                                                       const std::string& key_file = {});

}  // namespace estuary::io
