#pragma once
// BrokerFixture: every conformance test gets its own estuaryd, started as a
// child process on free loopback ports and stopped with SIGTERM at the end,
// where a clean exit (status 0) is part of the test. Helpers give raw-socket
// clients (conformance/support/raw_client.h) and wire-level checks that the
// broker still serves other clients after one misbehaved.
//
// Nothing here sleeps: waits are on packets with deadlines. Where a test
// must let broker time pass (expiry, will delay), WaitBrokerSeconds waits
// for a will published by the broker's own timer.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "conformance/support/broker_process.h"
#include "conformance/support/raw_client.h"

namespace estuary::conformance {

using testing::BrokerProcess;
using testing::RawClient;
using std::chrono::milliseconds;
using std::chrono::seconds;

class BrokerFixture : public ::testing::Test {
 public:
  // A name unique within the test binary, for client ids and topics.
  static std::string Unique(const std::string& prefix);

  // Publishes from one raw 5.0 client of the test (connected on first use)
  // and completes the QoS exchange; ADD_FAILURE if that fails. One client,
  // so its messages reach every subscriber in the order published.
  void RawPublish(const std::string& topic, const std::string& payload, uint8_t qos = 1,
                  bool retain = false, mqtt::Properties properties = {});

 protected:
  void SetUp() override;
  void TearDown() override;

  // Flags added to the defaults (two shards, quiet logs) for every test of
  // the suite; RestartBroker adds per-test ones.
  virtual std::vector<std::string> SuiteFlags() const { return {}; }
  // Stops the current broker (asserting a clean exit) and starts one with
  // SuiteFlags() + `flags`.
  void RestartBroker(const std::vector<std::string>& flags);

  BrokerProcess& broker() { return *broker_; }
  std::string uri() const { return broker_->mqtt_uri(); }
  uint16_t port() const { return broker_->mqtt_port(); }

  // A socket to the broker, no MQTT yet.
  std::unique_ptr<RawClient> OpenRaw(mqtt::ProtocolVersion version = mqtt::ProtocolVersion::kV5);
  // A connected client (CONNACK success asserted with ADD_FAILURE if not).
  std::unique_ptr<RawClient> ConnectRaw(const std::string& client_id,
                                        mqtt::ProtocolVersion version = mqtt::ProtocolVersion::kV5,
                                        bool clean_start = true, mqtt::Properties properties = {},
                                        uint16_t keep_alive = 60);
  // A connected client that subscribed to `filter` (SUBACK checked).
  std::unique_ptr<RawClient> SubscribeRaw(const std::string& client_id, const std::string& filter,
                                          uint8_t qos = 1,
                                          mqtt::ProtocolVersion version = mqtt::ProtocolVersion::kV5);

  // Leaves the session of `client_id` offline for certain: a raw client
  // resumes it (clean start 0, with `session_expiry` in 5.0), sends
  // DISCONNECT and waits until the server closed the connection. Whatever
  // connection held the session before is gone by then, so messages
  // published next are queued for the offline session. (A library's
  // disconnect returns before the server has acted on it.)
  void TakeOffline(const std::string& client_id, mqtt::ProtocolVersion version, uint32_t session_expiry = 300);

  // A fresh client can connect, subscribe and get its own message:
  // whatever happened before did not hurt other clients.
  void ExpectBrokerServes();
  // Returns once `seconds` have passed on the broker's clock: a will with
  // that delay, from a client dropped now, has arrived.
  void WaitBrokerSeconds(uint32_t seconds);


 private:
  std::unique_ptr<BrokerProcess> broker_;
  std::unique_ptr<RawClient> publisher_;
  uint16_t next_packet_id_ = 0;
};

// Protocol-level helpers on RawClient.
mqtt::PublishPacket MakePublish(const std::string& topic, const std::string& payload, uint8_t qos = 0,
                                uint16_t packet_id = 0, bool retain = false);
// SUBSCRIBE `filter` with `options` and returns the SUBACK (nullopt if none).
std::optional<mqtt::SubackPacket> Subscribe(RawClient& client, const std::string& filter,
                                            mqtt::SubscribeOptions options, uint16_t packet_id = 1,
                                            mqtt::Properties properties = {});
// One SUBSCRIBE with every filter of `filters`, all with `options`.
std::optional<mqtt::SubackPacket> SubscribeAll(RawClient& client, const std::vector<std::string>& filters,
                                               mqtt::SubscribeOptions options, uint16_t packet_id = 1);
// PUBLISH and, for QoS 1 and 2, the full acknowledgement exchange.
bool PublishAndAck(RawClient& client, const mqtt::PublishPacket& publish);
// The next PUBLISH, acknowledged (PUBACK, or PUBREC/PUBREL/PUBCOMP).
std::optional<mqtt::PublishPacket> ReceivePublish(RawClient& client,
                                                  milliseconds timeout = seconds(5), bool ack = true);
// Sends PINGREQ and collects the PUBLISH packets that arrive before the
// PINGRESP (each acknowledged unless `ack` is false). nullopt if no
// PINGRESP came.
std::optional<std::vector<mqtt::PublishPacket>> DrainUntilPong(RawClient& client, bool ack = true);
// A normal DISCONNECT, then waits until the server has closed the
// connection: it has acted on the DISCONNECT.
void DisconnectAndWait(RawClient& client);
// The reason of the DISCONNECT the server sent before closing, if any;
// checks that the connection was closed.
std::optional<mqtt::ReasonCode> ExpectDisconnected(RawClient& client, milliseconds timeout = seconds(5));

}  // namespace estuary::conformance
