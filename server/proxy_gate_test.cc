#include "server/proxy_gate.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

#include "balancer/proxy_protocol.h"
#include "io/uv/tcp.h"
#include "io/uv/test_util.h"

namespace estuary::server {
namespace {

using io::testing::BlockingClient;

struct Passed {
  int fd = -1;
  std::string address;
};

class ProxyGateTest : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> trusted) {
    loop_.RunSync([&](io::UvLoop& loop) {
      gate_ = std::make_unique<ProxyGate>(loop, std::move(trusted), 300);
      auto listener = io::TcpListener::Listen(loop, {"127.0.0.1", 0}, [this](int fd) {
        gate_->Accept(fd, [this](int accepted, std::string address) {
          std::lock_guard lock(mutex_);
          passed_.push_back({accepted, std::move(address)});
        });
      });
      ASSERT_TRUE(listener);
      port_ = (*listener)->port();
      listener_ = std::move(*listener);
    });
  }
  void TearDown() override {
    loop_.RunSync([&](io::UvLoop&) {
      listener_.reset();
      gate_.reset();
    });
    for (auto& passed : passed_) ::close(passed.fd);
  }
  std::optional<Passed> WaitPassed(size_t index) {
    for (int i = 0; i < 500; ++i) {
      {
        std::lock_guard lock(mutex_);
        if (passed_.size() > index) return passed_[index];
      }
      loop_.RunSync([](io::UvLoop&) {});  // a loop round trip, no sleep
    }
    return std::nullopt;
  }
  std::string ReadSome(int fd) {
    char buffer[64];
    timeval timeout{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    return n > 0 ? std::string(buffer, size_t(n)) : std::string();
  }

  std::unique_ptr<ProxyGate> gate_;
  std::unique_ptr<io::TcpListener> listener_;
  uint16_t port_ = 0;
  std::mutex mutex_;
  std::vector<Passed> passed_;
  io::testing::LoopThread loop_;  // last: destroyed first, while the members above live
};

TEST_F(ProxyGateTest, ATrustedBalancerHeaderGivesTheClientAddressAndLeavesTheRest) {
  Start({"127.0.0.1"});
  BlockingClient client(port_);
  auto header = proxy::Encode({"192.0.2.7", 51000}, {"10.0.0.1", 1883});
  ASSERT_TRUE(header);
  // Split inside the header: the gate waits for the rest.
  ASSERT_TRUE(client.SendAll(header->substr(0, 10)));
  loop_.RunSync([](io::UvLoop&) {});
  ASSERT_TRUE(client.SendAll(header->substr(10) + "MQTT"));
  auto passed = WaitPassed(0);
  ASSERT_TRUE(passed);
  EXPECT_EQ(passed->address, "192.0.2.7:51000");
  EXPECT_EQ(ReadSome(passed->fd), "MQTT");
  EXPECT_EQ(gate_->proxied(), 1u);
}

TEST_F(ProxyGateTest, ATrustedAddressWithoutAHeaderIsClosed) {
  Start({"127.0.0.1"});
  BlockingClient client(port_);
  ASSERT_TRUE(client.SendAll(std::string("\x10\x0c\x00\x04MQTT\x04\x02\x00\x3c\x00\x00", 14)));
  EXPECT_TRUE(client.WaitForClose());
  BlockingClient silent(port_);  // nothing within the gate's 300 ms
  EXPECT_TRUE(silent.WaitForClose());
  EXPECT_FALSE(WaitPassed(0));
  EXPECT_EQ(gate_->refused(), 2u);
}

TEST_F(ProxyGateTest, OtherAddressesPassAtOnceWithoutAClientAddress) {
  Start({"10.9.9.9"});
  BlockingClient client(port_);
  ASSERT_TRUE(client.SendAll("plain"));
  auto passed = WaitPassed(0);
  ASSERT_TRUE(passed);
  EXPECT_EQ(passed->address, "");
  EXPECT_EQ(ReadSome(passed->fd), "plain");
}

TEST_F(ProxyGateTest, WithNoBalancersConfiguredTheGateIsOff) {
  Start({});
  EXPECT_FALSE(gate_->enabled());
  BlockingClient client(port_);
  auto passed = WaitPassed(0);
  ASSERT_TRUE(passed);
  EXPECT_EQ(passed->address, "");
}

}  // namespace
}  // namespace estuary::server
