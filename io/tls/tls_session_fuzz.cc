// libFuzzer target: bytes from the network into a server TlsSession (the
// ClientHello and records a TLS port reads before anything else runs).
// OpenSSL parses them; what is ours is the BIO, the state changes and the
// error path, which must not crash or leak whatever arrives.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "io/tls/tls_context.h"
#include "io/tls/tls_session.h"
#include "io/tls/tls_test_certs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static estuary::io::test_support::TestCertificates certs;
  static std::shared_ptr<estuary::io::TlsContext> context = *estuary::io::TlsContext::Create(certs.Server(true));
  auto session = context->NewSession();
  std::string plaintext;
  // Two reads: the split exercises a record cut across reads.
  const size_t half = size / 2;
  session->Receive(std::string_view(reinterpret_cast<const char*>(data), half), plaintext);
  session->Receive(std::string_view(reinterpret_cast<const char*>(data) + half, size - half), plaintext);
  std::string output;
  session->TakeOutput(output);
  return 0;
}
