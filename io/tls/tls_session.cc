#include "io/tls/tls_session.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <array>
#include <cstring>

namespace estuary::io {

// The session's BIO reads from the ciphertext Receive() was given and
// appends what OpenSSL writes to the session's output string: no buffer of
// its own, so an idle session holds no ciphertext memory (memory BIOs keep
// their largest size for good).
struct TlsSessionBio {
  std::string_view source;  // during Receive() only
  std::string output;
};

namespace {

int BioWrite(BIO* bio, const char* data, int size) {
  BIO_clear_retry_flags(bio);
  static_cast<TlsSessionBio*>(BIO_get_data(bio))->output.append(data, static_cast<size_t>(size));
  return size;
}

int BioRead(BIO* bio, char* data, int size) {
  BIO_clear_retry_flags(bio);
  auto& source = static_cast<TlsSessionBio*>(BIO_get_data(bio))->source;
  if (source.empty()) {
    BIO_set_retry_read(bio);
    return -1;
  }
  const size_t count = std::min(source.size(), static_cast<size_t>(size));
  std::memcpy(data, source.data(), count);
  source.remove_prefix(count);
  return static_cast<int>(count);
}

long BioControl(BIO*, int command, long, void*) { return command == BIO_CTRL_FLUSH ? 1 : 0; }

BIO_METHOD* SessionBioMethod() {
  static BIO_METHOD* method = [] {
    BIO_METHOD* made = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "estuary-tls-session");
    BIO_meth_set_write(made, BioWrite);
    BIO_meth_set_read(made, BioRead);
    BIO_meth_set_ctrl(made, BioControl);
    BIO_meth_set_create(made, [](BIO* bio) {
      BIO_set_init(bio, 1);
      return 1;
    });
    return made;
  }();
  return method;
}

std::optional<std::string> CommonName(X509* cert) {
  X509_NAME* name = X509_get_subject_name(cert);
  const int index = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
  if (index < 0) return std::nullopt;
  unsigned char* utf8 = nullptr;
  const int length = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, index)));
  if (length < 0) return std::nullopt;
  std::string out(reinterpret_cast<char*>(utf8), static_cast<size_t>(length));
  OPENSSL_free(utf8);
  return out;
}

}  // namespace

std::string OpenSslErrors() {
  std::string text;
  while (unsigned long code = ERR_get_error()) {
    std::array<char, 256> buffer{};
    ERR_error_string_n(code, buffer.data(), buffer.size());
    if (!text.empty()) text += "; ";
    text += buffer.data();
  }
  return text.empty() ? "unknown OpenSSL error" : text;
}

const char* CertificateRefusal(long verify_error) {
  switch (verify_error) {
    case X509_V_ERR_CERT_HAS_EXPIRED:
    case X509_V_ERR_CRL_HAS_EXPIRED:
      return "expired";
    case X509_V_ERR_CERT_NOT_YET_VALID:
    case X509_V_ERR_CRL_NOT_YET_VALID:
      return "not yet valid";
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
      return "unknown CA";
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
      return "self-signed";
    case X509_V_ERR_CERT_REVOKED:
      return "revoked";
    default:
      return "invalid";
  }
}

TlsSession::TlsSession(std::shared_ptr<ssl_ctx_st> context, bool server)
    : ssl_(SSL_new(context.get())), context_(std::move(context)), bio_(std::make_unique<TlsSessionBio>()) {
  BIO* bio = BIO_new(SessionBioMethod());
  BIO_set_data(bio, bio_.get());
  SSL_set_bio(ssl_, bio, bio);  // one reference, taken by the SSL
  SSL_set_app_data(ssl_, &notes_);
  if (server) {
    SSL_set_accept_state(ssl_);
  } else {
    SSL_set_connect_state(ssl_);
  }
}

TlsSession::~TlsSession() { SSL_free(ssl_); }

void TlsSession::Connect(const std::string& server_name, const std::shared_ptr<ssl_session_st>& resume) {
  if (!server_name.empty()) {
    SSL_set_tlsext_host_name(ssl_, server_name.c_str());
    SSL_set1_host(ssl_, server_name.c_str());
  }
  if (resume) SSL_set_session(ssl_, resume.get());
  (void)Handshake();
}

