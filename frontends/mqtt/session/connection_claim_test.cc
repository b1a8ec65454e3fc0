// MqttConnection's CONNECT waiting for the cluster's client id claim (issue 6
// point 5): a fake registry answers when the test says so.
#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "frontends/mqtt/codec/encoder.h"
#include "frontends/mqtt/session/connection.h"
#include "frontends/mqtt/session/connection_test_support.h"

namespace estuary::mqtt {
namespace {

using test_support::Client;
using test_support::ConnectionTest;

// A client id registry that answers when the test says so (or at once, from
// inside the hook, with answer_at_once).
class FakeRegistry {
 public:
  ConnectionSettings Settings() {
    ConnectionSettings settings;
    settings.claim_client_id = [this](const std::string& client_id, bool clean_start,
                                      std::function<void(ClaimOutcome)> done) {
      claims.push_back(client_id);
      clean_starts.push_back(clean_start);
      if (answer_at_once) {
        done(*answer_at_once);
        return;
      }
      pending.push_back(std::move(done));
    };
    settings.release_client_id = [this](const std::string& client_id) {
      released.push_back(client_id);
    };
    return settings;
  }
  void Answer(ClaimOutcome outcome) {
    ASSERT_FALSE(pending.empty());
    auto done = std::move(pending.front());
    pending.pop_front();
    done(outcome);
  }

  std::optional<ClaimOutcome> answer_at_once;
  std::vector<std::string> claims;
  std::deque<std::function<void(ClaimOutcome)>> pending;
  std::vector<std::string> released;
  std::vector<bool> clean_starts;
};

std::string Encoded(const Packet& packet, ProtocolVersion version = ProtocolVersion::kV5) {
  std::string bytes;
  EncodePacket(packet, version, bytes);
  return bytes;
}

ConnectPacket MakeConnect(std::string client_id, ProtocolVersion version = ProtocolVersion::kV5) {
  ConnectPacket connect;
  connect.protocol_name = "MQTT";
  connect.version = version;
  connect.client_id = std::move(client_id);
  connect.clean_start = true;
  return connect;
}

PublishPacket MakePublish(std::string payload, uint8_t qos, uint16_t packet_id) {
  PublishPacket publish;
  publish.topic = "t";
  publish.payload = std::move(payload);
  publish.qos = qos;
  publish.packet_id = packet_id;
  return publish;
}

std::vector<std::string> Payloads(const std::vector<Packet>& packets) {
  std::vector<std::string> payloads;
  for (const auto& packet : packets) {
    if (auto* publish = std::get_if<PublishPacket>(&packet)) payloads.push_back(publish->payload);
  }
  return payloads;
}

class ClaimTest : public ConnectionTest {
 protected:
  std::unique_ptr<Client> Claiming(std::string id, ProtocolVersion version = ProtocolVersion::kV5,
                                   bool clean = true, Properties properties = {},
                                   uint16_t keep_alive = 0) {
    auto client = std::make_unique<Client>(*broker_, version, registry_.Settings());
    client->Connect(std::move(id), clean, std::move(properties), keep_alive);
    return client;
  }
  std::unique_ptr<Client> Granted(std::string id, ProtocolVersion version = ProtocolVersion::kV5,
                                  bool clean = true, Properties properties = {}) {
    auto client = Claiming(std::move(id), version, clean, std::move(properties));
    registry_.Answer(ClaimOutcome::kGranted);
    EXPECT_EQ(client->Expect<ConnackPacket>().reason, ReasonCode::kSuccess);
    return client;
  }
  // A plain (unclaimed) subscriber to "t".
  std::unique_ptr<Client> Watcher() {
    auto watcher = Connected("watcher");
    watcher->Subscribe("t", 1);
    watcher->Received();
    return watcher;
  }

