// The multi-threaded data plane of estuary-lb, in process: a Balancer on a
// control loop thread with several ProxyWorkers, a fake node (an admin HTTP
// server answering /healthz and /api/load, and a TCP echo server as its
// service port) and blocking clients on the AMQP port (no CONNECT to peek,
// no PROXY header, so the echo is byte for byte). No sleeps: every wait is
// a condition polled with a deadline.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "balancer/balancer.h"
#include "io/uv/http_server.h"
#include "io/uv/tcp.h"
#include "io/uv/test_util.h"

namespace estuary::balancer {
namespace {

using io::testing::BlockingClient;
using io::testing::LoopThread;

bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    ::poll(nullptr, 0, 10);
  }
  return true;
}

// A node: /healthz and /api/load on an admin port, an echo server as its
// MQTT and AMQP listener. Runs on its own loop thread.
class FakeNode {
 public:
  FakeNode() {
    loop_.RunSync([this](io::UvLoop& loop) {
      auto echo = io::TcpListener::Listen(loop, {"127.0.0.1", 0}, [this, &loop](int fd) {
        auto connection = io::TcpConnection::Adopt(loop, fd);
        if (!connection) return;
        std::weak_ptr<io::TcpConnection> weak = connection;
        connection->SetHandlers({.on_data = [weak](std::string_view bytes) {
                                   if (auto self = weak.lock()) self->Write(bytes);
                                 },
                                 .on_close = nullptr,
                                 .on_drain = nullptr});
        connection->StartReading();
        connections_.push_back(std::move(connection));
      });
      ASSERT_TRUE(echo);
      echo_ = std::move(*echo);
      const std::string service = "127.0.0.1:" + std::to_string(echo_->port());
      auto admin = io::HttpServer::Start(loop, {"127.0.0.1", 0}, [service](const std::string&, const std::string& path) {
        if (path == "/healthz") return io::HttpResponse{200, "text/plain", "ok\n"};
        return io::HttpResponse{200, "application/json",
                                R"({"node":1,"connections":0,"mqtt":")" + service + R"(","amqp":")" + service + "\"}"};
      });
      ASSERT_TRUE(admin);
      admin_ = std::move(*admin);
    });
  }
  ~FakeNode() {
    loop_.RunSync([this](io::UvLoop&) {
      for (auto& connection : connections_) connection->Abort();
      connections_.clear();
      echo_.reset();
      admin_.reset();
    });
  }
  io::Endpoint admin() const { return {"127.0.0.1", admin_->port()}; }

 private:
  LoopThread loop_;
  std::unique_ptr<io::TcpListener> echo_;
  std::unique_ptr<io::HttpServer> admin_;
  std::vector<std::shared_ptr<io::TcpConnection>> connections_;
};

class BalancerWorkersTest : public ::testing::Test {
 protected:
  // `f(balancer)` run on the control loop's thread.
  template <typename F>
  auto Query(F f) -> decltype(f(std::declval<Balancer&>())) {
    decltype(f(std::declval<Balancer&>())) out{};
    control_.RunSync([&](io::UvLoop&) { out = f(*balancer_); });
    return out;
  }
  void StartBalancer(unsigned threads, Role role = Role::kActive, int64_t takeover_ms = 1000) {
    BalancerConfig config;
    config.mqtt = {"127.0.0.1", 0};
    config.amqp = {"127.0.0.1", 0};
    config.heartbeat = {"127.0.0.1", 0};
    config.nodes = {node_.admin()};
    config.role = role;
    config.pair.startup_wait_ms = 0;
    config.pair.takeover_timeout_ms = takeover_ms;
    config.poll_interval_ms = 50;
    config.proxy_header = {};
    config.threads = threads;
    control_.RunSync([&](io::UvLoop& loop) {
      balancer_ = std::make_unique<Balancer>(loop, config, [](const std::string&) {});
      auto started = balancer_->Start();
      ASSERT_TRUE(started) << started.error();
      const std::string line = balancer_->ReadyLine();
      const size_t at = line.find("amqp=127.0.0.1:");
      amqp_port_ = static_cast<uint16_t>(std::stoi(line.substr(at + 15)));
      heartbeat_port_ = static_cast<uint16_t>(std::stoi(line.substr(line.find("heartbeat=127.0.0.1:") + 20)));
    });
    // The node answered a probe (workers pick from a published snapshot).
    ASSERT_TRUE(WaitFor([&] { return Query([](Balancer& b) { return b.nodes().nodes()[0].probe_ok; }); }));
  }
  void TearDown() override {
    control_.RunSync([&](io::UvLoop&) { balancer_.reset(); });
  }
  bool Listening() {
    return Query([](Balancer& b) { return b.listening() && b.role() == Role::kActive; });
  }
  // A client whose bytes came back through the balancer and the node.
  std::unique_ptr<BlockingClient> Echoing(const std::string& text) {
    auto client = std::make_unique<BlockingClient>(amqp_port_);
    if (!client->connected() || !client->SendAll(text)) return nullptr;
    if (client->ReadUntil(text) != text) return nullptr;
    return client;
  }
  std::vector<uint64_t> PerWorker(uint64_t (ProxyWorker::*counter)() const) {
    std::vector<uint64_t> out;
    for (size_t i = 0; i < balancer_->thread_count(); ++i) out.push_back((balancer_->worker(i).*counter)());
    return out;
  }

  FakeNode node_;
  std::unique_ptr<Balancer> balancer_;
  uint16_t amqp_port_ = 0;
  uint16_t heartbeat_port_ = 0;
  LoopThread control_;  // last: destroyed first, after TearDown
};

