#include "io/tls/tls_test_certs.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>

namespace estuary::io::test_support {
namespace {

using Key = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using Cert = std::unique_ptr<X509, decltype(&X509_free)>;

Key NewKey() { return Key(EVP_EC_gen("P-256"), EVP_PKEY_free); }

void AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX context;
  X509V3_set_ctx_nodb(&context);
  X509V3_set_ctx(&context, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, &context, nid, value);
  if (extension == nullptr) throw std::runtime_error("bad test certificate extension");
  X509_add_ext(cert, extension, -1);
  X509_EXTENSION_free(extension);
}

// `issuer` null: self-signed with `key`.
Cert Make(const std::string& common_name, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key, int serial,
          long from_s, long until_s, bool ca) {
  Cert cert(X509_new(), X509_free);
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), from_s);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), until_s);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(common_name.c_str()),
                             -1, -1, 0);
  X509_set_issuer_name(cert.get(), issuer ? X509_get_subject_name(issuer) : name);
  X509* signer = issuer ? issuer : cert.get();
  AddExtension(cert.get(), signer, NID_basic_constraints, ca ? "critical,CA:TRUE" : "CA:FALSE");
  if (!ca) AddExtension(cert.get(), signer, NID_subject_alt_name, "DNS:localhost");
  X509_sign(cert.get(), issuer_key ? issuer_key : key, EVP_sha256());
  return cert;
}

void Write(const std::string& path, X509* cert) {
  FILE* file = std::fopen(path.c_str(), "w");
  PEM_write_X509(file, cert);
  std::fclose(file);
}

void Write(const std::string& path, EVP_PKEY* key) {
  FILE* file = std::fopen(path.c_str(), "w");
  PEM_write_PrivateKey(file, key, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(file);
}

Key ReadKey(const std::string& path) {
  FILE* file = std::fopen(path.c_str(), "r");
  Key key(PEM_read_PrivateKey(file, nullptr, nullptr, nullptr), EVP_PKEY_free);
  std::fclose(file);
  return key;
}

Cert ReadCert(const std::string& path) {
  FILE* file = std::fopen(path.c_str(), "r");
  Cert cert(PEM_read_X509(file, nullptr, nullptr, nullptr), X509_free);
  std::fclose(file);
  return cert;
}

}  // namespace

TestCertificates::TestCertificates(const std::string& ca_name) {
  std::string pattern = (std::filesystem::temp_directory_path() / "estuary-tls-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  folder_ = pattern;
  ca_file_ = folder_ + "/ca.pem";
  ca_key_file_ = folder_ + "/ca.key";
  Key ca_key = NewKey();
  Cert ca = Make(ca_name, ca_key.get(), nullptr, nullptr, serial_++, -60, 86'400, true);
  Write(ca_file_, ca.get());
  Write(ca_key_file_, ca_key.get());
  server_ = Client("localhost");
}

TestCertificates::~TestCertificates() {
  std::error_code ignored;
  std::filesystem::remove_all(folder_, ignored);
}

CertificateFiles TestCertificates::Client(const std::string& common_name, long from_s, long until_s,
                                          bool self_signed) {
  Key key = NewKey();
  Key ca_key = ReadKey(ca_key_file_);
  Cert ca = ReadCert(ca_file_);
  Cert cert = self_signed ? Make(common_name, key.get(), nullptr, nullptr, serial_, from_s, until_s, false)
                          : Make(common_name, key.get(), ca.get(), ca_key.get(), serial_, from_s, until_s, false);
  CertificateFiles files{folder_ + "/cert-" + std::to_string(serial_) + ".pem",
                         folder_ + "/key-" + std::to_string(serial_) + ".pem"};
  ++serial_;
  Write(files.cert, cert.get());
  Write(files.key, key.get());
  return files;
}

TlsSettings TestCertificates::Server(bool verify_clients, bool require) const {
  TlsSettings settings;
  settings.cert_file = server_.cert;
  settings.key_file = server_.key;
  if (verify_clients) settings.ca_file = ca_file_;
  settings.require_client_cert = require;
  return settings;
}

}  // namespace estuary::io::test_support
