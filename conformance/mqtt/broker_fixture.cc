#include "conformance/mqtt/broker_fixture.h"

#include <unistd.h>

#include <atomic>

namespace estuary::conformance {
namespace {

using mqtt::AckPacket;
using mqtt::PacketType;
using mqtt::ProtocolVersion;

std::vector<std::string> DefaultFlags() {
  // Two shards so that sessions, routes and retained messages cross shards;
  // $SYS off unless a test asks; a short grace so shutdown stays quick.
  return {"--shards", "2", "--log-level", "warn", "--sys-interval", "0", "--shutdown-grace", "500"};
}

// estuaryd refuses a flag given twice: a later "--name value" replaces an
// earlier one. Every estuaryd flag takes a value.
void MergeFlags(std::vector<std::string>& into, const std::vector<std::string>& flags) {
  for (size_t i = 0; i + 1 < flags.size(); i += 2) {
    bool replaced = false;
    for (size_t j = 0; j + 1 < into.size(); j += 2) {
      if (into[j] == flags[i]) {
        into[j + 1] = flags[i + 1];
        replaced = true;
      }
    }
    if (!replaced) {
      into.push_back(flags[i]);
      into.push_back(flags[i + 1]);
    }
  }
}

void SendAck(RawClient& client, PacketType type, uint16_t packet_id) {
  AckPacket ack;
  ack.type = type;
  ack.packet_id = packet_id;
  client.Send(ack);
}

}  // namespace

void BrokerFixture::SetUp() { RestartBroker({}); }

void BrokerFixture::TearDown() {
  publisher_.reset();
  if (broker_) {
    EXPECT_EQ(broker_->Stop(), 0) << "estuaryd did not exit cleanly on SIGTERM";
  }
}

void BrokerFixture::RestartBroker(const std::vector<std::string>& flags) {
  publisher_.reset();
  if (broker_) {
    EXPECT_EQ(broker_->Stop(), 0) << "estuaryd did not exit cleanly on SIGTERM";
    broker_.reset();
  }
  std::vector<std::string> all = DefaultFlags();
  MergeFlags(all, SuiteFlags());
  MergeFlags(all, flags);
  std::string error;
  broker_ = BrokerProcess::Start(all, &error);
  ASSERT_NE(broker_, nullptr) << error;
}

std::unique_ptr<RawClient> BrokerFixture::OpenRaw(ProtocolVersion version) {
  auto client = std::make_unique<RawClient>();
  client->version = version;
  EXPECT_TRUE(client->Open(broker_->host(), broker_->mqtt_port())) << "cannot connect to estuaryd";
  return client;
}

std::unique_ptr<RawClient> BrokerFixture::ConnectRaw(const std::string& client_id, ProtocolVersion version,
                                                     bool clean_start, mqtt::Properties properties,
                                                     uint16_t keep_alive) {
  auto client = OpenRaw(version);
  auto connack = client->Connect(client_id, clean_start, std::move(properties), keep_alive);
  if (!connack) {
    ADD_FAILURE() << "no CONNACK for " << client_id;
  } else if (connack->reason != mqtt::ReasonCode::kSuccess) {
    ADD_FAILURE() << "CONNACK for " << client_id << ": " << mqtt::ToString(connack->reason);
  }
  return client;
}

std::unique_ptr<RawClient> BrokerFixture::SubscribeRaw(const std::string& client_id, const std::string& filter,
                                                       uint8_t qos, ProtocolVersion version) {
  auto client = ConnectRaw(client_id, version);
  mqtt::SubscribeOptions options;
  options.qos = qos;
  auto suback = Subscribe(*client, filter, options);
  if (!suback || suback->reasons.size() != 1 || mqtt::IsError(suback->reasons[0])) {
    ADD_FAILURE() << "subscription to " << filter << " refused";
  }
  return client;
}

void BrokerFixture::TakeOffline(const std::string& client_id, ProtocolVersion version, uint32_t session_expiry) {
  mqtt::Properties properties;
  if (version == ProtocolVersion::kV5) properties.session_expiry_interval = session_expiry;
  auto client = ConnectRaw(client_id, version, false, properties);
  DisconnectAndWait(*client);
}

void BrokerFixture::ExpectBrokerServes() {
  // QoS 0, so that it works under every --maximum-qos.
  const std::string topic = Unique("probe/");
  auto client = SubscribeRaw(Unique("probe"), topic, 0);
  ASSERT_TRUE(PublishAndAck(*client, MakePublish(topic, "still here", 0)));
  auto received = ReceivePublish(*client);
  ASSERT_TRUE(received.has_value()) << "the broker stopped serving other clients";
  EXPECT_EQ(received->payload, "still here");
}

void BrokerFixture::WaitBrokerSeconds(uint32_t delay_seconds) {
  const std::string topic = Unique("clock/");
  auto watcher = SubscribeRaw(Unique("clock-watch"), topic, 0);
  mqtt::ConnectPacket connect;
  connect.protocol_name = "MQTT";
  connect.version = ProtocolVersion::kV5;
  connect.client_id = Unique("clock");
  connect.properties.session_expiry_interval = delay_seconds + 60;
  connect.will = mqtt::Will{topic, "tick", 0, false, {}};
  connect.will->properties.will_delay_interval = delay_seconds;
  auto clock = OpenRaw();
  auto connack = clock->Connect(connect);
  ASSERT_TRUE(connack && connack->reason == mqtt::ReasonCode::kSuccess);
  clock->Close();  // no DISCONNECT: the will stays armed
  auto tick = watcher->ReceiveAs<mqtt::PublishPacket>(seconds(delay_seconds + 10));
  ASSERT_TRUE(tick.has_value()) << "the broker's " << delay_seconds << " s will timer never fired";
}

void BrokerFixture::RawPublish(const std::string& topic, const std::string& payload, uint8_t qos, bool retain,
                               mqtt::Properties properties) {
  if (!publisher_) publisher_ = ConnectRaw(Unique("raw-pub"));
  next_packet_id_ = static_cast<uint16_t>(next_packet_id_ % 65535 + 1);
  auto publish = MakePublish(topic, payload, qos, next_packet_id_, retain);
  publish.properties = std::move(properties);
  if (!PublishAndAck(*publisher_, publish)) ADD_FAILURE() << "publishing to " << topic << " failed";
}

std::string BrokerFixture::Unique(const std::string& prefix) {
  static std::atomic<int> counter{0};
  return prefix + std::to_string(::getpid()) + "-" + std::to_string(++counter);
}

mqtt::PublishPacket MakePublish(const std::string& topic, const std::string& payload, uint8_t qos,
                                uint16_t packet_id, bool retain) {
  mqtt::PublishPacket publish;
  publish.topic = topic;
  publish.payload = payload;
  publish.qos = qos;
  publish.packet_id = qos == 0 ? 0 : (packet_id == 0 ? 1 : packet_id);
  publish.retain = retain;
  return publish;
}

std::optional<mqtt::SubackPacket> Subscribe(RawClient& client, const std::string& filter,
                                            mqtt::SubscribeOptions options, uint16_t packet_id,
                                            mqtt::Properties properties) {
  mqtt::SubscribePacket subscribe;
  subscribe.packet_id = packet_id;
  subscribe.properties = std::move(properties);
  subscribe.subscriptions.push_back({filter, options});
  client.Send(subscribe);
  return client.ReceiveAs<mqtt::SubackPacket>();
}

std::optional<mqtt::SubackPacket> SubscribeAll(RawClient& client, const std::vector<std::string>& filters,
                                               mqtt::SubscribeOptions options, uint16_t packet_id) {
  mqtt::SubscribePacket subscribe;
  subscribe.packet_id = packet_id;
  for (const auto& filter : filters) subscribe.subscriptions.push_back({filter, options});
  client.Send(subscribe);
  return client.ReceiveAs<mqtt::SubackPacket>();
}

bool PublishAndAck(RawClient& client, const mqtt::PublishPacket& publish) {
  client.Send(publish);
  if (publish.qos == 0) return true;
  // Deliveries to this same client may come before the acknowledgement:
  // keep them for ReceivePublish.
  std::vector<mqtt::Packet> deliveries;
  auto next_ack = [&]() -> std::optional<AckPacket> {
    for (;;) {
      auto packet = client.Receive();
      if (packet && std::holds_alternative<mqtt::PublishPacket>(*packet)) {
        deliveries.push_back(std::move(*packet));
        continue;
      }
      if (packet && std::holds_alternative<AckPacket>(*packet)) return std::get<AckPacket>(*packet);
      client.last_unexpected = std::move(packet);
      return std::nullopt;
    }
  };
  auto fail = [&](PacketType expected, const std::optional<AckPacket>& got) {
    ADD_FAILURE() << "expected " << mqtt::ToString(expected) << " for packet id " << publish.packet_id << ", got "
                  << (got ? mqtt::ToString(got->type)
                      : client.last_unexpected ? mqtt::ToString(mqtt::TypeOf(*client.last_unexpected))
                      : client.closed() ? "a closed connection" : "nothing");
    return false;
  };
  const PacketType expected = publish.qos == 1 ? PacketType::kPuback : PacketType::kPubrec;
  auto ack = next_ack();
  if (!ack || ack->type != expected || ack->packet_id != publish.packet_id) return fail(expected, ack);
  if (publish.qos == 2) {
    SendAck(client, PacketType::kPubrel, publish.packet_id);
    auto complete = next_ack();
    if (!complete || complete->type != PacketType::kPubcomp || complete->packet_id != publish.packet_id) {
      return fail(PacketType::kPubcomp, complete);
    }
  }
  for (auto& delivery : deliveries) client.PutBack(std::move(delivery));
  return true;
}

std::optional<mqtt::PublishPacket> ReceivePublish(RawClient& client, milliseconds timeout, bool ack) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    auto packet = client.Receive(left);
    if (!packet) return std::nullopt;
    if (auto* release = std::get_if<AckPacket>(&*packet); release && release->type == PacketType::kPubrel) {
      SendAck(client, PacketType::kPubcomp, release->packet_id);  // end of an earlier QoS 2 delivery
      continue;
    }
    auto* publish = std::get_if<mqtt::PublishPacket>(&*packet);
    if (publish == nullptr) {
      client.last_unexpected = std::move(packet);
      return std::nullopt;
    }
    if (ack && publish->qos == 1) SendAck(client, PacketType::kPuback, publish->packet_id);
    if (ack && publish->qos == 2) SendAck(client, PacketType::kPubrec, publish->packet_id);
    return std::move(*publish);
  }
}

