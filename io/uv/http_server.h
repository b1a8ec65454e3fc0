#pragma once
// HttpServer: a small HTTP/1.1 server for the admin listener
// (/healthz, /metrics, /api/...). GET only; one request per connection is
// enough for probes and Prometheus, but keep-alive is honoured. Requests
// over 8 KiB or malformed get 400 and a close. Runs on one UvLoop.
#include <functional>
#include <memory>
#include <string>

#include "io/uv/tcp.h"

namespace estuary::io {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const std::string& method, const std::string& path)>;
  static Expected<std::unique_ptr<HttpServer>, std::string> Start(UvLoop& loop,
                                                                       const Endpoint& at,
                                                                       Handler handler);
  uint16_t port() const;
  void Close();
  ~HttpServer();

 private:
  class State;
  HttpServer() = default;
  std::unique_ptr<State> state_;
};

}  // namespace estuary::io
