#include "io/uv/http_server.h"

#include <unordered_map>

#include "io/tls/tls_context.h"
#include "io/tls/tls_session.h"
#include "io/uv/http_request.h"

namespace estuary::io {
namespace {

constexpr int64_t kDefaultIdleTimeoutMs = 30'000;

const char* ReasonPhrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return "Status";
  }
}

void AppendResponse(std::string& out, const HttpResponse& response, bool keep_alive, bool with_body) {
  out += "HTTP/1.1 ";
  out += std::to_string(response.status);
  out += ' ';
  out += ReasonPhrase(response.status);
  out += "\r\nContent-Type: ";
  out += response.content_type;
  out += "\r\nContent-Length: ";
  out += std::to_string(response.body.size());
  for (const auto& [name, value] : response.headers) {
    out += "\r\n";
    out += name;
    out += ": ";
    out += value;
  }
  out += keep_alive ? "\r\nConnection: keep-alive\r\n\r\n" : "\r\nConnection: close\r\n\r\n";
  if (with_body) out += response.body;
}

}  // namespace

class HttpServer::State {
 public:
  State(UvLoop& loop_in, Handler handler_in) : loop(loop_in), handler(std::move(handler_in)) {}
  ~State() {
    alive.reset();  // deferred answers arriving later find nothing
    CloseAll();
  }

  void OnAccept(int fd);
  void OnData(TcpConnection* connection, std::string_view bytes);
  void ProcessRequests(TcpConnection* connection, std::string_view plaintext);
  void ArmIdleTimer(TcpConnection* connection);
  void Forget(TcpConnection* connection);
  void CloseAll();

  struct Session {
    std::shared_ptr<TcpConnection> connection;
    std::string buffer;
    TimerId idle_timer = 0;
    std::unique_ptr<TlsSession> tls;  // set_tls
    uint64_t id = 0;                  // tells a deferred answer this session from a later one at the same address
    bool waiting = false;             // a deferred answer is outstanding: later requests wait in `buffer`
  };
  // Hands the request to `deferred`; true if it took it.
  bool Defer(TcpConnection* connection, const HttpRequest& request);
  void OnDeferredAnswer(TcpConnection* connection, uint64_t id, bool keep_alive, bool with_body,
                        const HttpResponse& response);
  // Writes `response` (through TLS when the session has it).
  void Respond(Session& session, const HttpResponse& response, bool keep_alive, bool with_body);
  // Closes after what was written (a TLS session sends close_notify first).
  void CloseSession(Session& session);

  UvLoop& loop;
  Handler handler;
  Gate gate;
  DeferredHandler deferred;
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);  // weakly held by deferred answers
  uint64_t next_session_id = 1;
  std::shared_ptr<TlsContext> tls;
  std::unique_ptr<TcpListener> listener;
  uint16_t port = 0;
  int64_t idle_timeout_ms = kDefaultIdleTimeoutMs;
  std::unordered_map<TcpConnection*, Session> sessions;
};

void HttpServer::State::OnAccept(int fd) {
  std::shared_ptr<TcpConnection> connection = TcpConnection::Adopt(loop, fd);
  if (!connection) return;
  TcpConnection* key = connection.get();
  sessions[key].connection = connection;
  sessions[key].id = next_session_id++;
  if (tls) sessions[key].tls = tls->NewSession();
  // The handlers name the session by pointer only: the map owns it, and
  // CloseAll() drops the handlers before the State goes away.
  connection->SetHandlers({
      .on_data = [this, key](std::string_view bytes) { OnData(key, bytes); },
      .on_close = [this, key](int) { Forget(key); },
      .on_drain = nullptr,
  });
  ArmIdleTimer(key);
}

// The handler may Close() the server, which empties `sessions`: nothing
// from the session is used after the handler returns without a new lookup.
void HttpServer::State::OnData(TcpConnection* connection, std::string_view bytes) {
  std::string plaintext;
  if (auto it = sessions.find(connection); it != sessions.end() && it->second.tls) {
    TlsSession& session = *it->second.tls;
    const bool ok = session.Receive(bytes, plaintext);
    if (session.has_output()) {
      session.TakeOutput(connection->output_buffer());
      connection->MarkDirty();
    }
    if (!ok) return connection->Close();  // a failed handshake or close_notify
    bytes = plaintext;
  }
  ProcessRequests(connection, bytes);
}

void HttpServer::State::ProcessRequests(TcpConnection* connection, std::string_view bytes) {
  for (;;) {
    auto it = sessions.find(connection);
    if (it == sessions.end()) return;
    std::string& buffer = it->second.buffer;
    buffer.append(bytes);
    bytes = {};
    if (it->second.waiting) return;  // OnDeferredAnswer goes on with the buffer
    HttpParseResult parsed = ParseHttpRequest(buffer);
    if (parsed.status == HttpParseResult::Status::kIncomplete) return;
    if (parsed.status == HttpParseResult::Status::kBad) {
      buffer.clear();
      HttpResponse response{400, "text/plain; charset=utf-8", "bad request: " + parsed.error + "\n"};
      Respond(it->second, response, false, true);
      return CloseSession(it->second);
    }
    const HttpRequest& request = parsed.request;
    buffer.erase(0, request.consumed);
    std::optional<HttpResponse> refused;
    if (gate) refused = gate(request.method, request.target, request.authorization);
    if (!refused && deferred && Defer(connection, request)) return;
    HttpResponse response = refused ? std::move(*refused) : handler(request.method, request.target);
    it = sessions.find(connection);  // the handler may have closed the server
    if (it == sessions.end()) return;
    Respond(it->second, response, request.keep_alive, request.method != "HEAD");
    if (!request.keep_alive) return CloseSession(it->second);
    ArmIdleTimer(connection);
  }
}

