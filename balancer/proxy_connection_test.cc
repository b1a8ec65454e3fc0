// ProxyConnection over real loopback sockets: the balancer side runs on a
// UvLoop thread; the "node" is a plain socket the test accepts from, or an
// echo server on the loop. No sleeps: blocking reads with timeouts and
// polls with deadlines.
#include "balancer/proxy_connection.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <random>
#include <thread>

#include "balancer/proxy_protocol.h"
#include "frontends/mqtt/codec/encoder.h"
#include "io/uv/tcp.h"
#include "io/uv/test_util.h"

namespace estuary::balancer {
namespace {

using io::testing::BlockingClient;
using io::testing::LoopThread;

std::string RandomBytes(size_t size, uint32_t seed) {
  std::mt19937 random(seed);
  std::string out(size, '\0');
  for (char& c : out) c = static_cast<char>(random() & 0xff);
  return out;
}

std::string ConnectPacket(const std::string& client_id) {
  mqtt::ConnectPacket connect;
  connect.client_id = client_id;
  std::string out;
  mqtt::EncodePacket(connect, mqtt::ProtocolVersion::kV311, out);
  return out;
}

// A listening socket the test accepts from by hand (the node).
class PlainListener {
 public:
  PlainListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    ::listen(fd_, 128);
    socklen_t length = sizeof(address);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
  }
  ~PlainListener() { ::close(fd_); }
  uint16_t port() const { return port_; }
  // Accepts one connection within `timeout_ms`; -1 if none came.
  int Accept(int timeout_ms = 10'000) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return -1;
    const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    timeval timeout{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    return fd;
  }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

std::string ReadExactly(int fd, size_t size) {
  std::string out(size, '\0');
  size_t have = 0;
  while (have < size) {
    const ssize_t n = ::recv(fd, out.data() + have, size - have, 0);
    if (n <= 0) break;
    have += static_cast<size_t>(n);
  }
  out.resize(have);
  return out;
}

bool SendAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

class ProxyConnectionTest : public ::testing::Test {
 protected:
  // Starts a balancer listener on the loop thread; every connection goes to
  // `targets` in turn (the first that dials).
  void StartBalancer(Service service, std::vector<std::string> targets) {
    loop_.RunSync([&](io::UvLoop& loop) {
      host_.choose = [targets](Service, std::string_view, const std::vector<std::string>& exclude)
          -> std::optional<Choice> {
        if (exclude.size() >= targets.size()) return std::nullopt;
        return Choice{"node" + std::to_string(exclude.size()), targets[exclude.size()], false};
      };
      host_.dial_failed = [this](const std::string&, int) { dial_failures_++; };
      host_.finished = [this](ProxyConnection*, const ProxyStats& stats) {
        finished_++;
        last_outcome_ = stats.outcome;
      };
      auto listener = io::TcpListener::Listen(loop, {"127.0.0.1", 0}, [this, &loop, service](int fd) {
        ProxyConnection::Start(loop, fd, service, options_, host_);
      });
      ASSERT_TRUE(listener);
      port_ = (*listener)->port();
      listener_ = std::move(*listener);
    });
  }
  void TearDown() override {
    loop_.RunSync([&](io::UvLoop&) { listener_.reset(); });
  }
  std::string Target(uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

  ProxyOptions options_;
  ProxyHost host_;
  std::unique_ptr<io::TcpListener> listener_;
  uint16_t port_ = 0;
  std::atomic<int> dial_failures_{0};
  std::atomic<int> finished_{0};
  std::string last_outcome_;
  // Last, so destroyed first: connections still closing when the loop shuts
  // down call host_ callbacks that touch the members above.
  LoopThread loop_;
};

TEST_F(ProxyConnectionTest, ProxyHeaderThenTheConnectThenBytesBothWaysExactly) {
  PlainListener node;
  StartBalancer(Service::kMqtt, {Target(node.port())});
  BlockingClient client(port_);
  ASSERT_TRUE(client.connected());
  const std::string connect = ConnectPacket("c1");
  const std::string up = RandomBytes(3 * 1024 * 1024, 1);
  const std::string down = RandomBytes(3 * 1024 * 1024, 2);
  std::thread sender([&] { client.SendAll(connect + up); });
  const int fd = node.Accept();
  ASSERT_GE(fd, 0);
  const std::string header_bytes = ReadExactly(fd, 28);
  proxy::DecodeResult header = proxy::Decode(header_bytes);
  ASSERT_EQ(header.status, proxy::DecodeStatus::kComplete);
  EXPECT_EQ(header.header.source.ip, "127.0.0.1");
  EXPECT_EQ(header.header.destination, (proxy::Address{"127.0.0.1", port_}));
  std::thread node_sender([&] { SendAll(fd, down); });
  EXPECT_TRUE(ReadExactly(fd, connect.size() + up.size()) == connect + up);
  std::string received;
  received = client.ReadUntil([&](const std::string& so_far) { return so_far.size() >= down.size(); });
  EXPECT_TRUE(received == down);
  sender.join();
  node_sender.join();
  ::close(fd);
}

TEST_F(ProxyConnectionTest, HalfCloseKeepsTheOtherDirection) {
  PlainListener node;
  options_.send_proxy_header = false;
  StartBalancer(Service::kAmqp, {Target(node.port())});
  BlockingClient client(port_);
  const std::string request("AMQP\x00\x01\x00\x00request", 15);
  ASSERT_TRUE(client.SendAll(request));
  client.ShutdownWrite();
  const int fd = node.Accept();
  ASSERT_GE(fd, 0);
  // The node sees the request, then EOF...
  std::string got;
  char buffer[4096];
  for (ssize_t n; (n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0;) got.append(buffer, size_t(n));
  EXPECT_EQ(got, request);
  // ...and can still answer at length before closing its side.
  const std::string answer = RandomBytes(2 * 1024 * 1024, 3);
  ASSERT_TRUE(SendAll(fd, answer));
  ::shutdown(fd, SHUT_WR);
  EXPECT_TRUE(client.ReadToEnd() == answer);
  ::close(fd);
}

TEST_F(ProxyConnectionTest, ASlowReaderStopsTheWriterWithBoundedBuffers) {
  PlainListener node;
  options_.send_proxy_header = false;
  StartBalancer(Service::kAmqp, {Target(node.port())});
  BlockingClient client(port_);
  ASSERT_TRUE(client.SendAll("hello"));
  const int fd = node.Accept();
  ASSERT_GE(fd, 0);
  EXPECT_EQ(ReadExactly(fd, 5), "hello");
  // The client reads nothing: the node can only fill the socket buffers and
  // the balancer's bounded queue, then its writes stop.
  size_t sent = 0;
  const std::string chunk(64 * 1024, 'x');
  for (;;) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, 500) <= 0) break;  // no room for 500 ms: stalled
    const ssize_t n = ::send(fd, chunk.data(), chunk.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) sent += size_t(n);
    ASSERT_LT(sent, 64u * 1024 * 1024) << "the balancer kept accepting bytes nobody reads";
  }
  std::printf("stalled after %zu KiB in flight (socket buffers + balancer queue)\n", sent / 1024);
  // Everything sent arrives once the client reads.
  std::string received = client.ReadUntil([&](const std::string& so_far) { return so_far.size() >= sent; });
  EXPECT_EQ(received.size(), sent);
  EXPECT_EQ(received.find_first_not_of('x'), std::string::npos);
  ::close(fd);
}

TEST_F(ProxyConnectionTest, AResetOnOneSideResetsTheOther) {
  PlainListener node;
  options_.send_proxy_header = false;
  StartBalancer(Service::kAmqp, {Target(node.port())});
  BlockingClient client(port_);
  ASSERT_TRUE(client.SendAll("x"));
  const int fd = node.Accept();
  ASSERT_GE(fd, 0);
  EXPECT_EQ(ReadExactly(fd, 1), "x");
  linger zero{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &zero, sizeof(zero));
  ::close(fd);
  char byte = 0;
  errno = 0;
  const ssize_t n = ::recv(client.fd(), &byte, 1, 0);
  EXPECT_EQ(n, -1);
  EXPECT_EQ(errno, ECONNRESET);
}

TEST_F(ProxyConnectionTest, GarbageAndSilenceAreDroppedBeforeAnyNode) {
  PlainListener node;
  options_.connect_timeout_ms = 200;
  StartBalancer(Service::kMqtt, {Target(node.port())});
  BlockingClient garbage(port_);
  ASSERT_TRUE(garbage.SendAll("GET / HTTP/1.1\r\n\r\n"));
  EXPECT_TRUE(garbage.WaitForClose());
  BlockingClient silent(port_);
  EXPECT_TRUE(silent.WaitForClose());
  BlockingClient partial(port_);
  ASSERT_TRUE(partial.SendAll(ConnectPacket("slow").substr(0, 5)));
  EXPECT_TRUE(partial.WaitForClose());
  EXPECT_EQ(node.Accept(0), -1);  // no node was ever dialled
}

TEST_F(ProxyConnectionTest, AFailedDialMovesOnToTheNextNode) {
  PlainListener node;
  uint16_t dead_port = 0;
  {
    PlainListener closed;  // bound then closed: connections are refused
    dead_port = closed.port();
  }
  StartBalancer(Service::kMqtt, {Target(dead_port), Target(node.port())});
  BlockingClient client(port_);
  const std::string connect = ConnectPacket("retry");
  ASSERT_TRUE(client.SendAll(connect));
  const int fd = node.Accept();
  ASSERT_GE(fd, 0);
  EXPECT_EQ(ReadExactly(fd, 28 + connect.size()).substr(28), connect);
  EXPECT_EQ(dial_failures_.load(), 1);
  ::close(fd);
}

TEST_F(ProxyConnectionTest, ManyConcurrentConnectionsThroughAnEchoNode) {
  // The node: an echo server on the balancer's loop.
  uint16_t echo_port = 0;
  std::unique_ptr<io::TcpListener> echo;
  loop_.RunSync([&](io::UvLoop& loop) {
    auto listener = io::TcpListener::Listen(loop, {"127.0.0.1", 0}, [&loop](int fd) {
      auto connection = io::TcpConnection::Adopt(loop, fd);
      std::weak_ptr<io::TcpConnection> weak = connection;
      connection->SetHandlers({.on_data = [weak](std::string_view bytes) {
        if (auto self = weak.lock()) self->Write(bytes);
      }});
    });
    ASSERT_TRUE(listener);
    echo_port = (*listener)->port();
    echo = std::move(*listener);
  });
  options_.send_proxy_header = false;
  StartBalancer(Service::kAmqp, {Target(echo_port)});
  constexpr int kClients = 64;
  constexpr size_t kBytes = 256 * 1024;
  std::atomic<int> exact{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      BlockingClient client(port_);
      const std::string payload = RandomBytes(kBytes, 100 + uint32_t(i));
      std::thread writer([&] { client.SendAll(payload); });
      const std::string back = client.ReadUntil([&](const std::string& s) { return s.size() >= kBytes; });
      writer.join();
      if (back == payload) exact++;
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(exact.load(), kClients);
  loop_.RunSync([&](io::UvLoop&) { echo.reset(); });
}

}  // namespace
}  // namespace estuary::balancer
