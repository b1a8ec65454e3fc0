#pragma once
// TlsSession: one TLS connection's state (an OpenSSL SSL on two memory
// BIOs). The caller moves bytes: ciphertext from the network goes into
// Receive(), which returns the plaintext it decrypted and leaves ciphertext
// to send (handshake messages, tickets, alerts) for TakeOutput(); Send()
// encrypts plaintext. No socket, no clock: the handshake timeout belongs to
// the caller. See tls_context.h for threads.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

using ssl_st = struct ssl_st;
using ssl_ctx_st = struct ssl_ctx_st;
using ssl_session_st = struct ssl_session_st;

namespace estuary::io {

struct TlsSessionBio;  // tls_session.cc

// Drains this thread's OpenSSL error queue into one line.
std::string OpenSslErrors();

// What the verify callback saw about a refused client certificate.
struct TlsSessionNotes {
  long verify_error = 0;  // X509_V_ERR_*, 0 = none
  std::string subject;    // of the refused certificate
};

class TlsSession {
 public:
  enum class State : uint8_t {
    kHandshaking,
    kOpen,
    kFailed,  // handshake or record error; error() says what, TakeOutput() may hold an alert
    kClosed,  // the peer sent close_notify
  };

  // `server`: accept (the broker's side); false: connect (tests, benches).
  TlsSession(std::shared_ptr<ssl_ctx_st> context, bool server);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  // Starts a client handshake (its ClientHello goes to TakeOutput()),
  // checking the server's certificate names `server_name` (SNI too) when it
  // is set, and offering `resume` (a ticket from TakeTicket()) when given.
  // A server session waits for the client's first bytes instead.
  void Connect(const std::string& server_name = {}, const std::shared_ptr<ssl_session_st>& resume = nullptr);
  // Client side: the session to resume later; null until it is resumable
  // (TLS 1.3: once the server's ticket arrived, i.e. after the first bytes
  // following the handshake).
  std::shared_ptr<ssl_session_st> TakeTicket() const;
  // Ciphertext from the peer. Appends what it decrypts to `plaintext`.
  // Returns false once the session failed or closed (see state()).
  bool Receive(std::string_view ciphertext, std::string& plaintext);
  // Encrypts `plaintext` (only once open); the records go to TakeOutput().
  bool Send(std::string_view plaintext);
  // Appends pending ciphertext to `out` and forgets it.
  void TakeOutput(std::string& out);
  bool has_output() const;
  // Queues a close_notify alert (for TakeOutput()).
  void Shutdown();

  State state() const { return state_; }
  bool open() const { return state_ == State::kOpen; }
  // Why the session failed, in words, e.g. "client certificate refused:
  // certificate has expired (expired) subject CN=device-7".
  const std::string& error() const { return error_; }
  // The verified client certificate's subject common name, once open.
  std::optional<std::string> peer_common_name() const;
  bool resumed() const;
  std::string protocol_version() const;  // "TLSv1.3"
  ssl_st* raw() { return ssl_; }

 private:
  void Fail(int ssl_result);
  bool Handshake();
  bool ReadRecords(std::string& plaintext);

  ssl_st* ssl_ = nullptr;
  std::shared_ptr<ssl_ctx_st> context_;  // the one ssl_ was made from (freed after it)
  State state_ = State::kHandshaking;
  std::string error_;
  std::unique_ptr<TlsSessionBio> bio_;  // the SSL's BIO points here
  TlsSessionNotes notes_;               // the SSL's app data
};

// Names a certificate verification error in the words operators search
// for: "expired", "not yet valid", "unknown CA", "self-signed", "revoked",
// or "invalid". Takes an X509_V_ERR_* code.
const char* CertificateRefusal(long verify_error);

}  // namespace estuary::io
