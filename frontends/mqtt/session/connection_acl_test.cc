// MqttConnection with an Authorizer (--acl-file): SUBSCRIBE, PUBLISH, the
// will and deliveries, through in-memory streams. The authorizer here is a
// stand-in with fixed rules (the file format is security/'s, tested there):
// a client may publish and receive topics under "open/" and under its own
// "<client id>/", and subscribe where it could receive something.
#include <gtest/gtest.h>

#include <set>

#include "frontends/mqtt/session/connection_test_support.h"
#include "model/topic.h"

namespace estuary::mqtt {
namespace {

using test_support::Client;
using test_support::ConnectionTest;

// Topics taken away after CONNECT (as a SIGHUP reload would).
using Revoked = std::set<std::string, std::less<>>;

class PrefixAccess final : public core::ClientAccess {
 public:
  PrefixAccess(std::string client_id, const Revoked& revoked)
      : own_(std::move(client_id) + "/"), revoked_(revoked) {}
  bool MayPublish(std::string_view topic) override { return Allowed(topic); }
  bool MayReceive(std::string_view topic) override { return Allowed(topic); }
  bool MaySubscribe(std::string_view filter) override {
    return filter == "#" || filter.starts_with("open/") || filter.starts_with(own_);
  }

 private:
  bool Allowed(std::string_view topic) const {
    return (topic.starts_with("open/") || topic.starts_with(own_)) && revoked_.find(topic) == revoked_.end();
  }
  std::string own_;
  const Revoked& revoked_;
};

class PrefixAuthorizer final : public core::Authorizer {
 public:
  std::shared_ptr<core::ClientAccess> ForClient(const core::ClientIdentity& identity) override {
    return std::make_shared<PrefixAccess>(identity.client_id, revoked);
  }
  Revoked revoked;
};

class ConnectionAclTest : public ConnectionTest {
 protected:
  std::unique_ptr<Client> Connected(std::string id, ProtocolVersion version = ProtocolVersion::kV5) {
    auto client = std::make_unique<Client>(*broker_, version, Settings());
    client->Connect(std::move(id));
    EXPECT_EQ(client->Expect<ConnackPacket>().reason, ReasonCode::kSuccess);
    return client;
  }
  ConnectionSettings Settings() {
    ConnectionSettings settings;
    settings.authorizer = &authorizer_;
    return settings;
  }
  PrefixAuthorizer authorizer_;
};

TEST_F(ConnectionAclTest, DeniedSubscribeGets0x87In5And0x80In311) {
  auto v5 = Connected("c5");
  v5->Subscribe("secret/#", 1);
  EXPECT_EQ(v5->Expect<SubackPacket>().reasons, std::vector<ReasonCode>{ReasonCode::kNotAuthorized});
  auto v3 = Connected("c3", ProtocolVersion::kV311);
  v3->Subscribe("secret/#", 1);
  auto suback = v3->Expect<SubackPacket>();
  ASSERT_EQ(suback.reasons.size(), 1u);
  EXPECT_TRUE(IsError(suback.reasons[0]));  // encoded as 0x80 in 3.1.1
  v3->Subscribe("open/#", 1, 2);
  EXPECT_EQ(v3->Expect<SubackPacket>().reasons, std::vector<ReasonCode>{ReasonCode::kGrantedQos1});
}

TEST_F(ConnectionAclTest, DeniedPublishGets0x87In5AndIsDroppedIn311) {
  auto watcher = Connected("watcher");
  watcher->Subscribe("#", 1);
  watcher->Expect<SubackPacket>();
  auto v5 = Connected("p5");
  v5->Publish("secret/x", "no", 1, 1);
  auto puback = v5->Expect<AckPacket>();
  EXPECT_EQ(puback.type, PacketType::kPuback);
  EXPECT_EQ(puback.reason, ReasonCode::kNotAuthorized);
  v5->Publish("secret/x", "no", 2, 2);
  auto pubrec = v5->Expect<AckPacket>();
  EXPECT_EQ(pubrec.type, PacketType::kPubrec);
  EXPECT_EQ(pubrec.reason, ReasonCode::kNotAuthorized);
  auto v3 = Connected("p3", ProtocolVersion::kV311);
  v3->Publish("secret/x", "no", 1, 3);
  EXPECT_EQ(v3->Expect<AckPacket>().reason, ReasonCode::kSuccess);  // 3.1.1: acknowledged, dropped
  v3->Publish("open/marker", "yes", 1, 4);
  v3->Expect<AckPacket>();
  Settle();
  auto delivered = watcher->Expect<PublishPacket>();
  EXPECT_EQ(delivered.topic, "open/marker");  // nothing denied came before it
}

TEST_F(ConnectionAclTest, AWildcardSubscriberGetsOnlyWhatItMayRead) {
  auto publisher = Connected("pub");
  publisher->Publish("pub/retained", "pub's", 1, 1, /*retain=*/true);
  publisher->Expect<AckPacket>();
  publisher->Publish("open/retained", "everyone's", 1, 2, /*retain=*/true);
  publisher->Expect<AckPacket>();
  auto alice = Connected("alice");
  alice->Subscribe("#", 1);
  Settle();
  auto packets = alice->Received();
  ASSERT_EQ(packets.size(), 2u);
  EXPECT_TRUE(std::holds_alternative<SubackPacket>(packets[0]));
  EXPECT_EQ(std::get<PublishPacket>(packets[1]).topic, "open/retained");  // not pub/retained
  auto other = Connected("other");
  other->Publish("other/x", "theirs", 1, 1);
  other->Publish("open/x", "everyone's", 1, 2);
  Settle();
  packets = alice->Received();
  ASSERT_EQ(packets.size(), 1u);
  EXPECT_EQ(std::get<PublishPacket>(packets[0]).topic, "open/x");
}

TEST_F(ConnectionAclTest, AWillOnAnUnwritableTopicRefusesTheConnect) {
  auto client = std::make_unique<Client>(*broker_, ProtocolVersion::kV5, Settings());
  Will will;
  will.topic = "secret/will";
  will.payload = "bye";
  client->Connect("w", true, {}, 0, will);
  EXPECT_EQ(client->Expect<ConnackPacket>().reason, ReasonCode::kNotAuthorized);
  EXPECT_TRUE(client->closed());
  auto ok = std::make_unique<Client>(*broker_, ProtocolVersion::kV311, Settings());
  will.topic = "w2/will";
  ok->Connect("w2", true, {}, 0, will);
  EXPECT_EQ(ok->Expect<ConnackPacket>().reason, ReasonCode::kSuccess);
}

TEST_F(ConnectionAclTest, AWillIsCheckedAgainWhenPublished) {
  // The watcher has no rights object (no authorizer), so only the will's
  // own check can stop the message.
  auto watcher = std::make_unique<Client>(*broker_, ProtocolVersion::kV5);
  watcher->Connect("watcher");
  watcher->Expect<ConnackPacket>();
  watcher->Subscribe("open/#", 1);
  watcher->Expect<SubackPacket>();
  Will will;
  will.topic = "open/will";
  will.payload = "gone";
  for (const bool revoke : {false, true}) {
    auto client = std::make_unique<Client>(*broker_, ProtocolVersion::kV5, Settings());
    client->Connect("w", true, {}, 0, will);
    EXPECT_EQ(client->Expect<ConnackPacket>().reason, ReasonCode::kSuccess);
    if (revoke) authorizer_.revoked.insert("open/will");
    client->DropNetwork();
    Settle();
    EXPECT_EQ(watcher->Received().size(), revoke ? 0u : 1u) << "revoked: " << revoke;
  }
}

// A session whose deliveries were queued while no identity was known (here:
// its last connection had no authorizer; in production, a session recovered
// from --data-dir) gets them checked before they are sent.
TEST_F(ConnectionAclTest, DeliveriesQueuedUncheckedAreCheckedBeforeSending) {
  Properties session;
  session.session_expiry_interval = 600;
  auto before = std::make_unique<Client>(*broker_, ProtocolVersion::kV5);  // no authorizer
  before->Connect("alice", false, session);
  before->Expect<ConnackPacket>();
  before->Subscribe("#", 1);
  before->Expect<SubackPacket>();
  before->DropNetwork();
  auto publisher = Connected("pub");
  publisher->Publish("pub/private", "not alice's", 1, 1);
  publisher->Publish("open/news", "everyone's", 1, 2);
  Settle();
  auto resumed = std::make_unique<Client>(*broker_, ProtocolVersion::kV5, Settings());
  resumed->Connect("alice", false, session);
  Settle();
  auto packets = resumed->Received();
  ASSERT_EQ(packets.size(), 2u);
  EXPECT_TRUE(std::holds_alternative<ConnackPacket>(packets[0]));
  EXPECT_EQ(std::get<PublishPacket>(packets[1]).topic, "open/news");
}

// --tls-identity-as-username: the certificate's CN replaces the CONNECT's
// user name, the password is not asked for, and the ACL sees the CN.
class RefuseAll final : public core::Authenticator {
 public:
  core::AuthDecision Authenticate(const core::Credentials&) override { return core::AuthDecision::kBadCredentials; }
};

class NamesSeen final : public core::Authorizer {
 public:
  std::shared_ptr<core::ClientAccess> ForClient(const core::ClientIdentity& identity) override {
    usernames.push_back(identity.username.value_or("(anonymous)"));
    return nullptr;
  }
  std::vector<std::string> usernames;
};

TEST_F(ConnectionAclTest, CertificateNameIsTheUserNameAndNeedsNoPassword) {
  RefuseAll passwords;
  NamesSeen names;
  ConnectionSettings settings;
  settings.authenticator = &passwords;
  settings.authorizer = &names;
  settings.certificate_username = "device-7";
  Client client(*broker_, ProtocolVersion::kV311, settings);
  ConnectPacket connect;
  connect.protocol_name = "MQTT";
  connect.version = ProtocolVersion::kV311;
  connect.client_id = "c1";
  connect.username = "someone-else";
  connect.password = "wrong";
  client.Send(connect);
  EXPECT_EQ(client.Expect<ConnackPacket>().reason, ReasonCode::kSuccess);
  EXPECT_EQ(names.usernames, std::vector<std::string>{"device-7"});
}

TEST_F(ConnectionAclTest, CertificateWithoutCommonNameIsRefused) {
  ConnectionSettings settings;
  settings.certificate_username = "";
  Client client(*broker_, ProtocolVersion::kV5, settings);
  client.Connect("c2");
  EXPECT_EQ(client.Expect<ConnackPacket>().reason, ReasonCode::kNotAuthorized);
}

}  // namespace
}  // namespace estuary::mqtt
