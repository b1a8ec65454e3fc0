#pragma once
// A blocking HTTP/1.1 client for estuaryctl: one request per connection
// ("Connection: close"), a Content-Length or read-to-close body, HTTPS with
// SetAdminCa, no chunked encoding (the admin listener sends none).
#include <cstdint>
#include <string>

#include "base/expected.h"

namespace estuary::ctl {

struct HttpReply {
  int status = 0;
  std::string content_type;
  std::string body;
};

// `host` is an IPv4/IPv6 address or a name; `timeout_ms` bounds the
// connect and every read. Errors are one readable line.
// The admin token (estuaryctl --token-file) sent as `Authorization: Bearer`
// on every request from now on; "" sends none. One per process: estuaryctl
// runs one command.
void SetBearerToken(std::string token);
// HTTPS (estuaryctl --admin-ca, the node's --admin-tls): the node's
// certificate must verify against this CA file and name the --admin host
// (DNS name or IP address in its subjectAltName); "" = plain HTTP.
void SetAdminCa(std::string ca_file);

Expected<HttpReply, std::string> HttpRequest(const std::string& host, uint16_t port, const std::string& method,
                                             const std::string& target, int timeout_ms = 5000);

}  // namespace estuary::ctl
