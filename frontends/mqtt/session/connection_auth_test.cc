// MQTT 5 enhanced authentication (section 4.12) and re-authentication
// (4.12.1) in the session, with a two-step toy mechanism standing in for
// SCRAM (security/scram_test.cc tests SCRAM itself; the process test
// conformance/security/scram_process.py runs both together).
#include <gtest/gtest.h>

#include "frontends/mqtt/session/connection_test_support.h"

namespace estuary::mqtt {
namespace {

using test_support::Client;
using test_support::ConnectionTest;

// "TOY": the client sends "hello", the server challenges "challenge", the
// client answers "answer" (or "answer:USER"), the server ends with "final".
class ToyExchange final : public core::AuthExchange {
 public:
  core::AuthStep Respond(std::string_view data) override {
    core::AuthStep step;
    if (step_++ == 0) {
      if (data != "hello") return Fail();
      step.kind = core::AuthStep::Kind::kContinue;
      step.data = "challenge";
      return step;
    }
    if (data.substr(0, 6) != "answer") return Fail();
    step.kind = core::AuthStep::Kind::kSucceeded;
    step.data = "final";
    step.user = data.size() > 7 ? std::string(data.substr(7)) : "toy-user";
    return step;
  }

 private:
  static core::AuthStep Fail() {
    core::AuthStep step;
    step.data = "e=invalid-proof";
    step.why = "toy says no";
    return step;
  }
  int step_ = 0;
};

class ToyAuthenticator final : public core::Authenticator {
 public:
  core::AuthDecision Authenticate(const core::Credentials&) override { return core::AuthDecision::kBadCredentials; }
  std::unique_ptr<core::AuthExchange> StartExchange(std::string_view mechanism, const std::string&) override {
    ++started;
    if (mechanism != "TOY") return nullptr;
    return std::make_unique<ToyExchange>();
  }
  int started = 0;
};

Properties Auth(std::string method, std::optional<std::string> data) {
  Properties properties;
  properties.authentication_method = std::move(method);
  properties.authentication_data = std::move(data);
  return properties;
}

class ConnectionAuthTest : public ConnectionTest {
 protected:
  std::unique_ptr<Client> NewClient(ProtocolVersion version = ProtocolVersion::kV5) {
    ConnectionSettings settings;
    settings.authenticator = &toy_;
    return std::make_unique<Client>(*broker_, version, settings);
  }
  void SendAuth(Client& client, ReasonCode reason, std::string method, std::optional<std::string> data) {
    AuthPacket auth;
    auth.reason = reason;
    auth.properties = Auth(std::move(method), std::move(data));
    client.Send(auth);
  }
  // CONNECT, the challenge, the answer: a connected client.
  std::unique_ptr<Client> Authenticated(std::string id) {
    auto client = NewClient();
    client->Connect(std::move(id), true, Auth("TOY", "hello"));
    auto challenge = client->Expect<AuthPacket>();
    EXPECT_EQ(challenge.reason, ReasonCode::kContinueAuthentication);
    EXPECT_EQ(challenge.properties.authentication_method, "TOY");
    EXPECT_EQ(challenge.properties.authentication_data, "challenge");
    EXPECT_EQ(client->connection().state(), MqttConnection::State::kAuthenticating);
    SendAuth(*client, ReasonCode::kContinueAuthentication, "TOY", "answer");
    auto connack = client->Expect<ConnackPacket>();
    EXPECT_EQ(connack.reason, ReasonCode::kSuccess);
    EXPECT_EQ(connack.properties.authentication_method, "TOY");
    EXPECT_EQ(connack.properties.authentication_data, "final");
    return client;
  }
  ToyAuthenticator toy_;
};

TEST_F(ConnectionAuthTest, ExchangeEndsInConnackCarryingTheFinalMessage) {
  auto client = Authenticated("c1");
  EXPECT_EQ(client->connection().state(), MqttConnection::State::kConnected);
  client->Subscribe("a/b", 0);
  EXPECT_TRUE(std::holds_alternative<SubackPacket>(client->Received().at(0)));
}

TEST_F(ConnectionAuthTest, NoInitialDataGetsAnEmptyChallenge) {
  auto client = NewClient();
  client->Connect("c1", true, Auth("TOY", std::nullopt));
  auto prompt = client->Expect<AuthPacket>();
  EXPECT_EQ(prompt.reason, ReasonCode::kContinueAuthentication);
  EXPECT_FALSE(prompt.properties.authentication_data.has_value());
  SendAuth(*client, ReasonCode::kContinueAuthentication, "TOY", "hello");
  EXPECT_EQ(client->Expect<AuthPacket>().properties.authentication_data, "challenge");
}

TEST_F(ConnectionAuthTest, WrongAnswerIsNotAuthorizedAndCloses) {
  auto client = NewClient();
  client->Connect("c1", true, Auth("TOY", "hello"));
  client->Expect<AuthPacket>();
  SendAuth(*client, ReasonCode::kContinueAuthentication, "TOY", "wrong");
  EXPECT_EQ(client->Expect<ConnackPacket>().reason, ReasonCode::kNotAuthorized);
  EXPECT_TRUE(client->closed());
}

TEST_F(ConnectionAuthTest, UnknownMethodIsBadAuthenticationMethod) {
  auto client = NewClient();
  client->Connect("c1", true, Auth("SCRAM-SHA-1", "n,,n=u,r=a"));
  EXPECT_EQ(client->Expect<ConnackPacket>().reason, ReasonCode::kBadAuthenticationMethod);
  EXPECT_TRUE(client->closed());
}

TEST_F(ConnectionAuthTest, NoAuthenticatorMeansNoMethod) {
  Client client(*broker_, ProtocolVersion::kV5);
  client.Connect("c1", true, Auth("TOY", "hello"));
  EXPECT_EQ(client.Expect<ConnackPacket>().reason, ReasonCode::kBadAuthenticationMethod);
}

TEST_F(ConnectionAuthTest, OnlyAuthOrDisconnectBeforeConnack) {
  auto client = NewClient();
  client->Connect("c1", true, Auth("TOY", "hello"));
  client->Expect<AuthPacket>();
  client->Publish("a/b", "early");
  EXPECT_EQ(client->Expect<ConnackPacket>().reason, ReasonCode::kProtocolError);
  EXPECT_TRUE(client->closed());

  auto other = NewClient();
  other->Connect("c2", true, Auth("TOY", "hello"));
  other->Expect<AuthPacket>();
  SendAuth(*other, ReasonCode::kContinueAuthentication, "OTHER", "answer");
  EXPECT_EQ(other->Expect<ConnackPacket>().reason, ReasonCode::kProtocolError);
}

TEST_F(ConnectionAuthTest, AuthWithoutAMethodInConnectIsAProtocolError) {
  auto client = NewClient();
  client->Connect("c1");  // no method: password authentication, which the toy refuses
  EXPECT_EQ(client->Expect<ConnackPacket>().reason, ReasonCode::kBadUserNameOrPassword);

  Client plain(*broker_, ProtocolVersion::kV5);
  plain.Connect("c3");
  plain.Expect<ConnackPacket>();
  SendAuth(plain, ReasonCode::kContinueAuthentication, "TOY", "hello");
  EXPECT_EQ(plain.Expect<DisconnectPacket>().reason, ReasonCode::kProtocolError);
  EXPECT_TRUE(plain.closed());
}

TEST_F(ConnectionAuthTest, AuthInMqtt311IsMalformed) {
  Client client(*broker_, ProtocolVersion::kV311);
  client.Connect("c1");
  client.Expect<ConnackPacket>();
  client.SendRaw(std::string("\xF0\x00", 2));
  EXPECT_TRUE(client.closed());
}

TEST_F(ConnectionAuthTest, ExchangeCountsTowardTheConnectTimeout) {
  auto client = NewClient();
  client->Connect("c1", true, Auth("TOY", "hello"));
  client->Expect<AuthPacket>();
  loop_.AdvanceBy(ConnectionSettings{}.connect_timeout_ms);
  EXPECT_EQ(client->Expect<ConnackPacket>().reason, ReasonCode::kNotAuthorized);
  EXPECT_TRUE(client->closed());
}

TEST_F(ConnectionAuthTest, ReauthenticationSucceedsForTheSameUser) {
  auto client = Authenticated("c1");
  SendAuth(*client, ReasonCode::kReAuthenticate, "TOY", "hello");
  auto challenge = client->Expect<AuthPacket>();
  EXPECT_EQ(challenge.reason, ReasonCode::kContinueAuthentication);
  client->Publish("a/b", "during");  // other packets may flow meanwhile
  SendAuth(*client, ReasonCode::kContinueAuthentication, "TOY", "answer");
  auto done = client->Expect<AuthPacket>();
  EXPECT_EQ(done.reason, ReasonCode::kSuccess);
  EXPECT_EQ(done.properties.authentication_data, "final");
  EXPECT_FALSE(client->closed());
}

TEST_F(ConnectionAuthTest, FailedOrOtherUserReauthenticationDisconnects) {
  auto wrong = Authenticated("c1");
  SendAuth(*wrong, ReasonCode::kReAuthenticate, "TOY", "hello");
  wrong->Expect<AuthPacket>();
  SendAuth(*wrong, ReasonCode::kContinueAuthentication, "TOY", "nope");
  EXPECT_EQ(wrong->Expect<DisconnectPacket>().reason, ReasonCode::kNotAuthorized);
  EXPECT_TRUE(wrong->closed());

  auto other = Authenticated("c2");
  SendAuth(*other, ReasonCode::kReAuthenticate, "TOY", "hello");
  other->Expect<AuthPacket>();
  SendAuth(*other, ReasonCode::kContinueAuthentication, "TOY", "answer:mallory");
  EXPECT_EQ(other->Expect<DisconnectPacket>().reason, ReasonCode::kNotAuthorized);
}

TEST_F(ConnectionAuthTest, ContinueWithoutAnExchangeIsAProtocolError) {
  auto client = Authenticated("c1");
  SendAuth(*client, ReasonCode::kContinueAuthentication, "TOY", "answer");
  EXPECT_EQ(client->Expect<DisconnectPacket>().reason, ReasonCode::kProtocolError);
}

}  // namespace
}  // namespace estuary::mqtt
