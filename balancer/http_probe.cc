#include "balancer/http_probe.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <cstdlib>
#include <memory>

#include "io/tls/tls_session.h"

namespace estuary::balancer {
namespace {

struct Request : std::enable_shared_from_this<Request> {
  io::UvLoop* loop = nullptr;
  std::shared_ptr<io::TcpConnection> connection;
  std::function<void(const HttpAnswer&)> done;
  std::string received;
  io::TimerId timer = 0;
  bool answered = false;
  // HTTPS: the session, and the request until the handshake is done.
  std::unique_ptr<io::TlsSession> tls;
  std::string request_text;

  void Flush() {
    std::string out;
    tls->TakeOutput(out);
    if (!out.empty()) connection->Write(out);
  }

  // Bytes from the socket: as they are, or decrypted.
  void OnBytes(std::string_view bytes) {
    if (!tls) {
      received.append(bytes);
    } else {
      const bool ok = tls->Receive(bytes, received);
      if (!ok && tls->state() == io::TlsSession::State::kFailed) {
        Flush();
        const long verified = SSL_get_verify_result(tls->raw());
        if (verified != X509_V_OK) {
          return Answer({0, {}, std::string("TLS: the node's certificate: ") + X509_verify_cert_error_string(verified)});
        }
        return Answer({0, {}, "TLS: " + tls->error()});
      }
      if (tls->open() && !request_text.empty()) {
        tls->Send(request_text);
        request_text.clear();
      }
      Flush();
    }
    if (received.size() > 1024 * 1024) return Answer({0, {}, "response too large"});
    TryParse(false);
  }

  void Answer(HttpAnswer answer) {
    if (answered) return;
    answered = true;
    auto keep = shared_from_this();  // cancelling the timer drops its reference
    if (timer != 0) loop->CancelTimer(timer);
    timer = 0;
    auto callback = std::move(done);
    done = nullptr;
    if (connection) connection->Close();
    connection.reset();
    callback(answer);
  }

  // A complete response (by Content-Length, or at EOF) as an answer.
  bool TryParse(bool at_eof) {
    const size_t header_end = received.find("\r\n\r\n");
    if (header_end == std::string::npos) return false;
    if (received.compare(0, 9, "HTTP/1.1 ") != 0 && received.compare(0, 9, "HTTP/1.0 ") != 0) {
      Answer({0, {}, "not an HTTP response"});
      return true;
    }
    const int status = std::atoi(received.c_str() + 9);
    size_t length = std::string::npos;
    const std::string headers = received.substr(0, header_end);
    for (const char* name : {"Content-Length: ", "content-length: "}) {
      const size_t at = headers.find(name);
      if (at != std::string::npos) length = std::strtoul(headers.c_str() + at + 16, nullptr, 10);
    }
    const size_t body_start = header_end + 4;
    if (length != std::string::npos && received.size() - body_start >= length) {
      Answer({status, received.substr(body_start, length), {}});
      return true;
    }
    if (!at_eof) return false;
    Answer({status, received.substr(body_start), {}});
    return true;
  }
};

}  // namespace

void HttpGet(io::UvLoop& loop, const io::Endpoint& to, const std::string& method, const std::string& path,
             int64_t timeout_ms, std::function<void(const HttpAnswer&)> done, const std::string& bearer,
             const std::shared_ptr<ssl_ctx_st>& tls) {
  auto request = std::make_shared<Request>();
  request->loop = &loop;
  request->done = std::move(done);
  std::string text = method + " " + path + " HTTP/1.1\r\nHost: " + to.ToString() +
                     "\r\nConnection: close\r\nContent-Length: 0\r\n";
  if (!bearer.empty()) text += "Authorization: Bearer " + bearer + "\r\n";
  text += "\r\n";
  std::weak_ptr<Request> weak = request;
  if (tls) {
    request->tls = std::make_unique<io::TlsSession>(tls, /*server=*/false);
    request->request_text = text;
    const std::string host = to.host;
    X509_VERIFY_PARAM* param = SSL_get0_param(request->tls->raw());
    if (X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) != 1) {
      SSL_set_tlsext_host_name(request->tls->raw(), host.c_str());
      SSL_set1_host(request->tls->raw(), host.c_str());
    }
  }
  request->connection = io::TcpConnection::Connect(loop, to, [weak, text](int status) {
    auto self = weak.lock();
    if (!self || self->answered) return;
    if (status != 0) return self->Answer({0, {}, std::string("connect: ") + uv_err_name(status)});
    if (!self->tls) return self->connection->Write(text);
    self->tls->Connect();
    self->Flush();
  });
  io::TcpConnection::Handlers handlers;
  handlers.on_data = [weak](std::string_view bytes) {
    auto self = weak.lock();
    if (!self || self->answered) return;
    self->OnBytes(bytes);
  };
  handlers.on_close = [weak](int status) {
    auto self = weak.lock();
    if (!self || self->answered) return;
    if (!self->TryParse(true)) {
      self->Answer({0, {}, std::string("closed before a response: ") + (status ? uv_err_name(status) : "EOF")});
    }
  };
  request->connection->SetHandlers(std::move(handlers));
  // The timer holds the request alive until the answer.
  request->timer = loop.AddTimer(timeout_ms, [request] {
    request->timer = 0;
    if (request->connection) request->connection->Abort();
    request->Answer({0, {}, "timed out"});
  });
}

}  // namespace estuary::balancer
