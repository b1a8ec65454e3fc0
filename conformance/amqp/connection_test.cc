// AMQP 1.0 connection level: open/close, idle-timeout, SASL, connection
// errors and shutdown, against a real estuaryd.
#include <proton/connection_options.hpp>
#include <proton/io/connection_driver.hpp>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>

#include "conformance/amqp/amqp_fixture.h"
#include "conformance/support/raw_client.h"

namespace estuary::conformance {
namespace {

using Kind = AmqpEvent::Kind;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

class AmqpConnectionTest : public AmqpFixture {};

// Reads from `fd` until EOF or `timeout`; returns what arrived and whether it closed.
std::pair<std::string, bool> ReadUntilClosed(int fd, milliseconds timeout) {
  std::string received;
  const auto deadline = steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now()).count();
    if (left <= 0) return {received, false};
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) return {received, true};
    received.append(buffer, static_cast<size_t>(n));
  }
}

// A client that opens and then never sends another byte: a Proton driver
// used only to produce the header and open frame, and to read the
// server's open.
struct FrozenClient : proton::messaging_handler {
  void on_connection_open(proton::connection& connection) override {
    opened = true;
    idle_timeout_ms = connection.idle_timeout();
    max_frame_size = connection.max_frame_size();
    container_id = connection.container_id();
  }
  void on_error(const proton::error_condition&) override {}
  bool opened = false;
  int64_t idle_timeout_ms = -1;
  uint32_t max_frame_size = 0;
  std::string container_id;
};

// §2.4.1 open, §2.7.1 container-id, §2.4.3 close: a client opens, sees the
// server's container-id, closes, and the server answers the close.
TEST_F(AmqpConnectionTest, OpenAndCloseHandshake) {
  auto client = Connect({.container_id = Unique("open-close")});
  EXPECT_EQ(client->remote_container_id(), "estuary-node-1");
  // Counted like MQTT connections in the shard metrics.
  EXPECT_EQ(MetricSum("estuary_connections"), 1u);
  EXPECT_EQ(MetricSum("estuary_connections_accepted_total"), 1u);
  client->Close();
  auto closed = client->Wait(Kind::kConnectionClose);
  ASSERT_TRUE(closed.has_value()) << "the server did not answer the close";
  EXPECT_EQ(closed->condition, "");
}

// §2.4.5 idle time-out, §2.7.1 open fields: the server advertises its
// idle-timeout and max-frame-size, and closes a peer that falls silent for
// longer than the idle-timeout.
TEST_F(AmqpConnectionTest, DeadPeerIsClosedAfterTheIdleTimeout) {
  RestartBroker({"--amqp-idle-timeout", "1000", "--amqp-max-frame-size", "16384"});
  const int fd = testing::ConnectTcp(broker().host(), amqp_port());
  ASSERT_GE(fd, 0);
  FrozenClient handler;
  proton::io::connection_driver driver("frozen");
  driver.connect(proton::connection_options(handler).sasl_enabled(false).container_id(Unique("frozen")));
  auto flush = [&] {
    for (auto out = driver.write_buffer(); out.size > 0; out = driver.write_buffer()) {
      const ssize_t n = ::write(fd, out.data, out.size);
      ASSERT_GT(n, 0);
      driver.write_done(static_cast<size_t>(n));
    }
  };
  flush();
  const auto deadline = steady_clock::now() + std::chrono::seconds(5);
  while (!handler.opened && steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    auto in = driver.read_buffer();
    const ssize_t n = ::read(fd, in.data, in.size);
    ASSERT_GT(n, 0) << "the server closed before its open";
    driver.read_done(static_cast<size_t>(n));
    while (driver.has_events()) driver.dispatch();
    flush();
  }
  ASSERT_TRUE(handler.opened);
  // Proton announces half its idle-timeout, so that the peer's heartbeats
  // arrive in time (§2.4.5 recommends it).
  EXPECT_GT(handler.idle_timeout_ms, 0);
  EXPECT_LE(handler.idle_timeout_ms, 1000);
  EXPECT_EQ(handler.max_frame_size, 16384u);
  EXPECT_EQ(handler.container_id, "estuary-node-1");
  // Now silent: no frames, no heartbeats.
  const auto silent_since = steady_clock::now();
  auto [received, closed] = ReadUntilClosed(fd, std::chrono::seconds(6));
  const auto waited = std::chrono::duration_cast<milliseconds>(steady_clock::now() - silent_since);
  EXPECT_TRUE(closed) << "a silent peer was not disconnected";
  EXPECT_GE(waited.count(), 900) << "closed before the idle-timeout";
  ::close(fd);
}

