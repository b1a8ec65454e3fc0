// A whole node in-process on free loopback ports, driven over real sockets.
#include "server/node.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
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


// ---- The admin API's gathered pages and the dashboard (issue 25 point 1,
// docs/admin-api.md), on one node with its clients spread over shards.

TEST_F(NodeTest, AdminListsClientsSessionsSubscriptionsAndKicksOne) {
  StartNode(3);
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < 6; ++i) {
    auto client = Connect("api-" + std::to_string(i));
    mqtt::SubscribePacket subscribe;
    subscribe.packet_id = 1;
    subscribe.subscriptions = {{"api/" + std::to_string(i) + "/#", {1, false, false, 0}},
                               {"$share/workers/api/jobs", {0, false, false, 0}}};
    client->Send(subscribe);
    auto suback = client->Receive();
    ASSERT_TRUE(suback && std::holds_alternative<mqtt::SubackPacket>(*suback));
    clients.push_back(std::move(client));
  }
  auto json = [](const testing::HttpResult& result) { return nlohmann::json::parse(result.body); };
  auto all = testing::HttpGet("127.0.0.1", admin_port_, "/api/clients");
  ASSERT_EQ(all.status, 200) << all.body;
  EXPECT_EQ(json(all)["total"], 6);
  EXPECT_EQ(json(all)["clients"][0]["client_id"], "api-0");  // sorted over the shards
  auto page = json(testing::HttpGet("127.0.0.1", admin_port_, "/api/clients?limit=2&offset=2"));
  ASSERT_EQ(page["clients"].size(), 2u);
  EXPECT_EQ(page["clients"][0]["client_id"], "api-2");
  EXPECT_EQ(page["total"], 6);
  auto one = json(testing::HttpGet("127.0.0.1", admin_port_, "/api/clients?client_id=api-4"));
  ASSERT_EQ(one["clients"].size(), 1u);
  EXPECT_EQ(one["clients"][0]["protocol"], "mqtt5");
  EXPECT_EQ(testing::HttpGet("127.0.0.1", admin_port_, "/api/clients?limit=5000").status, 400);
  EXPECT_EQ(testing::HttpGet("127.0.0.1", admin_port_, "/api/clients?limit=x").status, 400);

  EXPECT_EQ(json(testing::HttpGet("127.0.0.1", admin_port_, "/api/sessions"))["total"], 6);
  auto subscriptions = json(testing::HttpGet("127.0.0.1", admin_port_, "/api/subscriptions?filter=api%2F3"));
  ASSERT_EQ(subscriptions["subscriptions"].size(), 1u) << subscriptions;
  EXPECT_EQ(subscriptions["subscriptions"][0]["client_id"], "api-3");
  auto shared = json(testing::HttpGet("127.0.0.1", admin_port_, "/api/shared"));
  ASSERT_EQ(shared["groups"].size(), 1u) << shared;
  EXPECT_EQ(shared["groups"][0]["group"], "workers");
  EXPECT_EQ(shared["groups"][0]["member_count"], 6);

  auto overview = json(testing::HttpGet("127.0.0.1", admin_port_, "/api/overview"));
  ASSERT_EQ(overview["nodes"].size(), 1u) << overview;
  EXPECT_EQ(overview["nodes"][0]["load"]["connections"], 6);
  EXPECT_TRUE(overview["nodes"][0]["score"].is_number());

  auto kicked = testing::HttpRequest("127.0.0.1", admin_port_, "DELETE", "/api/clients/api-5");
  ASSERT_EQ(kicked.status, 200) << kicked.body;
  auto packet = clients[5]->Receive();
  ASSERT_TRUE(packet && std::holds_alternative<mqtt::DisconnectPacket>(*packet));
  EXPECT_EQ(std::get<mqtt::DisconnectPacket>(*packet).reason, mqtt::ReasonCode::kAdministrativeAction);
  EXPECT_EQ(testing::HttpRequest("127.0.0.1", admin_port_, "DELETE", "/api/clients/nobody").status, 404);
  EXPECT_EQ(testing::HttpRequest("127.0.0.1", admin_port_, "PUT", "/api/clients/api-1").status, 405);
}

TEST_F(NodeTest, AdminServesTheDashboardFiles) {
  StartNode(1);
  auto page = testing::HttpGet("127.0.0.1", admin_port_, "/");
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("<script src=\"/app.js\">"), std::string::npos);
  for (const char* file : {"/app.js", "/style.css", "/chart.js"}) {
    auto asset = testing::HttpGet("127.0.0.1", admin_port_, file);
    EXPECT_EQ(asset.status, 200) << file;
    EXPECT_GT(asset.body.size(), 100u) << file;
  }
  EXPECT_NE(testing::HttpGet("127.0.0.1", admin_port_, "/chart.js").body.find("Chart.js v"), std::string::npos);
}

TEST_F(NodeTest, WithATokenTheDashboardLoadsAndItsApiAsksForTheToken) {
  const std::string dir = ::testing::TempDir() + "/node-test-token";
  std::filesystem::create_directories(dir);
  const std::string file = dir + "/token";
  std::ofstream(file) << "dashboard-token-0123456789\n";
  std::filesystem::permissions(file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  NodeConfig config;
  config.mqtt = {"127.0.0.1", 0};
  config.amqp = {"127.0.0.1", 0};
  config.admin = {"127.0.0.1", 0};
  config.cluster = {"127.0.0.1", 0};
  config.admin_token_file = file;
  config.shards = 1;
  config.sys_interval_s = 1;
  node_ = std::make_unique<Node>(config);
  auto started = node_->Start();
  ASSERT_TRUE(started.has_value()) << started.error();
  ParsePorts(node_->ReadyLine());
  runner_ = std::thread([this] { node_->Run(); });
  EXPECT_EQ(testing::HttpGet("127.0.0.1", admin_port_, "/").status, 200);
  EXPECT_EQ(testing::HttpGet("127.0.0.1", admin_port_, "/app.js").status, 200);
  EXPECT_EQ(testing::HttpGet("127.0.0.1", admin_port_, "/api/overview").status, 401);
  EXPECT_EQ(testing::HttpRequest("127.0.0.1", admin_port_, "DELETE", "/api/clients/x").status, 401);
  testing::AdminTokenScope token("dashboard-token-0123456789");
  EXPECT_EQ(testing::HttpGet("127.0.0.1", admin_port_, "/api/overview").status, 200);
}
}  // namespace
}  // namespace estuary::server
