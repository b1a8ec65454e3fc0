// estuary-lb in front of real estuaryd nodes (issue 8): proxying, PROXY v2,
// selection by load, drain and health, MQTT affinity, bad clients.
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "cluster-core/ring/ring.h"
#include "conformance/balancer/balancer_fixture.h"

namespace estuary::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

int RunStatus(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(EstuaryLbTest, HelpExitsZeroAndABadFlagExitsTwo) {
  EXPECT_EQ(RunStatus(LbProcess::DefaultBinary() + " --help > /dev/null"), 0);
  EXPECT_EQ(RunStatus(LbProcess::DefaultBinary() + " --no-such-flag 2> /dev/null"), 2);
  EXPECT_EQ(RunStatus(LbProcess::DefaultBinary() + " --role leader 2> /dev/null"), 2);
}

TEST(EstuaryLbTest, ATomlFileTakesTheFlagsNamesAndABadKeyExitsTwo) {
  char path[] = "/tmp/estuary-lb-test-XXXXXX.toml";
  const int fd = ::mkstemps(path, 5);
  ASSERT_GE(fd, 0);
  const std::string toml =
      "mqtt = \"127.0.0.1:0\"\namqp = \"127.0.0.1:0\"\nheartbeat = \"127.0.0.1:0\"\n"
      "role = \"standby\"\nnodes = [\"127.0.0.1:1\"]\nweight-cpu = 5.0\nlog-level = \"warn\"\n";
  ASSERT_EQ(::write(fd, toml.data(), toml.size()), ssize_t(toml.size()));
  ::close(fd);
  std::string error;
  auto lb = LbProcess::Start({"--config", path}, &error);
  ASSERT_TRUE(lb) << error;
  EXPECT_EQ(lb->role(), "standby");
  EXPECT_NE(lb->mqtt_port(), 0);
  EXPECT_EQ(lb->Stop(), 0);
  const std::string bad = std::string(path) + ".bad.toml";
  EXPECT_EQ(RunStatus("echo 'no-such-key = 1' > " + bad + " && " + LbProcess::DefaultBinary() + " --config " + bad +
                      " 2> /dev/null"),
            2);
  ::unlink(path);
  ::unlink(bad.c_str());
}

TEST(EstuaryLbTest, ReadyLineAndSigtermExitZero) {
  auto node = StartNode(1);
  ASSERT_TRUE(node);
  auto lb = StartLb({"--nodes", AdminOf(*node)});
  ASSERT_TRUE(lb);
  EXPECT_EQ(lb->role(), "active");
  EXPECT_NE(lb->ready_line().find("estuary-lb ready role=active mqtt=127.0.0.1:"), std::string::npos)
      << lb->ready_line();
  EXPECT_EQ(lb->Stop(), 0);
}

TEST(EstuaryLbTest, MqttThroughTheBalancerIsByteExactAndCarriesTheClientAddress) {
  auto node = StartNode(1, {"--proxy-from", "127.0.0.1"});
  ASSERT_TRUE(node);
  auto lb = StartLb({"--nodes", AdminOf(*node)});
  ASSERT_TRUE(lb);
  ASSERT_TRUE(WaitFor([&] { return Eligible(*lb, *node); }, seconds(5)));
  auto client = Connected(lb->mqtt_port(), "through-lb");
  ASSERT_TRUE(client) << "CONNECT through the balancer (the node requires its PROXY header)";
  client->Send(mqtt::SubscribePacket{1, {}, {{"lb/echo", {1}}}});
  ASSERT_TRUE(client->ReceiveAs<mqtt::SubackPacket>());
  std::mt19937 random(7);
  std::string payload(200 * 1024, '\0');
  for (char& c : payload) c = char(random());
  client->Send(mqtt::PublishPacket{false, 1, false, "lb/echo", 2, {}, payload});
  bool got_ack = false, got_message = false;
  for (int i = 0; i < 3 && !(got_ack && got_message); ++i) {
    auto packet = client->Receive(seconds(5));
    ASSERT_TRUE(packet);
    if (auto* ack = std::get_if<mqtt::AckPacket>(&*packet)) got_ack = ack->packet_id == 2;
    if (auto* publish = std::get_if<mqtt::PublishPacket>(&*packet)) {
      got_message = true;
      EXPECT_TRUE(publish->payload == payload);
      client->Send(mqtt::AckPacket{mqtt::PacketType::kPuback, publish->packet_id, {}, {}});
    }
  }
  EXPECT_TRUE(got_ack && got_message);
  // Straight to the node from the balancer's address, without a header: closed.
  RawClient direct;
  ASSERT_TRUE(direct.Open("127.0.0.1", node->mqtt_port()));
  mqtt::ConnectPacket connect;
  connect.client_id = "no-header";
  connect.version = mqtt::ProtocolVersion::kV5;
  EXPECT_FALSE(direct.Connect(connect));
  EXPECT_TRUE(direct.WaitClosed(seconds(5)));
  const std::string metrics = HttpGet("127.0.0.1", node->admin_port(), "/metrics").body;
  EXPECT_NE(metrics.find("estuary_proxy_headers_total{node=\"1\",shard=\"0\"} 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("estuary_proxy_refused_total{node=\"1\",shard=\"0\"} 1\n"), std::string::npos);
  EXPECT_EQ(lb->Stop(), 0);
  EXPECT_EQ(node->Stop(), 0);
}

TEST(EstuaryLbTest, AHeaderFromAnAddressNotListedIsRefused) {
  auto node = StartNode(1, {"--proxy-from", "192.0.2.1"});  // the balancer is elsewhere
  ASSERT_TRUE(node);
  auto lb = StartLb({"--nodes", AdminOf(*node)});
  ASSERT_TRUE(lb);
  ASSERT_TRUE(WaitFor([&] { return Eligible(*lb, *node); }, seconds(5)));
  RawClient spoofer;
  ASSERT_TRUE(spoofer.Open("127.0.0.1", lb->mqtt_port()));
  mqtt::ConnectPacket connect;
  connect.client_id = "spoof";
  connect.version = mqtt::ProtocolVersion::kV5;
  EXPECT_FALSE(spoofer.Connect(connect));  // the node sees a header it must not trust
  EXPECT_TRUE(spoofer.WaitClosed(seconds(5)));
  auto direct = Connected(node->mqtt_port(), "plain");  // no header from 127.0.0.1: fine
  EXPECT_TRUE(direct);
}

// AMQP goes by score, with the same PROXY header: the node answers the SASL
// protocol header (AMQP 1.0 section 5.3.1) through the balancer.
TEST(EstuaryLbTest, AmqpThroughTheBalancerReachesTheNodesSaslLayer) {
  auto node = StartNode(1, {"--proxy-from", "127.0.0.1"});
  ASSERT_TRUE(node);
  auto lb = StartLb({"--nodes", AdminOf(*node)});
  ASSERT_TRUE(lb);
  ASSERT_TRUE(WaitFor([&] { return Eligible(*lb, *node); }, seconds(5)));
  const int fd = ConnectTcp("127.0.0.1", lb->amqp_port());
  ASSERT_GE(fd, 0);
  const std::string sasl_header("AMQP\x03\x01\x00\x00", 8);
  ASSERT_EQ(::send(fd, sasl_header.data(), sasl_header.size(), MSG_NOSIGNAL), 8);
  std::string received;
  const auto deadline = Clock::now() + seconds(5);
  while (received.size() < 8 && Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char chunk[256];
    const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
    if (n <= 0) break;
    received.append(chunk, size_t(n));
  }
  ::close(fd);
  EXPECT_EQ(received.substr(0, 8), sasl_header);
  EXPECT_EQ(LbNode(*lb, *node).value("sent_total", 0), 1);
}

TEST(EstuaryLbTest, ManyConcurrentClientsPublishByteExactThroughTheBalancer) {
  auto node = StartNode(1, {"--proxy-from", "127.0.0.1"});
  ASSERT_TRUE(node);
  // Four data-plane threads: the 100 clients are proxied by all of them.
  auto lb = StartLb({"--nodes", AdminOf(*node), "--threads", "4"});
  ASSERT_TRUE(lb);
  ASSERT_TRUE(WaitFor([&] { return Eligible(*lb, *node); }, seconds(5)));
  constexpr int kClients = 100;
  constexpr int kMessages = 20;
  std::atomic<int> exact{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      auto client = Connected(lb->mqtt_port(), "many-" + std::to_string(i));
      if (!client) return;
      const std::string topic = "many/" + std::to_string(i);
      client->Send(mqtt::SubscribePacket{1, {}, {{topic, {0}}}});
      if (!client->ReceiveAs<mqtt::SubackPacket>()) return;
      std::mt19937 random{uint32_t(i)};
      int matched = 0;
      for (int m = 0; m < kMessages; ++m) {
        std::string payload(random() % (32 * 1024) + 1, '\0');
        for (char& c : payload) c = char(random());
        client->Send(mqtt::PublishPacket{false, 1, false, topic, uint16_t(m + 1), {}, payload});
        bool acked = false, echoed = false;
        while (!(acked && echoed)) {
          auto packet = client->Receive(seconds(10));
          if (!packet) return;
          if (auto* ack = std::get_if<mqtt::AckPacket>(&*packet)) acked = ack->packet_id == m + 1;
          if (auto* publish = std::get_if<mqtt::PublishPacket>(&*packet)) {
            echoed = true;
            if (publish->payload == payload) ++matched;
          }
        }
      }
      if (matched == kMessages) exact++;
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(exact.load(), kClients);
}

// The data plane on several threads (--threads): clients are handed to the
// least busy worker, every worker proxies, and SIGTERM with connections open
// on all of them closes every one and exits 0.
TEST(EstuaryLbTest, ClientsSpreadOverTheDataPlaneThreadsAndSigtermClosesThemAll) {
  auto node = StartNode(1, {"--proxy-from", "127.0.0.1"});
  ASSERT_TRUE(node);
  auto lb = StartLb({"--nodes", AdminOf(*node), "--threads", "3"});
  ASSERT_TRUE(lb);
  ASSERT_TRUE(WaitFor([&] { return Eligible(*lb, *node); }, seconds(5)));
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < 12; ++i) {
    clients.push_back(Connected(lb->mqtt_port(), "spread-" + std::to_string(i)));
    ASSERT_TRUE(clients.back()) << i;
  }
  nlohmann::json workers = LbNodes(*lb)["workers"];
  ASSERT_EQ(workers.size(), 3u) << workers.dump();
  for (const auto& worker : workers) {
    EXPECT_EQ(worker.value("connections", 0), 4) << workers.dump();
  }
  // Each worker's connections carry traffic: a subscriber on one thread
  // gets what publishers on the others send.
  clients[0]->Send(mqtt::SubscribePacket{1, {}, {{"spread/#", {0}}}});
  ASSERT_TRUE(clients[0]->ReceiveAs<mqtt::SubackPacket>());
  for (int i = 1; i < 3; ++i) {
    const std::string n = std::to_string(i);
    clients[i]->Send(mqtt::PublishPacket{false, 0, false, "spread/" + n, 0, {}, "from " + n});
  }
  std::set<std::string> payloads;
  for (int i = 1; i < 3; ++i) {
    auto publish = clients[0]->ReceiveAs<mqtt::PublishPacket>(seconds(10));
    ASSERT_TRUE(publish);
    payloads.insert(publish->payload);
  }
  EXPECT_EQ(payloads, (std::set<std::string>{"from 1", "from 2"}));
  const auto before = Clock::now();
  EXPECT_EQ(lb->Stop(), 0);
  EXPECT_LT(Clock::now() - before, seconds(5));
  for (auto& client : clients) EXPECT_TRUE(client->WaitClosed(seconds(5)));
}

TEST(EstuaryLbTest, SelectionFollowsLoadDrainAndHealth) {
  auto a = StartNode(1);
  auto b = StartNode(2);
  ASSERT_TRUE(a && b);
  auto lb = StartLb({"--nodes", NodeList({a.get(), b.get()}), "--proxy-protocol", "none", "--mqtt-affinity",
                     "false"});
  ASSERT_TRUE(lb);
  ASSERT_TRUE(WaitFor([&] { return Eligible(*lb, *a) && Eligible(*lb, *b); }, seconds(5)));

  // Load: a holds 6 clients; the next 6 through the balancer all go to b.
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < 6; ++i) clients.push_back(Connected(a->mqtt_port(), "direct-" + std::to_string(i)));
  ASSERT_TRUE(WaitFor([&] { return LbNode(*lb, *a).value("connections", 0) == 6; }, seconds(5)));
  for (int i = 0; i < 6; ++i) clients.push_back(Connected(lb->mqtt_port(), "burst-" + std::to_string(i)));
  EXPECT_TRUE(WaitFor([&] { return NodeConnections(*b) == 6; }, seconds(5)));
  EXPECT_EQ(NodeConnections(*a), 6u);

  // Drain: b drained on the node; new clients go to a only.
  ASSERT_EQ(HttpRequest(b->admin_port(), "POST", "/api/drain").status, 200);
  ASSERT_TRUE(WaitFor([&] { return !Eligible(*lb, *b); }, seconds(5)));
  for (int i = 0; i < 4; ++i) clients.push_back(Connected(lb->mqtt_port(), "drain-" + std::to_string(i)));
  EXPECT_TRUE(WaitFor([&] { return NodeConnections(*a) == 10; }, seconds(5)));
  EXPECT_EQ(NodeConnections(*b), 6u);
  ASSERT_EQ(HttpRequest(b->admin_port(), "DELETE", "/api/drain").status, 200);
  ASSERT_TRUE(WaitFor([&] { return Eligible(*lb, *b); }, seconds(5)));

  // Health: a stops answering (SIGSTOP); within 1 s it gets no new clients.
  ASSERT_EQ(::kill(a->pid(), SIGSTOP), 0);
  const auto stopped = Clock::now();
  ASSERT_TRUE(WaitFor([&] { return !Eligible(*lb, *a); }, seconds(3)));
  const auto out_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - stopped).count();
  std::printf("hung node out of rotation after %lld ms\n", static_cast<long long>(out_ms));
  EXPECT_LT(out_ms, 1000);
  for (int i = 0; i < 3; ++i) clients.push_back(Connected(lb->mqtt_port(), "health-" + std::to_string(i)));
  EXPECT_TRUE(WaitFor([&] { return NodeConnections(*b) == 9; }, seconds(5)));
  ASSERT_EQ(::kill(a->pid(), SIGCONT), 0);
  const auto resumed = Clock::now();
  ASSERT_TRUE(WaitFor([&] { return Eligible(*lb, *a); }, seconds(3)));
  std::printf("node back in rotation %lld ms after it answered again\n",
              static_cast<long long>(std::chrono::duration_cast<milliseconds>(Clock::now() - resumed).count()));

  // Death: kill -9 of b; it is out of rotation within 1 s, clients go to a.
  ::kill(b->pid(), SIGKILL);
  const auto killed = Clock::now();
  ASSERT_TRUE(WaitFor([&] { return !Eligible(*lb, *b); }, seconds(3)));
  EXPECT_LT(Clock::now() - killed, milliseconds(1000));
  auto after = Connected(lb->mqtt_port(), "after-kill");
  EXPECT_TRUE(after);
  EXPECT_EQ(lb->Stop(), 0);
}