// §2.4.5: the server sends empty frames often enough for a client that
// advertised a short idle-timeout, so that client keeps its connection.
TEST_F(AmqpConnectionTest, HeartbeatsKeepAClientWithAShortIdleTimeoutOpen) {
  auto client = Connect({.container_id = Unique("heartbeat"), .idle_timeout = milliseconds(400)});
  // Proton fails the transport if nothing arrives within 400 ms.
  auto error = client->Wait(Kind::kTransportError, "", milliseconds(2000));
  EXPECT_FALSE(error.has_value()) << "connection lost: " << error->condition << " " << error->description;
  // And it still works.
  const std::string topic = Unique("hb/");
  Receive(*client, "r", topic);
  client->OpenSender("s", topic);
  client->Send("s", "", "alive");
  auto message = client->Wait(Kind::kMessage, "r");
  ASSERT_TRUE(message.has_value());
  EXPECT_EQ(Body(*message), "alive");
}

class AmqpSaslTest : public AmqpFixture {
 protected:
  std::vector<std::string> SuiteFlags() const override {
    // One file for the test process, removed when it exits.
    struct PasswordFile {
      std::string path = ::testing::TempDir() + "estuary-amqp-passwords-" + std::to_string(::getpid());
      // alice / wonderland, as mosquitto_passwd 2.0.11 wrote it.
      PasswordFile() {
        std::ofstream(path) << "# users\nalice:$7$101$3UQ6SBHegEFqvQdG$N1FHwVTB5u0lrS3H33Nh22+1dWMq8QonPUi83nc0Sqv"
                               "DEvbU78TLwf3JBRZorhoJv1EaGktrL8/R9P7kl6t6sQ==\n";
      }
      ~PasswordFile() { std::remove(path.c_str()); }
    };
    static const PasswordFile file;
    return {"--password-file", file.path};
  }
};

// §5.3.3.1 sasl-mechanisms, §5.3.3.6 sasl-outcome: PLAIN with the right
// password opens the connection.
TEST_F(AmqpSaslTest, PlainWithGoodCredentialsIsAccepted) {
  auto client = Connect({.container_id = Unique("plain-ok"), .user = "alice", .password = "wonderland",
                         .mechanisms = "PLAIN"});
  const std::string topic = Unique("sasl/");
  Receive(*client, "r", topic);
}

// §5.3.3.6: a wrong password gets sasl-outcome auth (code 1) and no open.
TEST_F(AmqpSaslTest, PlainWithBadPasswordIsRefused) {
  AmqpClient client(broker().host(), amqp_port(),
                    {.container_id = Unique("plain-bad"), .user = "alice", .password = "queen",
                     .mechanisms = "PLAIN"});
  std::string error;
  EXPECT_FALSE(client.WaitOpen(&error));
  EXPECT_NE(error.find("amqp:unauthorized-access"), std::string::npos) << error;
}

// §5.3.3.6: ANONYMOUS is refused when the node requires a user.
TEST_F(AmqpSaslTest, AnonymousIsRefusedWhenUsersAreRequired) {
  AmqpClient client(broker().host(), amqp_port(), {.container_id = Unique("anon"), .mechanisms = "ANONYMOUS"});
  std::string error;
  EXPECT_FALSE(client.WaitOpen(&error));
  EXPECT_NE(error.find("amqp:unauthorized-access"), std::string::npos) << error;
}