std::optional<std::vector<mqtt::PublishPacket>> DrainUntilPong(RawClient& client, bool ack) {
  client.Send(mqtt::PingreqPacket{});
  std::vector<mqtt::PublishPacket> received;
  for (;;) {
    auto packet = client.Receive();
    if (!packet) return std::nullopt;
    if (std::holds_alternative<mqtt::PingrespPacket>(*packet)) return received;
    if (auto* release = std::get_if<AckPacket>(&*packet); release && release->type == PacketType::kPubrel) {
      SendAck(client, PacketType::kPubcomp, release->packet_id);
      continue;
    }
    auto* publish = std::get_if<mqtt::PublishPacket>(&*packet);
    if (publish == nullptr) {
      client.last_unexpected = std::move(packet);
      return std::nullopt;
    }
    if (ack && publish->qos == 1) SendAck(client, PacketType::kPuback, publish->packet_id);
    if (ack && publish->qos == 2) SendAck(client, PacketType::kPubrec, publish->packet_id);
    received.push_back(std::move(*publish));
  }
}

void DisconnectAndWait(RawClient& client) {
  client.Send(mqtt::DisconnectPacket{});
  EXPECT_TRUE(client.WaitClosed()) << "the server did not close the connection after DISCONNECT";
  client.Close();
}

std::optional<mqtt::ReasonCode> ExpectDisconnected(RawClient& client, milliseconds timeout) {
  std::optional<mqtt::ReasonCode> reason;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!client.closed()) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    auto packet = client.Receive(left);
    if (!packet) continue;
    if (auto* disconnect = std::get_if<mqtt::DisconnectPacket>(&*packet)) reason = disconnect->reason;
  }
  EXPECT_TRUE(client.closed()) << "the server did not close the connection";
  return reason;
}

}  // namespace estuary::conformance