TEST(EstuaryLbTest, MqttClientsGoToTheNodeThatPlacesTheirSession) {
  auto n1 = StartNode(1);
  auto n2 = StartNode(2);
  auto n3 = StartNode(3);
  ASSERT_TRUE(n1 && n2 && n3);
  auto lb = StartLb({"--nodes", NodeList({n1.get(), n2.get(), n3.get()}), "--proxy-protocol", "none"});
  ASSERT_TRUE(lb);
  ASSERT_TRUE(WaitFor([&] { return Eligible(*lb, *n1) && Eligible(*lb, *n2) && Eligible(*lb, *n3); }, seconds(5)));
  // The mapping (docs/balancer.md): session/<client-id> on the ring of the
  // node ids with the balancer's defaults (4096 partitions, 3 replicas).
  auto ring = ring::Ring::Build({"1", "2", "3"});
  ASSERT_TRUE(ring);
  std::map<std::string, uint64_t> expected;
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < 30; ++i) {
    const std::string id = "device-" + std::to_string(i);
    expected[ring->Leader(ring->PartitionOf("session/" + id))]++;
    clients.push_back(Connected(lb->mqtt_port(), id));
    ASSERT_TRUE(clients.back()) << id;
  }
  EXPECT_TRUE(WaitFor(
      [&] {
        return NodeConnections(*n1) == expected["1"] && NodeConnections(*n2) == expected["2"] &&
               NodeConnections(*n3) == expected["3"];
      },
      seconds(5)))
      << "expected " << expected["1"] << "/" << expected["2"] << "/" << expected["3"] << ", got "
      << NodeConnections(*n1) << "/" << NodeConnections(*n2) << "/" << NodeConnections(*n3);
  // Each node's share differs, which is what makes the check meaningful.
  EXPECT_GT(expected.size(), 1u);
}

