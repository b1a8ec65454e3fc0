// The estuary-lb pair (issue 8): kill -9 of the active while 200 clients
// connect and publish; every client reconnects through the standby; the
// takeover time is measured and printed; the old active, restarted, stays
// standby. The virtual-IP mode runs in network namespaces when root.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <thread>

#include "conformance/balancer/balancer_fixture.h"

namespace estuary::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

long long Ms(Clock::duration d) { return std::chrono::duration_cast<milliseconds>(d).count(); }

// A client that publishes QoS 1 every 50 ms and, when its connection
// drops, reconnects trying each balancer address in turn (as Paho does with
// a server URI list).
class FollowingClient {
 public:
  FollowingClient(std::string id, std::vector<uint16_t> ports) : id_(std::move(id)), ports_(std::move(ports)) {}
  void Run(const std::atomic<bool>& stop, std::mutex& mutex, std::condition_variable& wake) {
    uint16_t packet_id = 0;
    while (!stop) {
      if (!client_ || client_->closed()) {
        client_.reset();
        for (uint16_t port : ports_) {
          client_ = Connected(port, id_);
          if (client_) {
            port_ = port;
            ++connections_;
            break;
          }
        }
        if (!client_) {
          std::unique_lock lock(mutex);
          wake.wait_for(lock, milliseconds(20), [&] { return stop.load(); });  // retry pacing
          continue;
        }
      }
      packet_id = uint16_t(packet_id % 60000 + 1);
      client_->Send(mqtt::PublishPacket{false, 1, false, "pair/" + id_, packet_id, {}, "m"});
      auto ack = client_->ReceiveAs<mqtt::AckPacket>(seconds(3));
      if (!ack) {
        client_.reset();
        continue;
      }
      ++acked_;
      if (port_ == ports_.back()) ++acked_after_;
      std::unique_lock lock(mutex);
      wake.wait_for(lock, milliseconds(50), [&] { return stop.load(); });
    }
  }
  int acked() const { return acked_; }
  int acked_via_last() const { return acked_after_; }
  int connections() const { return connections_; }

 private:
  std::string id_;
  std::vector<uint16_t> ports_;
  std::unique_ptr<RawClient> client_;
  uint16_t port_ = 0;
  std::atomic<int> acked_{0};
  std::atomic<int> acked_after_{0};
  std::atomic<int> connections_{0};
};

