#pragma once
// A blocking HTTP/1.1 GET on loopback with a deadline, for the launcher's
// health checks (/healthz, /api/cluster/members). Not a general client:
// Connection: close, the body is everything after the headers.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace estuary::launcher {

struct HttpReply {
  int status = 0;
  std::string body;
};

// The admin token (the nodes' --admin-token-file) sent as `Authorization:
// Bearer` on every GET from now on; "" sends none. One launcher per process.
void SetBearerToken(std::string token);

// nullopt when the connection fails or no complete reply came in `timeout`.
std::optional<HttpReply> HttpGet(const std::string& host, uint16_t port, const std::string& path,
                                 std::chrono::milliseconds timeout);

// "HOST:PORT" split; port 0 when malformed.
std::pair<std::string, uint16_t> SplitAddress(const std::string& address);

}  // namespace estuary::launcher
