#pragma once
// Certificates for io/tls tests and the fuzz target, made with the OpenSSL
// API into a fresh temporary folder: a CA, a server certificate for
// "localhost", and client certificates signed by the CA with chosen
// validity. Test support only.
#include <string>

#include "io/tls/tls_context.h"

namespace estuary::io::test_support {

struct CertificateFiles {
  std::string cert;
  std::string key;
};

class TestCertificates {
 public:
  // Makes the folder, the CA (named `ca_name`) and the server pair.
  explicit TestCertificates(const std::string& ca_name = "Test CA");
  ~TestCertificates();  // removes the folder
  TestCertificates(const TestCertificates&) = delete;
  TestCertificates& operator=(const TestCertificates&) = delete;

  // A client certificate named `common_name`, valid from now + `from_s` to
  // now + `until_s` seconds, signed by this CA (or self-signed).
  CertificateFiles Client(const std::string& common_name, long from_s = -60, long until_s = 86'400,
                          bool self_signed = false);
  // Server settings over the server pair; `ca` set: clients are verified.
  TlsSettings Server(bool verify_clients = false, bool require = false) const;

  const std::string& ca_file() const { return ca_file_; }
  const std::string& folder() const { return folder_; }

 private:
  std::string folder_;
  std::string ca_file_;
  std::string ca_key_file_;
  CertificateFiles server_;
  int serial_ = 1;
};

}  // namespace estuary::io::test_support