std::shared_ptr<ssl_session_st> TlsSession::TakeTicket() const {
  SSL_SESSION* session = SSL_get1_session(ssl_);
  if (session == nullptr) return nullptr;
  // TLS 1.3: the session is resumable only once the server's ticket came
  // (after the handshake); until then there is nothing to offer.
  if (SSL_SESSION_is_resumable(session) != 1) {
    SSL_SESSION_free(session);
    return nullptr;
  }
  return std::shared_ptr<ssl_session_st>(session, SSL_SESSION_free);
}

bool TlsSession::Receive(std::string_view ciphertext, std::string& plaintext) {
  if (state_ == State::kFailed || state_ == State::kClosed) return false;
  bio_->source = ciphertext;
  bool ok = state_ != State::kHandshaking || Handshake();
  if (ok && state_ == State::kOpen) ok = ReadRecords(plaintext);
  bio_->source = {};
  return ok;
}

bool TlsSession::Handshake() {
  const int result = SSL_do_handshake(ssl_);
  if (result == 1) {
    state_ = State::kOpen;
    return true;
  }
  const int error = SSL_get_error(ssl_, result);
  if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) return true;
  Fail(error);
  return false;
}

bool TlsSession::ReadRecords(std::string& plaintext) {
  constexpr size_t kChunk = 16 * 1024;
  while (true) {
    const size_t before = plaintext.size();
    plaintext.resize(before + kChunk);
    size_t got = 0;
    const int result = SSL_read_ex(ssl_, plaintext.data() + before, kChunk, &got);
    plaintext.resize(before + got);
    if (result == 1) continue;
    const int error = SSL_get_error(ssl_, result);
    if (error == SSL_ERROR_WANT_READ) return true;
    if (error == SSL_ERROR_ZERO_RETURN) {
      state_ = State::kClosed;
      ERR_clear_error();
      return false;
    }
    Fail(error);
    return false;
  }
}

void TlsSession::Fail(int ssl_error) {
  state_ = State::kFailed;
  if (notes_.verify_error != 0) {
    const char* whose = SSL_is_server(ssl_) == 1 ? "client" : "server";
    error_ = std::string(whose) + " certificate refused: " + X509_verify_cert_error_string(notes_.verify_error) +
             " (" + CertificateRefusal(notes_.verify_error) + "), subject " + notes_.subject;
    ERR_clear_error();
    return;
  }
  if (ssl_error == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
    error_ = "the peer closed during the handshake";
    return;
  }
  error_ = OpenSslErrors();
}

bool TlsSession::Send(std::string_view plaintext) {
  if (state_ != State::kOpen) return false;
  while (!plaintext.empty()) {
    size_t written = 0;
    const int result = SSL_write_ex(ssl_, plaintext.data(), plaintext.size(), &written);
    if (result != 1) {
      Fail(SSL_get_error(ssl_, result));
      return false;
    }
    plaintext.remove_prefix(written);
  }
  return true;
}

void TlsSession::TakeOutput(std::string& out) {
  std::string& pending = bio_->output;
  out.append(pending);
  pending.clear();
  // What was written goes to the socket's buffer at once: an idle session
  // keeps no output buffer (a handshake flight is a few KiB).
  if (pending.capacity() > 256) std::string().swap(pending);
}

bool TlsSession::has_output() const { return !bio_->output.empty(); }

void TlsSession::Shutdown() {
  if (state_ == State::kOpen) (void)SSL_shutdown(ssl_);
  ERR_clear_error();
}

std::optional<std::string> TlsSession::peer_common_name() const {
  if (state_ != State::kOpen || SSL_get_verify_result(ssl_) != X509_V_OK) return std::nullopt;
  X509* cert = SSL_get0_peer_certificate(ssl_);
  if (cert == nullptr) return std::nullopt;
  return CommonName(cert);
}

bool TlsSession::resumed() const { return SSL_session_reused(ssl_) == 1; }

std::string TlsSession::protocol_version() const { return SSL_get_version(ssl_); }

}  // namespace estuary::io
