#include "io/uv/http_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "io/uv/test_util.h"

namespace estuary::io {
namespace {

using testing::BlockingClient;
using testing::RunUntil;

size_t Count(const std::string& text, std::string_view needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++count;
  return count;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = HttpServer::Start(loop_, {"127.0.0.1", 0}, [this](const std::string& method, const std::string& path) {
      ++requests_;
      if (method != "GET" && method != "HEAD") return HttpResponse{405, "text/plain; charset=utf-8", "method\n"};
      if (path == "/healthz") return HttpResponse{200, "text/plain; charset=utf-8", "ok\n"};
      return HttpResponse{404, "text/plain; charset=utf-8", "not found\n"};
    });
    ASSERT_TRUE(server.has_value()) << server.error();
    server_ = std::move(*server);
  }

  // Runs a blocking client on a helper thread while this thread runs the
  // loop; `talk` does the client's side and returns what it read.
  std::string Talk(const std::function<std::string(BlockingClient&)>& talk) {
    std::string result;
    std::atomic<bool> done{false};
    std::thread client([&, port = server_->port()] {
      BlockingClient socket(port);
      result = talk(socket);
      done = true;
      loop_.mailbox().Send([] {});
    });
    bool finished = RunUntil(loop_, [&] { return done.load(); });
    client.join();
    EXPECT_TRUE(finished);
    return result;
  }