TEST(EstuaryLbTest, GarbageAndSilenceAreDroppedWithoutReachingANode) {
  auto node = StartNode(1);
  ASSERT_TRUE(node);
  auto lb = StartLb({"--nodes", AdminOf(*node), "--connect-timeout", "300", "--proxy-protocol", "none"});
  ASSERT_TRUE(lb);
  ASSERT_TRUE(WaitFor([&] { return Eligible(*lb, *node); }, seconds(5)));
  RawClient garbage;
  ASSERT_TRUE(garbage.Open("127.0.0.1", lb->mqtt_port()));
  garbage.SendBytes("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(garbage.WaitClosed(seconds(5)));
  RawClient silent;
  ASSERT_TRUE(silent.Open("127.0.0.1", lb->mqtt_port()));
  const auto opened = Clock::now();
  EXPECT_TRUE(silent.WaitClosed(seconds(5)));
  EXPECT_GE(Clock::now() - opened, milliseconds(250));
  // The client may see the close before the data-plane thread has counted
  // it (the counters are read across threads): wait for it, briefly.
  std::string metrics;
  EXPECT_TRUE(WaitFor(
      [&] {
        metrics = HttpGet("127.0.0.1", lb->admin_port(), "/metrics").body;
        return metrics.find("estuary_lb_refused_total 2\n") != std::string::npos;
      },
      seconds(5)))
      << metrics;
  EXPECT_EQ(LbNode(*lb, *node).value("sent_total", -1), 0);
}

}  // namespace
}  // namespace estuary::testing
