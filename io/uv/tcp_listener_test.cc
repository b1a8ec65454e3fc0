#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fcntl.h>
#include <memory>
#include <vector>

#include "io/uv/tcp.h"
#include "io/uv/test_util.h"

namespace estuary::io {
namespace {

using testing::BlockingClient;
using testing::LoopThread;
using testing::RunUntil;

TEST(TcpListenerTest, PortZeroPicksAFreePortAndReportsIt) {
  UvLoop loop;
  int accepted = 0;
  auto listener = TcpListener::Listen(loop, {"127.0.0.1", 0}, [&](int fd) {
    ++accepted;
    ::close(fd);
  });
  ASSERT_TRUE(listener.has_value()) << listener.error();
  uint16_t port = (*listener)->port();
  ASSERT_NE(port, 0);
  int connected = 1;
  auto client = TcpConnection::Connect(loop, {"127.0.0.1", port}, [&](int status) { connected = status; });
  ASSERT_TRUE(RunUntil(loop, [&] { return connected == 0 && accepted == 1; }));
}

TEST(TcpListenerTest, ListensOnIpv6Loopback) {
  UvLoop loop;
  int accepted = 0;
  auto listener = TcpListener::Listen(loop, {"::1", 0}, [&](int fd) {
    ++accepted;
    ::close(fd);
  });
  if (!listener.has_value()) GTEST_SKIP() << "no IPv6 loopback: " << listener.error();
  int connected = 1;
  auto client = TcpConnection::Connect(loop, {"::1", (*listener)->port()}, [&](int status) { connected = status; });
  ASSERT_TRUE(RunUntil(loop, [&] { return connected == 0 && accepted == 1; }));
  EXPECT_EQ(client->peer_address(), "[::1]:" + std::to_string((*listener)->port()));
}

TEST(TcpListenerTest, BusyPortGivesAClearError) {
  // A listener without SO_REUSEPORT holds the port.
  int holder = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(holder, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(holder, 1), 0);
  socklen_t length = sizeof(address);
  ::getsockname(holder, reinterpret_cast<sockaddr*>(&address), &length);
  uint16_t port = ntohs(address.sin_port);

  UvLoop loop;
  auto listener = TcpListener::Listen(loop, {"127.0.0.1", port}, [](int fd) { ::close(fd); });
  ASSERT_FALSE(listener.has_value());
  EXPECT_NE(listener.error().find("127.0.0.1:" + std::to_string(port)), std::string::npos) << listener.error();
  EXPECT_NE(listener.error().find("in use"), std::string::npos) << listener.error();
  ::close(holder);
}

// Two shard loops on two threads listen on one port; the kernel spreads
// connections over both.
TEST(TcpListenerTest, TwoLoopsShareOnePortWithReusePort) {
  UvLoop loop_a;
  int accepted_a = 0;
  std::atomic<int> accepted_b{0};
  auto listener_a = TcpListener::Listen(loop_a, {"127.0.0.1", 0}, [&](int fd) {
    ++accepted_a;
    ::close(fd);
  });
  ASSERT_TRUE(listener_a.has_value()) << listener_a.error();
  uint16_t port = (*listener_a)->port();

  LoopThread shard_b;
  std::unique_ptr<TcpListener> listener_b;
  std::string error_b;
  shard_b.RunSync([&](UvLoop& loop_b) {
    auto listener = TcpListener::Listen(loop_b, {"127.0.0.1", port}, [&](int fd) {
      ++accepted_b;
      ::close(fd);
      loop_a.mailbox().Send([] {});  // wake loop A to re-check the count
    });
    if (listener) {
      listener_b = std::move(*listener);
    } else {
      error_b = listener.error();
    }
  });
  ASSERT_NE(listener_b, nullptr) << error_b;
  EXPECT_EQ(listener_b->port(), port);

  constexpr int kClients = 32;
  std::vector<std::shared_ptr<TcpConnection>> clients;
  int connected = 0;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(TcpConnection::Connect(loop_a, {"127.0.0.1", port}, [&](int status) {
      if (status == 0) ++connected;
    }));
  }
  EXPECT_TRUE(RunUntil(loop_a, [&] { return connected == kClients && accepted_a + accepted_b == kClients; }));
  EXPECT_GT(accepted_a, 0);
  EXPECT_GT(accepted_b.load(), 0);
  shard_b.RunSync([&](UvLoop&) { listener_b.reset(); });  // closed on its own thread
}

TEST(TcpListenerTest, OnAcceptMayDestroyTheListener) {
  UvLoop loop;
  std::unique_ptr<TcpListener> listener;
  int accepted = 0;
  auto made = TcpListener::Listen(loop, {"127.0.0.1", 0}, [&](int fd) {
    ++accepted;
    ::close(fd);
    listener.reset();
  });
  ASSERT_TRUE(made.has_value());
  listener = std::move(*made);
  uint16_t port = listener->port();
  std::vector<std::unique_ptr<BlockingClient>> clients;
  for (int i = 0; i < 3; ++i) clients.push_back(std::make_unique<BlockingClient>(port));
  ASSERT_TRUE(RunUntil(loop, [&] { return listener == nullptr; }));
  EXPECT_EQ(accepted, 1);  // the other two stay in the backlog of a closed socket
}

// With no descriptors left accept() fails with EMFILE and the socket stays
// readable; the listener backs off instead of spinning, and accepts the
// waiting connections once descriptors are free again.
TEST(TcpListenerTest, BacksOffOnEmfileInsteadOfSpinning) {
  UvLoop loop;
  int accepted = 0;
  auto listener = TcpListener::Listen(loop, {"127.0.0.1", 0}, [&](int fd) {
    ++accepted;
    ::close(fd);
  });
  ASSERT_TRUE(listener.has_value());
  std::vector<std::unique_ptr<BlockingClient>> clients;
  for (int i = 0; i < 3; ++i) clients.push_back(std::make_unique<BlockingClient>((*listener)->port()));

  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  int lowest_free = ::fcntl(0, F_DUPFD, 0);
  ::close(lowest_free);
  rlimit exhausted = saved;
  exhausted.rlim_cur = static_cast<rlim_t>(lowest_free);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &exhausted), 0);

  int64_t start = loop.NowMs();
  bool failed_thrice = RunUntil(loop, [&] { return (*listener)->accept_failures() >= 3; });
  int64_t elapsed = loop.NowMs() - start;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  ASSERT_TRUE(failed_thrice);
  EXPECT_GE(elapsed, 90);  // two back-offs of 50 ms between three failures
  EXPECT_EQ(accepted, 0);

  ASSERT_TRUE(RunUntil(loop, [&] { return accepted == 3; }));
}

}  // namespace
}  // namespace estuary::io