  FakeRegistry registry_;
};

TEST_F(ClaimTest, ConnackAndPipelinedPacketsWaitForTheGrantThenRunInOrder_Issue6) {
  auto watcher = Watcher();
  Client client(*broker_, ProtocolVersion::kV5, registry_.Settings());
  // CONNECT with two PUBLISHes pipelined in the same read (MQTT 5 §3.1.4:
  // a client need not wait for CONNACK).
  client.SendRaw(Encoded(MakeConnect("pub")) + Encoded(MakePublish("1", 1, 1)) +
                 Encoded(MakePublish("2", 0, 0)));
  EXPECT_EQ(registry_.claims, std::vector<std::string>{"pub"});
  EXPECT_EQ(client.connection().state(), MqttConnection::State::kClaiming);
  EXPECT_FALSE(client.stream().reading);
  client.SendRaw(Encoded(MakePublish("3", 1, 3)));  // a read already under way
  Settle();
  EXPECT_TRUE(client.stream().written.empty());
  EXPECT_TRUE(watcher->Received().empty());
  EXPECT_EQ(broker_->FindSession("pub"), nullptr);

  registry_.Answer(ClaimOutcome::kGranted);
  Settle();
  auto packets = client.Received();
  ASSERT_EQ(packets.size(), 3u);
  EXPECT_EQ(std::get<ConnackPacket>(packets[0]).reason, ReasonCode::kSuccess);
  EXPECT_EQ(std::get<AckPacket>(packets[1]).packet_id, 1);
  EXPECT_EQ(std::get<AckPacket>(packets[2]).packet_id, 3);
  EXPECT_EQ(Payloads(watcher->Received()), (std::vector<std::string>{"1", "2", "3"}));
  EXPECT_TRUE(client.stream().reading);
  EXPECT_EQ(metrics_.client_id_claims.load(), 1u);
  EXPECT_EQ(metrics_.client_id_claims_refused.load(), 0u);
}

TEST_F(ClaimTest, ClaimAnsweredFromInsideTheHookKeepsPipelinedOrder) {
  auto watcher = Watcher();
  registry_.answer_at_once = ClaimOutcome::kGranted;
  Client client(*broker_, ProtocolVersion::kV5, registry_.Settings());
  client.SendRaw(Encoded(MakeConnect("pub")) + Encoded(MakePublish("1", 1, 1)) +
                 Encoded(MakePublish("2", 1, 2)));
  EXPECT_EQ(registry_.claims, std::vector<std::string>{"pub"});
  Settle();
  auto packets = client.Received();
  ASSERT_EQ(packets.size(), 3u);
  EXPECT_TRUE(std::holds_alternative<ConnackPacket>(packets[0]));
  EXPECT_EQ(std::get<AckPacket>(packets[2]).packet_id, 2);
  EXPECT_EQ(Payloads(watcher->Received()), (std::vector<std::string>{"1", "2"}));
}

TEST_F(ClaimTest, UnavailableClaimGetsConnack0x88AndClose_Issue6) {
  auto watcher = Watcher();
  Client client(*broker_, ProtocolVersion::kV5, registry_.Settings());
  client.SendRaw(Encoded(MakeConnect("c")) + Encoded(MakePublish("lost", 1, 1)));
  registry_.Answer(ClaimOutcome::kUnavailable);
  Settle();
  auto connack = client.Expect<ConnackPacket>();
  EXPECT_EQ(connack.reason, ReasonCode::kServerUnavailable);
  EXPECT_NE(connack.properties.reason_string.value_or("").find("no quorum"), std::string::npos);
  EXPECT_TRUE(client.closed());
  EXPECT_EQ(broker_->FindSession("c"), nullptr);
  // §3.1.4: data after a rejected CONNECT is not processed.
  EXPECT_TRUE(watcher->Received().empty());
  EXPECT_EQ(metrics_.client_id_claims_refused.load(), 1u);
}

TEST_F(ClaimTest, UnavailableClaimGetsReturnCode3InV311_Issue6) {
  auto client = Claiming("c", ProtocolVersion::kV311);
  registry_.Answer(ClaimOutcome::kUnavailable);
  EXPECT_EQ(client->stream().written, std::string("\x20\x02\x00\x03", 4));
  EXPECT_TRUE(client->closed());
  EXPECT_TRUE(registry_.released.empty());
}

TEST_F(ClaimTest, ConnectionLostDuringTheClaimIgnoresTheLateAnswer) {
  auto client = Claiming("c");
  client->DropNetwork();
  registry_.Answer(ClaimOutcome::kGranted);
  Settle();
  EXPECT_TRUE(client->stream().written.empty());
  EXPECT_EQ(broker_->FindSession("c"), nullptr);
  EXPECT_TRUE(registry_.released.empty());
}

TEST_F(ClaimTest, ConnectionDestroyedDuringTheClaimIgnoresTheLateAnswer) {
  auto granted_late = Claiming("a");
  auto refused_late = Claiming("b");
  granted_late->DropNetwork();
  granted_late->Destroy();
  refused_late->Destroy();  // even without a close first
  registry_.Answer(ClaimOutcome::kGranted);
  registry_.Answer(ClaimOutcome::kUnavailable);
  Settle();
  EXPECT_TRUE(granted_late->stream().written.empty());
  EXPECT_TRUE(refused_late->stream().written.empty());
  EXPECT_EQ(broker_->FindSession("a"), nullptr);
  EXPECT_EQ(metrics_.client_id_claims_refused.load(), 0u);
}

TEST_F(ClaimTest, UnansweredClaimIsRefusedAtTheConnectTimeout) {
  auto client = Claiming("c");
  loop_.AdvanceBy(ConnectionSettings{}.connect_timeout_ms - 1);
  EXPECT_FALSE(client->closed());
  EXPECT_TRUE(client->stream().written.empty());
  loop_.AdvanceBy(1);
  EXPECT_TRUE(client->closed());
  EXPECT_EQ(client->Expect<ConnackPacket>().reason, ReasonCode::kServerUnavailable);
  EXPECT_EQ(metrics_.client_id_claims_refused.load(), 1u);
  registry_.Answer(ClaimOutcome::kGranted);  // too late: nothing happens
  EXPECT_TRUE(client->Received().empty());
  EXPECT_EQ(broker_->FindSession("c"), nullptr);
}

TEST_F(ClaimTest, KeepAliveStartsAtConnackNotAtConnect) {
  auto client = Claiming("c", ProtocolVersion::kV5, true, {}, /*keep_alive=*/1);
  loop_.AdvanceBy(5'000);
  registry_.Answer(ClaimOutcome::kGranted);
  EXPECT_EQ(client->Expect<ConnackPacket>().reason, ReasonCode::kSuccess);
  EXPECT_FALSE(client->closed());
  loop_.AdvanceBy(1'499);
  EXPECT_FALSE(client->closed());
  loop_.AdvanceBy(1);
  EXPECT_EQ(client->Expect<DisconnectPacket>().reason, ReasonCode::kKeepAliveTimeout);
}

TEST_F(ClaimTest, NoClaimForRefusedConnectOrAssignedClientId) {
  Client refused(*broker_, ProtocolVersion::kV5, registry_.Settings());
  Will will;
  will.topic = "bad/+";
  refused.Connect("c", true, {}, 0, will);
  EXPECT_EQ(refused.Expect<ConnackPacket>().reason, ReasonCode::kTopicNameInvalid);
  Client assigned(*broker_, ProtocolVersion::kV5, registry_.Settings());
  assigned.Connect("");
  EXPECT_EQ(assigned.Expect<ConnackPacket>().reason, ReasonCode::kSuccess);
  assigned.Send(DisconnectPacket{});
  auto named = Claiming("named");
  EXPECT_EQ(registry_.claims, std::vector<std::string>{"named"});
  EXPECT_TRUE(registry_.released.empty());
}

TEST_F(ClaimTest, IdIsReleasedWhenTheSessionEndsWithTheConnection_Issue6) {
  auto v5 = Granted("v5");
  v5->Send(DisconnectPacket{});
  auto v311 = Granted("v311", ProtocolVersion::kV311);
  v311->DropNetwork();  // clean session: the session ends all the same
  Properties keep;
  keep.session_expiry_interval = 600;
  auto shortened = Granted("shortened", ProtocolVersion::kV5, false, keep);
  DisconnectPacket expire_now;
  expire_now.properties.session_expiry_interval = 0;
  shortened->Send(expire_now);
  shortened->DropNetwork();  // a second close changes nothing
  EXPECT_EQ(registry_.released, (std::vector<std::string>{"v5", "v311", "shortened"}));
}

TEST_F(ClaimTest, IdIsKeptWhileThePersistentSessionLives_Issue6) {
  auto v311 = Granted("v311", ProtocolVersion::kV311, /*clean=*/false);
  v311->Send(DisconnectPacket{});
  Properties keep;
  keep.session_expiry_interval = 600;
  auto v5 = Granted("v5", ProtocolVersion::kV5, false, keep);
  v5->DropNetwork();
  EXPECT_TRUE(registry_.released.empty());
  EXPECT_NE(broker_->FindSession("v5"), nullptr);
  // The hook learns each CONNECT's clean start (a session kept elsewhere is
  // brought here only without it).
  auto clean = Granted("clean", ProtocolVersion::kV5, /*clean=*/true);
  EXPECT_EQ(registry_.clean_starts, (std::vector<bool>{false, false, true}));
}

TEST_F(ClaimTest, IdIsNotReleasedByATakenOverConnection_Issue6) {
  auto first = Granted("same");
  auto second = Granted("same");  // takeover on this node
  EXPECT_EQ(first->Expect<DisconnectPacket>().reason, ReasonCode::kSessionTakenOver);
  EXPECT_TRUE(first->closed());
  broker_->TakenOverElsewhere("same");  // and by a connection on another node
  EXPECT_EQ(second->Expect<DisconnectPacket>().reason, ReasonCode::kSessionTakenOver);
  EXPECT_TRUE(second->closed());
  EXPECT_TRUE(registry_.released.empty());
}

}  // namespace
}  // namespace estuary::mqtt