bool HttpServer::State::Defer(TcpConnection* connection, const HttpRequest& request) {
  auto it = sessions.find(connection);
  const uint64_t id = it->second.id;
  it->second.waiting = true;
  Responder respond = [this, weak = std::weak_ptr<bool>(alive), connection, id, keep_alive = request.keep_alive,
                     with_body = request.method != "HEAD"](HttpResponse response) {
    if (weak.expired()) return;
    OnDeferredAnswer(connection, id, keep_alive, with_body, response);
  };
  if (deferred(request.method, request.target, std::move(respond))) return true;
  if (it = sessions.find(connection); it != sessions.end()) it->second.waiting = false;
  return false;
}

void HttpServer::State::OnDeferredAnswer(TcpConnection* connection, uint64_t id, bool keep_alive, bool with_body,
                                         const HttpResponse& response) {
  auto it = sessions.find(connection);
  if (it == sessions.end() || it->second.id != id || !it->second.waiting) return;
  it->second.waiting = false;
  Respond(it->second, response, keep_alive, with_body);
  if (!keep_alive) return CloseSession(it->second);
  ArmIdleTimer(connection);
  if (!it->second.buffer.empty()) ProcessRequests(connection, {});  // requests that came meanwhile
}

void HttpServer::State::Respond(Session& session, const HttpResponse& response, bool keep_alive, bool with_body) {
  TcpConnection& connection = *session.connection;
  if (!session.tls) {
    AppendResponse(connection.output_buffer(), response, keep_alive, with_body);
  } else {
    std::string plaintext;
    AppendResponse(plaintext, response, keep_alive, with_body);
    if (session.tls->Send(plaintext)) session.tls->TakeOutput(connection.output_buffer());
  }
  connection.MarkDirty();
}

void HttpServer::State::CloseSession(Session& session) {
  if (session.tls) {
    session.tls->Shutdown();
    session.tls->TakeOutput(session.connection->output_buffer());
    session.connection->MarkDirty();
  }
  session.connection->Close();
}

void HttpServer::State::ArmIdleTimer(TcpConnection* connection) {
  auto it = sessions.find(connection);
  if (it == sessions.end()) return;
  if (it->second.idle_timer != 0) loop.CancelTimer(it->second.idle_timer);
  it->second.idle_timer = loop.AddTimer(idle_timeout_ms, [this, connection] {
    auto found = sessions.find(connection);
    if (found == sessions.end()) return;
    found->second.idle_timer = 0;
    connection->Close();
  });
}

void HttpServer::State::Forget(TcpConnection* connection) {
  auto it = sessions.find(connection);
  if (it == sessions.end()) return;
  if (it->second.idle_timer != 0) loop.CancelTimer(it->second.idle_timer);
  sessions.erase(it);  // may release the last outside reference; the connection copes
}

void HttpServer::State::CloseAll() {
  if (listener) listener->Close();
  std::unordered_map<TcpConnection*, Session> closing;
  closing.swap(sessions);
  for (auto& [key, session] : closing) {
    if (session.idle_timer != 0) loop.CancelTimer(session.idle_timer);
    session.connection->SetHandlers({});
    session.connection->Close();
  }
}

Expected<std::unique_ptr<HttpServer>, std::string> HttpServer::Start(UvLoop& loop, const Endpoint& at,
                                                                     Handler handler) {
  auto state = std::make_unique<State>(loop, std::move(handler));
  State* raw = state.get();
  auto listener = TcpListener::Listen(loop, at, [raw](int fd) { raw->OnAccept(fd); });
  if (!listener) return MakeError(listener.error());
  state->listener = std::move(*listener);
  state->port = state->listener->port();
  std::unique_ptr<HttpServer> server(new HttpServer());
  server->state_ = std::move(state);
  return server;
}

uint16_t HttpServer::port() const { return state_->port; }

size_t HttpServer::connection_count() const { return state_->sessions.size(); }

void HttpServer::set_gate(Gate gate) { state_->gate = std::move(gate); }

void HttpServer::set_deferred(DeferredHandler deferred) { state_->deferred = std::move(deferred); }

void HttpServer::set_tls(std::shared_ptr<TlsContext> tls) { state_->tls = std::move(tls); }

void HttpServer::set_idle_timeout(int64_t ms) { state_->idle_timeout_ms = ms; }

void HttpServer::Close() { state_->CloseAll(); }

HttpServer::~HttpServer() = default;

}  // namespace estuary::io
