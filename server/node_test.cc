// A whole node in-process on free loopback ports, driven over real sockets.
#include "server/node.h"

#include <gtest/gtest.h>

#include <thread>

#include "conformance/support/raw_client.h"

namespace estuary::server {
namespace {

using testing::RawClient;

class NodeTest : public ::testing::Test {
 protected:
  void StartNode(uint16_t shards) {
    NodeConfig config;
    config.mqtt = {"127.0.0.1", 0};
    config.amqp = {"127.0.0.1", 0};
    config.admin = {"127.0.0.1", 0};
    config.cluster = {"127.0.0.1", 0};
    config.shards = shards;
    config.sys_interval_s = 1;
    node_ = std::make_unique<Node>(config);
    auto started = node_->Start();
    ASSERT_TRUE(started.has_value()) << started.error();
    ParsePorts(node_->ReadyLine());
    runner_ = std::thread([this] { node_->Run(); });
  }
  void ParsePorts(const std::string& line) {
    auto port_of = [&](const std::string& key) {
      const size_t at = line.find(key + "=");
      const size_t colon = line.find(':', at);
      return static_cast<uint16_t>(std::stoi(line.substr(colon + 1)));
    };
    mqtt_port_ = port_of("mqtt");
    admin_port_ = port_of("admin");
  }
  void TearDown() override {
    if (node_) {
      node_->RequestShutdown();
      runner_.join();
    }
  }
  std::unique_ptr<RawClient> Connect(const std::string& id, bool clean = true) {
    auto client = std::make_unique<RawClient>();
    EXPECT_TRUE(client->Open("127.0.0.1", mqtt_port_));
    auto connack = client->Connect(id, clean);
    EXPECT_TRUE(connack.has_value());
    if (connack) {
      EXPECT_EQ(connack->reason, mqtt::ReasonCode::kSuccess);
    }
    return client;
  }

  std::unique_ptr<Node> node_;
  std::thread runner_;
  uint16_t mqtt_port_ = 0;
  uint16_t admin_port_ = 0;
};

TEST_F(NodeTest, ReadyLineNamesEveryEndpoint) {
  StartNode(1);
  const std::string line = node_->ReadyLine();
  EXPECT_EQ(line.rfind("estuaryd ready node=1 mqtt=127.0.0.1:", 0), 0u) << line;
  for (const char* key : {" amqp=127.0.0.1:", " admin=127.0.0.1:", " cluster=127.0.0.1:"}) {
    EXPECT_NE(line.find(key), std::string::npos) << line;
  }
  EXPECT_NE(mqtt_port_, 0);
}

TEST_F(NodeTest, AdminServesHealthAndMetrics) {
  StartNode(2);
  auto health = testing::HttpGet("127.0.0.1", admin_port_, "/healthz");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "ok\n");
  auto client = Connect("metrics-client");
  auto metrics = testing::HttpGet("127.0.0.1", admin_port_, "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("# TYPE estuary_connections gauge"), std::string::npos);
  EXPECT_NE(metrics.body.find("estuary_connections{node=\"1\",shard=\"1\"}"), std::string::npos);
  auto load = testing::HttpGet("127.0.0.1", admin_port_, "/api/load");
  EXPECT_EQ(load.status, 200);
  EXPECT_NE(load.body.find("\"connections\":1"), std::string::npos) << load.body;
  EXPECT_EQ(testing::HttpGet("127.0.0.1", admin_port_, "/nope").status, 404);
}

TEST_F(NodeTest, PublishReachesSubscribersOnEveryShard) {
  StartNode(3);
  std::vector<std::unique_ptr<RawClient>> subscribers;
  for (int i = 0; i < 9; ++i) {  // ids spread over the three shards
    auto client = Connect("sub-" + std::to_string(i));
    mqtt::SubscribePacket subscribe;
    subscribe.packet_id = 1;
    subscribe.subscriptions = {{"fleet/+/temp", {1, false, false, 0}}};
    client->Send(subscribe);
    auto suback = client->Receive();
    ASSERT_TRUE(suback && std::holds_alternative<mqtt::SubackPacket>(*suback));
    subscribers.push_back(std::move(client));
  }
  auto publisher = Connect("publisher");
  mqtt::PublishPacket publish;
  publish.topic = "fleet/7/temp";
  publish.payload = "21.5";
  publish.qos = 1;
  publish.packet_id = 10;
  publisher->Send(publish);
  auto puback = publisher->Receive();
  ASSERT_TRUE(puback && std::holds_alternative<mqtt::AckPacket>(*puback));
  for (auto& subscriber : subscribers) {
    auto delivered = subscriber->Receive();
    ASSERT_TRUE(delivered && std::holds_alternative<mqtt::PublishPacket>(*delivered));
    EXPECT_EQ(std::get<mqtt::PublishPacket>(*delivered).payload, "21.5");
  }
}

TEST_F(NodeTest, SameClientIdOnTwoConnectionsTakesOver) {
  StartNode(2);
  auto first = Connect("twin");
  auto second = Connect("twin");
  EXPECT_TRUE(first->WaitClosed());
  ASSERT_TRUE(first->last_discarded.has_value());
  EXPECT_EQ(std::get<mqtt::DisconnectPacket>(*first->last_discarded).reason,
            mqtt::ReasonCode::kSessionTakenOver);
  mqtt::PingreqPacket ping;
  second->Send(ping);
  auto pong = second->Receive();
  EXPECT_TRUE(pong && std::holds_alternative<mqtt::PingrespPacket>(*pong));
}

TEST_F(NodeTest, SysTopicsArePublished) {
  StartNode(2);
  auto client = Connect("sys-reader");
  mqtt::SubscribePacket subscribe;
  subscribe.packet_id = 1;
  subscribe.subscriptions = {{"$SYS/broker/version", {0, false, false, 0}}};
  client->Send(subscribe);
  client->Receive();  // SUBACK
  auto version = client->Receive();
  ASSERT_TRUE(version && std::holds_alternative<mqtt::PublishPacket>(*version));
  EXPECT_EQ(std::get<mqtt::PublishPacket>(*version).payload.rfind("estuary ", 0), 0u);
}

TEST_F(NodeTest, ShutdownDisconnectsClientsWithServerShuttingDown) {
  StartNode(2);
  auto client = Connect("leaving");
  node_->RequestShutdown();
  runner_.join();
  node_.reset();
  auto packet = client->Receive();
  ASSERT_TRUE(packet && std::holds_alternative<mqtt::DisconnectPacket>(*packet));
  EXPECT_EQ(std::get<mqtt::DisconnectPacket>(*packet).reason, mqtt::ReasonCode::kServerShuttingDown);
}

}  // namespace
}  // namespace estuary::server