TEST(EstuaryLbPairTest, KillTheActiveUnderLoadThenTheOldActiveReturnsAsStandby) {
  auto node = StartNode(1, {"--proxy-from", "127.0.0.1"});
  ASSERT_TRUE(node);
  auto a = StartLb({"--nodes", AdminOf(*node), "--role", "active"});
  ASSERT_TRUE(a);
  const std::string a_heartbeat = "127.0.0.1:" + std::to_string(a->heartbeat_port());
  const std::string a_mqtt = "127.0.0.1:" + std::to_string(a->mqtt_port());
  auto b = StartLb({"--nodes", AdminOf(*node), "--role", "standby", "--peer", a_heartbeat});
  ASSERT_TRUE(b);
  EXPECT_EQ(b->role(), "standby");
  ASSERT_TRUE(WaitFor([&] { return Eligible(*a, *node) && Eligible(*b, *node); }, seconds(5)));
  // The standby does not accept: its port is bound but not listening.
  RawClient refused;
  EXPECT_FALSE(refused.Open("127.0.0.1", b->mqtt_port()));

  constexpr int kClients = 200;
  std::atomic<bool> stop{false};
  std::mutex mutex;
  std::condition_variable wake;
  std::vector<std::unique_ptr<FollowingClient>> clients;
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(std::make_unique<FollowingClient>("pair-" + std::to_string(i),
                                                        std::vector<uint16_t>{a->mqtt_port(), b->mqtt_port()}));
  }
  // Stops and joins the clients however the test ends (an ASSERT returns early).
  struct Joiner {
    std::atomic<bool>& stop;
    std::condition_variable& wake;
    std::vector<std::thread>& threads;
    ~Joiner() {
      stop = true;
      wake.notify_all();
      for (auto& thread : threads) {
        if (thread.joinable()) thread.join();
      }
    }
  } joiner{stop, wake, threads};
  for (auto& client : clients) {
    threads.emplace_back([&, c = client.get()] { c->Run(stop, mutex, wake); });
  }
  auto all = [&](auto predicate) {
    for (auto& client : clients) {
      if (!predicate(*client)) return false;
    }
    return true;
  };
  const bool loaded = WaitFor([&] { return all([](const FollowingClient& c) { return c.acked() >= 3; }); }, seconds(30));
  EXPECT_TRUE(loaded) << "not every client published through the active";

  a->Kill();  // kill -9
  const auto killed = Clock::now();
  std::string active_line;
  auto active_at = b->WaitForLine("role=active", seconds(5), &active_line);
  ASSERT_TRUE(active_at) << "the standby did not take over";
  const long long takeover_ms = Ms(*active_at - killed);
  const bool followed =
      WaitFor([&] { return all([](const FollowingClient& c) { return c.acked_via_last() >= 1; }); }, seconds(30));
  const long long all_back_ms = Ms(Clock::now() - killed);
  std::printf("takeover: standby active %lld ms after kill -9 of the active; all %d clients publishing "
              "through it after %lld ms\n",
              takeover_ms, kClients, all_back_ms);
  EXPECT_TRUE(followed) << "not every client reconnected through the standby";
  EXPECT_LT(takeover_ms, 2000);
  // No early takeover: the standby waits 1 s of silence, counted from the
  // last heartbeat it heard, and says how long it waited on its own clock
  // (the time from the kill would depend on how long the loaded active
  // was starved of CPU before it: 154 ms was seen with 5 busy processes).
  const std::string silent = WordValue(active_line, "silent_ms");
  ASSERT_FALSE(silent.empty()) << active_line;
  EXPECT_GE(std::stoll(silent), 1000) << "the standby took over early: " << active_line;

  // The old active returns (same addresses, --role active) and stays standby.
  auto returned = StartLb({"--nodes", AdminOf(*node), "--role", "active", "--heartbeat", a_heartbeat, "--peer",
                           "127.0.0.1:" + std::to_string(b->heartbeat_port()), "--mqtt", a_mqtt});
  ASSERT_TRUE(returned);
  EXPECT_EQ(returned->role(), "standby") << returned->ready_line();
  RawClient refused_again;
  EXPECT_FALSE(refused_again.Open("127.0.0.1", returned->mqtt_port()));
  EXPECT_FALSE(returned->WaitForLine("role=active", milliseconds(1500)));
  EXPECT_NE(HttpGet("127.0.0.1", b->admin_port(), "/healthz").body.find("ok active epoch=2"), std::string::npos);

  EXPECT_EQ(returned->Stop(), 0);
  EXPECT_EQ(b->Stop(), 0);
}

// Virtual-IP mode (as keepalived): two balancer "hosts" (namespaces lbA and
// lbB) and a LAN namespace (bridge, node, client). The active holds the VIP
// on its veth; when its host dies (kill -9 and its link down) the standby
// adds the VIP and sends a gratuitous ARP; the client keeps using the VIP.
class NetnsLab {
 public:
  NetnsLab() : tag_(std::to_string(::getpid() % 100000)) {}
  ~NetnsLab() { Teardown(); }
  std::string ns(const std::string& name) const { return "e" + name + tag_; }
  bool Build() {
    Teardown();
    const std::string lan = ns("lan"), a = ns("lbA"), b = ns("lbB");
    std::vector<std::string> steps = {
        "ip netns add " + lan, "ip netns add " + a, "ip netns add " + b,
        "ip -n " + lan + " link add br0 type bridge", "ip -n " + lan + " addr add 10.77.0.254/24 dev br0",
        "ip -n " + lan + " link set br0 up", "ip -n " + lan + " link set lo up",
    };
    for (const auto& [side, address] : {std::pair{a, "10.77.0.1/24"}, std::pair{b, "10.77.0.2/24"}}) {
      steps.push_back("ip -n " + side + " link add eth0 type veth peer name p" + side + " netns " + lan);
      steps.push_back("ip -n " + lan + " link set p" + side + " master br0 up");
      steps.push_back("ip -n " + side + " addr add " + address + " dev eth0");
      steps.push_back("ip -n " + side + " link set eth0 up");
      steps.push_back("ip -n " + side + " link set lo up");
    }
    for (const auto& step : steps) {
      if (std::system((step + " 2>/dev/null").c_str()) != 0) {
        failed_ = step;
        return false;
      }
    }
    return true;
  }
  void Teardown() {
    for (const char* name : {"lan", "lbA", "lbB"}) std::system(("ip netns del " + ns(name) + " 2>/dev/null").c_str());
  }
  std::vector<std::string> In(const std::string& name) const { return {"ip", "netns", "exec", ns(name)}; }
  const std::string& failed() const { return failed_; }