// §2.8.15 amqp:unauthorized-access: a client without a SASL layer is an
// anonymous client; the node requiring users opens and closes with it.
TEST_F(AmqpSaslTest, NoSaslLayerIsClosedWithUnauthorizedAccess) {
  AmqpClient client(broker().host(), amqp_port(), {.container_id = Unique("nosasl"), .sasl = false});
  auto closed = client.Wait(Kind::kConnectionClose);
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->condition, "amqp:unauthorized-access");
}

// §5.3.3.1: with no users configured, ANONYMOUS is accepted.
TEST_F(AmqpConnectionTest, AnonymousIsAcceptedByDefault) {
  auto client = Connect({.container_id = Unique("anon-ok"), .mechanisms = "ANONYMOUS"});
  Receive(*client, "r", Unique("anon/"));
}

// §2.2 protocol header: bytes that are not an AMQP header get the server's
// header back and the socket closed.
TEST_F(AmqpConnectionTest, GarbageGetsTheProtocolHeaderAndAClose) {
  const int fd = testing::ConnectTcp(broker().host(), amqp_port());
  ASSERT_GE(fd, 0);
  const std::string garbage = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::write(fd, garbage.data(), garbage.size()), static_cast<ssize_t>(garbage.size()));
  auto [received, closed] = ReadUntilClosed(fd, std::chrono::seconds(5));
  EXPECT_TRUE(closed);
  EXPECT_EQ(received.substr(0, 4), "AMQP");
  ::close(fd);
  // Other clients are unaffected.
  auto client = Connect({.container_id = Unique("after-garbage")});
  Receive(*client, "r", Unique("g/"));
}

// §2.8.15 amqp:resource-limit-exceeded: over the node's connection limit
// the open is answered with a close carrying the condition.
TEST_F(AmqpConnectionTest, ConnectionsOverTheLimitAreClosedWithResourceLimitExceeded) {
  RestartBroker({"--max-connections", "1"});
  auto first = Connect({.container_id = Unique("limit-1")});
  AmqpClient second(broker().host(), amqp_port(), {.container_id = Unique("limit-2")});
  auto closed = second.Wait(Kind::kConnectionClose);
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->condition, "amqp:resource-limit-exceeded");
}

// §3.4.3 rejected, §2.8.15 amqp:decode-error: a transfer whose payload is
// not a valid message encoding (a truncated amqp-value) is rejected with
// decode-error; the connection goes on.
TEST_F(AmqpConnectionTest, UndecodableMessageIsRejectedWithDecodeError) {
  auto client = Connect({.container_id = Unique("bad-encoding")});
  const std::string topic = Unique("raw/");
  Sender(*client, "s", topic);
  client->SendRawTransfer("s", std::string("\x00\x53\x77\xa1\x10" "abc", 8));
  auto rejected = client->Wait(Kind::kRejected, "s");
  ASSERT_TRUE(rejected.has_value()) << "no rejection";
  EXPECT_EQ(rejected->condition, "amqp:decode-error") << rejected->description;
  Receive(*client, "r", topic);  // the connection still works
}

// §2.8.16 amqp:connection:forced: SIGTERM closes AMQP connections with it,
// and the node exits cleanly (checked by the fixture on restart).
TEST_F(AmqpConnectionTest, ShutdownClosesConnectionsWithConnectionForced) {
  auto client = Connect({.container_id = Unique("forced")});
  RestartBroker({});
  auto closed = client->Wait(Kind::kConnectionClose);
  ASSERT_TRUE(closed.has_value()) << "no close frame at shutdown";
  EXPECT_EQ(closed->condition, "amqp:connection:forced");
}

}  // namespace
}  // namespace estuary::conformance
