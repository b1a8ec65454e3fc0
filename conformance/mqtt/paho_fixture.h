#pragma once
// Fixtures for the tests that drive estuaryd with Eclipse Paho MQTT C++:
// PahoV311 speaks MQTT 3.1.1, PahoV5 speaks MQTT 5.0 (coverage.py counts
// their tests for that version).
#include <memory>
#include <string>
#include <vector>

#include "conformance/mqtt/broker_fixture.h"
#include "conformance/mqtt/paho_client.h"
#include "conformance/support/tcp_relay.h"

namespace estuary::conformance {

class PahoFixture : public BrokerFixture {
 protected:
  explicit PahoFixture(int mqtt_version) : mqtt_version_(mqtt_version) {}

  std::unique_ptr<PahoClient> Client(const std::string& client_id) {
    return std::make_unique<PahoClient>(uri(), client_id, mqtt_version_);
  }
  // A client that reaches the broker through `relay`, whose Cut() then
  // fails its network connection.
  std::unique_ptr<PahoClient> ClientVia(const testing::TcpRelay& relay, const std::string& client_id) {
    return std::make_unique<PahoClient>(relay.uri(), client_id, mqtt_version_);
  }
  std::unique_ptr<testing::TcpRelay> Relay() {
    auto relay = testing::TcpRelay::Start(broker().host(), port());
    EXPECT_NE(relay, nullptr);
    return relay;
  }
  // A client connected with default options (clean session / clean start).
  // Connect a test's Paho clients together (ConnectTogether), or make the
  // others raw clients: see PahoClient::StartConnect for why.
  std::unique_ptr<PahoClient> Connected(const std::string& client_id) {
    auto client = Client(client_id);
    client->Connect();
    return client;
  }
  // Clients for `client_ids`, connected at once with default options.
  std::vector<std::unique_ptr<PahoClient>> ConnectTogether(const std::vector<std::string>& client_ids) {
    std::vector<std::unique_ptr<PahoClient>> clients;
    std::vector<paho::token_ptr> tokens;
    for (const auto& id : client_ids) {
      clients.push_back(Client(id));
      tokens.push_back(clients.back()->StartConnect({}));
    }
    for (const auto& token : tokens) PahoClient::FinishConnect(token);
    return clients;
  }

 private:
  int mqtt_version_;
};

class PahoV311 : public PahoFixture {
 protected:
  PahoV311() : PahoFixture(MQTTVERSION_3_1_1) {}
};

class PahoV5 : public PahoFixture {
 protected:
  PahoV5() : PahoFixture(MQTTVERSION_5) {}
};

}  // namespace estuary::conformance
