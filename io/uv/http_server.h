#pragma once
// HttpServer: a small HTTP/1.1 server for the admin listener
// (/healthz, /metrics, /api/...). GET only; one request per connection is
// enough for probes and Prometheus, but keep-alive is honoured. Requests
// over 8 KiB or malformed get 400 and a close. Runs on one UvLoop.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "io/uv/tcp.h"

namespace estuary::io {

class TlsContext;

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  // Extra header fields ("WWW-Authenticate", "Bearer"); names and values
  // are the handler's, written as given.
  std::vector<std::pair<std::string, std::string>> headers = {};
};

// The handler sees every well-formed request, whatever its method, and
// answers 404 or 405 itself; `path` is the request target as sent (query
// included). HEAD responses carry the headers only. A connection with no
// complete request for the idle timeout (default 30 s) is closed.
// Close() from inside the handler is allowed (that request's response is
// dropped); destroying the server from inside it is not: Post() that.
class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const std::string& method, const std::string& path)>;
  static Expected<std::unique_ptr<HttpServer>, std::string> Start(UvLoop& loop,
                                                                       const Endpoint& at,
                                                                       Handler handler);
  // Runs before the handler on every well-formed request: a response it
  // returns is sent instead of calling the handler (the admin token check,
  // io/uv/admin_token.h). Arguments: method, path, the Authorization value.
  using Gate = std::function<std::optional<HttpResponse>(std::string_view method, std::string_view path,
                                                         std::string_view authorization)>;
  void set_gate(Gate gate);
  // Answers that come later (data gathered from other threads): a
  // deferred handler runs after the gate and before the handler; returning
  // true takes the request, and `respond` must then be called once, on
  // this server's loop (later is fine; a call after the connection or the
  // server is gone does nothing). Further requests on that connection wait
  // for it. Returning false passes the request on to the handler.
  using Responder = std::function<void(HttpResponse)>;
  using DeferredHandler = std::function<bool(const std::string& method, const std::string& path, Responder respond)>;
  void set_deferred(DeferredHandler deferred);
  // HTTPS: connections accepted from now on speak TLS with sessions of
  // `tls` (estuaryd --admin-tls: the --tls-cert pair); null: plain HTTP.
  // A handshake that does not finish within the idle timeout is closed.
  void set_tls(std::shared_ptr<TlsContext> tls);
  uint16_t port() const;
  size_t connection_count() const;
  void set_idle_timeout(int64_t ms);
  // Stops listening and closes every connection (queued responses are
  // still written). Safe to call twice; the destructor calls it.
  void Close();
  ~HttpServer();

 private:
  class State;
  HttpServer() = default;
  std::unique_ptr<State> state_;
};

}  // namespace estuary::io