 private:
  std::string tag_;
  std::string failed_;
};

TEST(EstuaryLbPairTest, VirtualIpMovesToTheStandbyInANetworkNamespace) {
  if (::geteuid() != 0) GTEST_SKIP() << "not root: the virtual-IP mode needs ip netns (skipped)";
  NetnsLab lab;
  if (!lab.Build()) GTEST_SKIP() << "cannot build network namespaces here (" << lab.failed() << ")";
  std::string error;
  // The node's admin address is not loopback: it needs a token, which the
  // balancers send on their probes.
  const std::string token = "/tmp/estuary-pair-failover-" + std::to_string(::getpid()) + ".token";
  std::ofstream(token) << "pair-failover-token-0123456789\n";
  ::chmod(token.c_str(), 0600);
  struct RemoveToken {
    std::string path;
    ~RemoveToken() { std::remove(path.c_str()); }
  } remove_token{token};
  auto node = LbProcess::Start({"--node-id", "1", "--shards", "1", "--sys-interval", "0", "--log-level", "warn",
                                "--mqtt", "10.77.0.254:1883", "--amqp", "10.77.0.254:5672", "--admin",
                                "10.77.0.254:8080", "--admin-token-file", token, "--cluster", "10.77.0.254:0",
                                "--proxy-from", "10.77.0.1,10.77.0.2"},
                               &error, seconds(10), lab.In("lan"), BrokerProcess::DefaultBinary());
  ASSERT_TRUE(node) << error;
  auto balancer = [&](const std::string& host, const std::string& me, const std::string& peer, const char* role) {
    std::string why;
    auto process = LbProcess::Start({"--nodes", "10.77.0.254:8080", "--mqtt", "10.77.0.100:1883", "--amqp",
                                     "10.77.0.100:5672", "--vip", "10.77.0.100/24", "--vip-interface", "eth0",
                                     "--heartbeat", me + ":7946", "--peer", peer + ":7946", "--role", role,
                                     "--admin-token-file", token, "--log-level", "warn"},
                                    &why, seconds(10), lab.In(host));
    EXPECT_TRUE(process) << why;
    return process;
  };
  auto a = balancer("lbA", "10.77.0.1", "10.77.0.2", "active");
  auto b = balancer("lbB", "10.77.0.2", "10.77.0.1", "standby");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->role(), "active");
  EXPECT_EQ(b->role(), "standby");
  const std::string publish = "ip netns exec " + lab.ns("lan") +
                              " mosquitto_pub -h 10.77.0.100 -p 1883 -i vip-client -t vip -m x -q 1 2>/dev/null";
  auto publish_ok = [&] { return std::system(publish.c_str()) == 0; };
  EXPECT_TRUE(WaitFor(publish_ok, seconds(10))) << "no MQTT through the VIP held by the active";
  // The active's host dies: the process and its network link.
  a->Kill();
  std::system(("ip -n " + lab.ns("lbA") + " link set eth0 down").c_str());
  const auto killed = Clock::now();
  std::string active_line;
  auto active_at = b->WaitForLine("role=active", seconds(5), &active_line);
  ASSERT_TRUE(active_at);
  EXPECT_TRUE(WaitFor(publish_ok, seconds(10))) << "no MQTT through the VIP after the takeover";
  std::printf("virtual IP: standby active after %lld ms, the VIP answering MQTT again after %lld ms\n",
              Ms(*active_at - killed), Ms(Clock::now() - killed));
  EXPECT_EQ(b->Stop(), 0);
  EXPECT_EQ(node->Stop(), 0);
}

}  // namespace
}  // namespace estuary::testing
