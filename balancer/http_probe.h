#pragma once
// HttpGet: one HTTP/1.1 GET over a fresh loopback-or-LAN connection, for the
// balancer's health checks and load polls. Answers once, on the loop's
// thread, with the status code and body, or status 0 and an error (refused,
// timed out, malformed). The connection is closed after the answer.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "io/uv/tcp.h"

using ssl_ctx_st = struct ssl_ctx_st;

namespace estuary::balancer {

struct HttpAnswer {
  int status = 0;  // 0: no HTTP answer (see error)
  std::string body;
  std::string error;
};

// `bearer`: the admin token (--admin-token-file) sent as `Authorization:
// Bearer`, "" for none. `tls` (a client context, io::BuildClientContext):
// HTTPS, the server's certificate verified against its CA and its IP
// address (or name) against `to`'s host; null: plain HTTP.
void HttpGet(io::UvLoop& loop, const io::Endpoint& to, const std::string& method, const std::string& path,
             int64_t timeout_ms, std::function<void(const HttpAnswer&)> done, const std::string& bearer = {},
             const std::shared_ptr<ssl_ctx_st>& tls = nullptr);

}  // namespace estuary::balancer