TEST_F(BalancerWorkersTest, ConnectionsSpreadEvenlyOverTheWorkers) {
  StartBalancer(4);
  ASSERT_TRUE(WaitFor([&] { return Listening(); }));
  std::vector<std::unique_ptr<BlockingClient>> clients;
  for (int i = 0; i < 8; ++i) {
    clients.push_back(Echoing("client " + std::to_string(i) + " says hello"));
    ASSERT_TRUE(clients.back()) << "client " << i;
  }
  EXPECT_EQ(balancer_->thread_count(), 4u);
  EXPECT_EQ(PerWorker(&ProxyWorker::connections), (std::vector<uint64_t>{2, 2, 2, 2}));
  EXPECT_EQ(PerWorker(&ProxyWorker::adopted_total), (std::vector<uint64_t>{2, 2, 2, 2}));
  EXPECT_EQ(balancer_->connection_count(), 8u);
  // The node counters are shared by every worker's snapshot.
  EXPECT_EQ(Query([](Balancer& b) { return b.nodes().nodes()[0].sent_total(); }), 8u);

  // A closed connection frees its worker's slot: the next one goes there.
  const size_t freed = 1;  // client 1 went to worker 1
  clients[freed].reset();
  ASSERT_TRUE(WaitFor([&] { return balancer_->worker(freed).connections() == 1; }));
  clients.push_back(Echoing("late"));
  ASSERT_TRUE(clients.back());
  EXPECT_EQ(PerWorker(&ProxyWorker::connections), (std::vector<uint64_t>{2, 2, 2, 2}));
}

TEST_F(BalancerWorkersTest, SteppingDownStopsAcceptingAndTakingOverServesEveryWorkerAgain) {
  StartBalancer(3, Role::kActive, /*takeover_ms=*/1500);
  ASSERT_TRUE(WaitFor([&] { return Listening(); }));
  std::vector<std::unique_ptr<BlockingClient>> clients;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(Echoing("before " + std::to_string(i)));
    ASSERT_TRUE(clients.back());
  }
  EXPECT_EQ(PerWorker(&ProxyWorker::adopted_total), (std::vector<uint64_t>{1, 1, 1}));

  // An active partner with a higher epoch: this one steps down at once.
  Heartbeat active{.epoch = 100, .role = Role::kActive, .priority = 1, .id = "127.0.0.1:9", .nodes = {}};
  const std::string datagram = EncodeHeartbeat(active);
  const int udp = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(heartbeat_port_);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::sendto(udp, datagram.data(), datagram.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to)),
            ssize_t(datagram.size()));
  ASSERT_TRUE(WaitFor([&] { return Query([](Balancer& b) { return b.role() == Role::kStandby; }); }));
  // A standby accepts nothing (the port stays bound, not listening)...
  EXPECT_FALSE(Query([](Balancer& b) { return b.listening(); }));
  EXPECT_FALSE(BlockingClient(amqp_port_).connected());
  // ...and the connections it already proxies go on, on every worker.
  for (size_t i = 0; i < clients.size(); ++i) {
    const std::string text = "after " + std::to_string(i);
    ASSERT_TRUE(clients[i]->SendAll(text));
    EXPECT_EQ(clients[i]->ReadUntil(text), text);
  }
  EXPECT_EQ(PerWorker(&ProxyWorker::connections), (std::vector<uint64_t>{1, 1, 1}));
  ::close(udp);

  // The partner falls silent: this one takes over, and every worker serves.
  ASSERT_TRUE(WaitFor([&] { return Listening(); }));
  EXPECT_GT(Query([](Balancer& b) { return b.epoch(); }), 100u);
  for (int i = 0; i < 3; ++i) {
    clients.push_back(Echoing("again " + std::to_string(i)));
    ASSERT_TRUE(clients.back());
  }
  EXPECT_EQ(PerWorker(&ProxyWorker::adopted_total), (std::vector<uint64_t>{2, 2, 2}));
}

TEST_F(BalancerWorkersTest, AStandbyThatTakesOverServesOnEveryWorker) {
  StartBalancer(2, Role::kStandby, /*takeover_ms=*/400);
  ASSERT_TRUE(WaitFor([&] { return Listening(); }));
  auto a = Echoing("a");
  auto b = Echoing("b");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(PerWorker(&ProxyWorker::connections), (std::vector<uint64_t>{1, 1}));
}

TEST_F(BalancerWorkersTest, StopClosesConnectionsOnEveryWorker) {
  StartBalancer(4);
  ASSERT_TRUE(WaitFor([&] { return Listening(); }));
  std::vector<std::unique_ptr<BlockingClient>> clients;
  for (int i = 0; i < 8; ++i) {
    clients.push_back(Echoing("x" + std::to_string(i)));
    ASSERT_TRUE(clients.back());
  }
  std::atomic<bool> stopped{false};
  control_.RunSync([&](io::UvLoop&) { balancer_->Stop([&] { stopped = true; }); });
  ASSERT_TRUE(WaitFor([&] { return stopped.load(); }));
  EXPECT_EQ(balancer_->connection_count(), 0u);
  for (auto& client : clients) EXPECT_TRUE(client->WaitForClose());
  EXPECT_FALSE(BlockingClient(amqp_port_).connected());
}

TEST_F(BalancerWorkersTest, DestroyingWithConnectionsOpenJoinsTheWorkers) {
  StartBalancer(2);
  ASSERT_TRUE(WaitFor([&] { return Listening(); }));
  auto a = Echoing("a");
  auto b = Echoing("b");
  ASSERT_TRUE(a && b);
  control_.RunSync([&](io::UvLoop&) { balancer_.reset(); });
  EXPECT_TRUE(a->WaitForClose());
  EXPECT_TRUE(b->WaitForClose());
}

}  // namespace
}  // namespace estuary::balancer
