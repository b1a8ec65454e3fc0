// Shared by the MqttConnection tests (connection_test.cc,
// connection_claim_test.cc): a client driven through an in-memory stream and
// the fixture that owns a ShardBroker on simulated time.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "frontends/mqtt/codec/encoder.h"
#include "frontends/mqtt/session/connection.h"
#include "io/sim/sim_loop.h"

namespace estuary::mqtt::test_support {

class NoLink final : public core::ShardLink {
 public:
  void Post(uint16_t, std::function<void(core::ShardBroker&)>) override { ADD_FAILURE(); }
};

// One client: a stream, a connection, and the packets the server sent.
class Client {
 public:
  Client(core::ShardBroker& broker, ProtocolVersion version, ConnectionSettings settings = {})
      : version_(version) {
    connection_ = std::make_shared<MqttConnection>(broker, stream_, std::move(settings));
    connection_->Start();
  }
  void Send(const Packet& packet) {
    std::string bytes;
    EncodePacket(packet, version_, bytes);
    connection_->OnBytes(bytes);
  }
  void SendRaw(std::string_view bytes) { connection_->OnBytes(bytes); }
  // Decodes everything written so far.
  std::vector<Packet> Received() {
    std::string_view buffer = stream_.written;
    buffer.remove_prefix(consumed_);
    std::vector<Packet> packets;
    while (!buffer.empty()) {
      auto header = PeekFrame(buffer, UINT32_MAX);
      if (!header || header->header_size == 0 || buffer.size() < header->total_size()) break;
      auto packet = DecodePacket(buffer.substr(0, header->total_size()), version_);
      EXPECT_TRUE(packet.has_value());
      if (packet) packets.push_back(std::move(*packet));
      consumed_ += header->total_size();
      buffer.remove_prefix(header->total_size());
    }
    return packets;
  }
  template <typename T>
  T Expect() {
    auto packets = Received();
    EXPECT_EQ(packets.size(), 1u) << "expected exactly one packet";
    if (packets.size() != 1 || !std::holds_alternative<T>(packets[0])) {
      ADD_FAILURE() << "unexpected packet";
      return T{};
    }
    return std::get<T>(packets[0]);
  }
  void Connect(std::string client_id, bool clean = true, Properties properties = {},
               uint16_t keep_alive = 0, std::optional<Will> will = std::nullopt) {
    ConnectPacket connect;
    connect.protocol_name = "MQTT";
    connect.version = version_;
    connect.client_id = std::move(client_id);
    connect.clean_start = clean;
    connect.keep_alive = keep_alive;
    connect.properties = std::move(properties);
    connect.will = std::move(will);
    Send(connect);
  }
  void Subscribe(std::string filter, uint8_t qos, uint16_t id = 1, Properties properties = {}) {
    SubscribePacket subscribe;
    subscribe.packet_id = id;
    subscribe.properties = std::move(properties);
    subscribe.subscriptions.push_back({std::move(filter), SubscribeOptions{qos, false, false, 0}});
    Send(subscribe);
  }
  void Publish(std::string topic, std::string payload, uint8_t qos = 0, uint16_t id = 0,
               bool retain = false, Properties properties = {}) {
    PublishPacket publish;
    publish.topic = std::move(topic);
    publish.payload = std::move(payload);
    publish.qos = qos;
    publish.packet_id = id;
    publish.retain = retain;
    publish.properties = std::move(properties);
    Send(publish);
  }
  void Ack(PacketType type, uint16_t id) {
    AckPacket ack;
    ack.type = type;
    ack.packet_id = id;
    Send(ack);
  }
  void DropNetwork() {
    stream_.closed = true;
    connection_->OnStreamClosed();
  }
  // The server drops its last reference, as it does once a connection closed.
  void Destroy() { connection_.reset(); }
  bool closed() const { return stream_.closed; }
  io::MemoryStream& stream() { return stream_; }
  MqttConnection& connection() { return *connection_; }

 private:
  ProtocolVersion version_;
  io::MemoryStream stream_;
  std::shared_ptr<MqttConnection> connection_;
  size_t consumed_ = 0;
};

class ConnectionTest : public ::testing::Test {
 protected:
  explicit ConnectionTest(core::BrokerLimits limits = {}) {
    core::ShardConfig config;
    config.node_id = 1;
    config.limits = limits;
    broker_ = std::make_unique<core::ShardBroker>(config, loop_, link_, metrics_);
  }
  std::unique_ptr<Client> Connected(std::string id, ProtocolVersion version = ProtocolVersion::kV5,
                                    bool clean = true, Properties properties = {}) {
    auto client = std::make_unique<Client>(*broker_, version);
    client->Connect(std::move(id), clean, std::move(properties));
    auto connack = client->Expect<ConnackPacket>();
    EXPECT_EQ(connack.reason, ReasonCode::kSuccess);
    return client;
  }
  // Runs posted work (delivery pumps).
  void Settle() { loop_.RunUntilIdle(); }

  io::ManualClock clock_;
  io::SimLoop loop_{clock_};
  NoLink link_;
  core::ShardMetrics metrics_;
  std::unique_ptr<core::ShardBroker> broker_;
};

}  // namespace estuary::mqtt::test_support
