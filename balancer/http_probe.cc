#include "balancer/http_probe.h"

#include <cstdlib>
#include <memory>

namespace estuary::balancer {
namespace {

struct Request : std::enable_shared_from_this<Request> {
  io::UvLoop* loop = nullptr;
  std::shared_ptr<io::TcpConnection> connection;
  std::function<void(const HttpAnswer&)> done;
  std::string received;
  io::TimerId timer = 0;
  bool answered = false;

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
             int64_t timeout_ms, std::function<void(const HttpAnswer&)> done, const std::string& bearer) {
  auto request = std::make_shared<Request>();
  request->loop = &loop;
  request->done = std::move(done);
  std::string text = method + " " + path + " HTTP/1.1\r\nHost: " + to.ToString() +
                     "\r\nConnection: close\r\nContent-Length: 0\r\n";
  if (!bearer.empty()) text += "Authorization: Bearer " + bearer + "\r\n";
  text += "\r\n";
  std::weak_ptr<Request> weak = request;
  request->connection = io::TcpConnection::Connect(loop, to, [weak, text](int status) {
    auto self = weak.lock();
    if (!self || self->answered) return;
    if (status != 0) return self->Answer({0, {}, std::string("connect: ") + uv_err_name(status)});
    self->connection->Write(text);
  });
  io::TcpConnection::Handlers handlers;
  handlers.on_data = [weak](std::string_view bytes) {
    auto self = weak.lock();
    if (!self || self->answered) return;
    self->received.append(bytes);
    if (self->received.size() > 1024 * 1024) return self->Answer({0, {}, "response too large"});
    self->TryParse(false);
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
