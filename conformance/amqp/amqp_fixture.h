#pragma once
// AmqpFixture: the MQTT conformance BrokerFixture (one estuaryd per test,
// two shards, stopped with SIGTERM and a clean exit asserted) plus AMQP
// clients on its AMQP port. Tests name the AMQP 1.0 section they check.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "conformance/amqp/amqp_client.h"
#include "conformance/mqtt/broker_fixture.h"
#include "conformance/support/raw_client.h"

namespace estuary::conformance {

class AmqpFixture : public BrokerFixture {
 protected:
  uint16_t amqp_port() { return broker().amqp_port(); }
  // A client whose connection is open (ADD_FAILURE if it is not).
  std::unique_ptr<AmqpClient> Connect(AmqpClientOptions options = {}) {
    auto client = std::make_unique<AmqpClient>(broker().host(), amqp_port(), std::move(options));
    std::string error;
    if (!client->WaitOpen(&error)) ADD_FAILURE() << "AMQP open failed: " << error;
    return client;
  }
  // Opens a receiver and waits for the server's attach.
  void Receive(AmqpClient& client, const std::string& name, const std::string& source, LinkOptions options = {}) {
    client.OpenReceiver(name, source, options);
    ASSERT_TRUE(client.Wait(AmqpEvent::Kind::kReceiverOpen, name)) << "no attach for receiver " << name;
  }
  void Sender(AmqpClient& client, const std::string& name, const std::string& target, LinkOptions options = {}) {
    client.OpenSender(name, target, options);
    ASSERT_TRUE(client.Wait(AmqpEvent::Kind::kSenderOpen, name)) << "no attach for sender " << name;
  }
  // The sum over shards of a metric from /metrics.
  uint64_t MetricSum(const std::string& name) {
    auto page = testing::HttpGet(broker().host(), broker().admin_port(), "/metrics");
    EXPECT_EQ(page.status, 200);
    uint64_t sum = 0;
    size_t at = 0;
    while ((at = page.body.find("\n" + name + "{", at)) != std::string::npos) {
      const size_t end = page.body.find('\n', at + 1);
      const std::string line = page.body.substr(at + 1, end - at - 1);
      sum += std::stoull(line.substr(line.rfind(' ') + 1));
      at = end;
    }
    return sum;
  }
  static std::string Body(const AmqpEvent& event) {
    const proton::value& body = event.message.body();
    if (body.type() == proton::BINARY) return std::string(proton::get<proton::binary>(body));
    if (body.type() == proton::STRING) return proton::get<std::string>(body);
    return "<" + proton::type_name(body.type()) + ">";
  }
};

}  // namespace estuary::conformance