  UvLoop loop_;
  std::unique_ptr<HttpServer> server_;
  int requests_ = 0;
};

TEST_F(HttpServerTest, AnswersGetHealthz) {
  std::string response = Talk([](BlockingClient& socket) {
    socket.SendAll("GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    return socket.ReadToEnd();
  });
  EXPECT_EQ(response,
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 3\r\n"
            "Connection: close\r\n\r\nok\n");
}

TEST_F(HttpServerTest, GarbageGets400AndAClose) {
  std::string response = Talk([](BlockingClient& socket) {
    socket.SendAll("\x16\x03\x01 this is not http\r\n\r\n");
    return socket.ReadToEnd();
  });
  EXPECT_EQ(response.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << response;
  EXPECT_NE(response.find("Connection: close"), std::string::npos);
  EXPECT_EQ(requests_, 0);
}

TEST_F(HttpServerTest, OversizedRequestGets400) {
  std::string response = Talk([](BlockingClient& socket) {
    socket.SendAll("GET / HTTP/1.1\r\nX-Padding: " + std::string(9000, 'p') + "\r\n\r\n");
    return socket.ReadToEnd();
  });
  EXPECT_EQ(response.rfind("HTTP/1.1 400 ", 0), 0u) << response;
}

TEST_F(HttpServerTest, HandlerStatusesPassThrough) {
  std::string response = Talk([](BlockingClient& socket) {
    socket.SendAll("GET /nope HTTP/1.1\r\n\r\nPOST /healthz HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi"
                   "HEAD /healthz HTTP/1.1\r\nConnection: close\r\n\r\n");
    return socket.ReadToEnd();
  });
  EXPECT_NE(response.find("HTTP/1.1 404 Not Found\r\n"), std::string::npos) << response;
  EXPECT_NE(response.find("HTTP/1.1 405 Method Not Allowed\r\n"), std::string::npos) << response;
  // HEAD: headers with the GET length, no body.
  std::string head = response.substr(response.find("HTTP/1.1 200 OK"));
  EXPECT_NE(head.find("Content-Length: 3\r\n"), std::string::npos);
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n");
  EXPECT_EQ(requests_, 3);
}

TEST_F(HttpServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  std::string response = Talk([](BlockingClient& socket) {
    socket.SendAll("GET /healthz HTTP/1.1\r\n\r\n");
    std::string first = socket.ReadUntil("ok\n");
    socket.SendAll("GET /healthz HTTP/1.1\r\n\r\nGET /healthz HTTP/1.1\r\n\r\n");
    std::string pipelined = socket.ReadUntil([](const std::string& got) { return Count(got, "ok\n") == 2; });
    socket.SendAll("GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n");
    return first + pipelined + socket.ReadToEnd();  // ReadToEnd: the server closes
  });
  EXPECT_EQ(Count(response, "HTTP/1.1 200 OK"), 4u) << response;
  EXPECT_EQ(Count(response, "Connection: keep-alive"), 3u);
  EXPECT_EQ(Count(response, "Connection: close"), 1u);
  EXPECT_EQ(requests_, 4);
}

TEST_F(HttpServerTest, Http10ClosesByDefault) {
  std::string response = Talk([](BlockingClient& socket) {
    socket.SendAll("GET /healthz HTTP/1.0\r\n\r\n");
    return socket.ReadToEnd();
  });
  EXPECT_NE(response.find("Connection: close"), std::string::npos) << response;
  EXPECT_NE(response.find("ok\n"), std::string::npos);
}

TEST_F(HttpServerTest, IdleConnectionsAreClosed) {
  server_->set_idle_timeout(20);
  bool closed = false;
  Talk([&](BlockingClient& socket) {
    closed = socket.WaitForClose();
    return std::string();
  });
  EXPECT_TRUE(closed);
}

TEST_F(HttpServerTest, CloseStopsListeningAndClosesConnections) {
  std::atomic<bool> peer_closed{false};
  std::thread client([&, port = server_->port()] {
    BlockingClient socket(port);
    peer_closed = socket.WaitForClose();
    loop_.mailbox().Send([] {});
  });
  bool accepted = RunUntil(loop_, [&] { return server_->connection_count() == 1; });
  server_->Close();
  server_->Close();
  bool closed = RunUntil(loop_, [&] { return peer_closed.load(); });
  client.join();
  ASSERT_TRUE(accepted);
  EXPECT_TRUE(closed);
  EXPECT_EQ(server_->connection_count(), 0u);
  BlockingClient late(server_->port(), 1000);
  EXPECT_FALSE(late.connected());
}

TEST(HttpServerCloseTest, HandlerMayCloseTheServer) {
  UvLoop loop;
  HttpServer* raw = nullptr;
  int requests = 0;
  auto server = HttpServer::Start(loop, {"127.0.0.1", 0}, [&](const std::string&, const std::string&) {
    ++requests;
    raw->Close();
    return HttpResponse{200, "text/plain", "bye\n"};
  });
  ASSERT_TRUE(server.has_value()) << server.error();
  raw = server->get();
  std::atomic<bool> done{false};
  std::string response;
  std::thread client([&, port = raw->port()] {
    BlockingClient socket(port);
    socket.SendAll("GET /quit HTTP/1.1\r\n\r\nGET /again HTTP/1.1\r\n\r\n");
    response = socket.ReadToEnd();
    done = true;
    loop.mailbox().Send([] {});
  });
  bool finished = RunUntil(loop, [&] { return done.load(); });
  client.join();
  EXPECT_TRUE(finished);
  EXPECT_EQ(requests, 1);
  EXPECT_EQ(raw->connection_count(), 0u);
}

}  // namespace
}  // namespace estuary::io

namespace estuary::io {
namespace {

// set_deferred: an answer given later, on the loop, keeps the order of
// pipelined requests; a request it declines reaches the handler.
TEST_F(HttpServerTest, DeferredAnswersComeLaterAndInOrder) {
  std::vector<HttpServer::Responder> waiting;
  server_->set_deferred([&](const std::string&, const std::string& path, HttpServer::Responder respond) {
    if (path != "/later") return false;
    waiting.push_back(std::move(respond));
    // Answered from a later loop turn, as gathered shard data is.
    loop_.AddTimer(5, [&] {
      auto first = std::move(waiting.front());
      waiting.erase(waiting.begin());
      first(HttpResponse{200, "text/plain; charset=utf-8", "later\n"});
    });
    return true;
  });
  std::string response = Talk([](BlockingClient& socket) {
    socket.SendAll("GET /later HTTP/1.1\r\n\r\nGET /healthz HTTP/1.1\r\n\r\nGET /later HTTP/1.1\r\nConnection: close\r\n\r\n");
    return socket.ReadToEnd();
  });
  const size_t first = response.find("later\n");
  const size_t healthz = response.find("ok\n");
  const size_t last = response.rfind("later\n");
  ASSERT_NE(first, std::string::npos) << response;
  ASSERT_NE(healthz, std::string::npos) << response;
  EXPECT_LT(first, healthz);
  EXPECT_LT(healthz, last);
  EXPECT_EQ(requests_, 1);  // only /healthz reached the handler
}

TEST_F(HttpServerTest, DeferredAnswerAfterTheServerIsGoneDoesNothing) {
  HttpServer::Responder kept;
  server_->set_deferred([&](const std::string&, const std::string&, HttpServer::Responder respond) {
    kept = std::move(respond);
    return true;
  });
  std::atomic<bool> closed{false};
  std::thread client([&, port = server_->port()] {
    BlockingClient socket(port);
    socket.SendAll("GET /x HTTP/1.1\r\n\r\n");
    closed = socket.WaitForClose();
    loop_.mailbox().Send([] {});
  });
  ASSERT_TRUE(RunUntil(loop_, [&] { return static_cast<bool>(kept); }));
  server_.reset();
  ASSERT_TRUE(RunUntil(loop_, [&] { return closed.load(); }));
  client.join();
  kept(HttpResponse{200, "text/plain", "too late\n"});  // must not touch the freed server
}

}  // namespace
}  // namespace estuary::io
