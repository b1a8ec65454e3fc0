#pragma once
// PahoClient: an Eclipse Paho MQTT C++ async_client (3.1.1 or 5.0) with the
// waits a test needs: every call blocks on its token with a deadline, and
// received messages, lost connections and server DISCONNECTs land in a
// queue the test reads with a deadline. Paho's callbacks run on its own
// thread; everything else here runs on the test's. No persistence.
#include <mqtt/async_client.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

// Paho's namespace, named so that it cannot be confused with estuary::mqtt.
namespace paho = ::mqtt;

namespace estuary::conformance {

class PahoClient {
 public:
  static constexpr std::chrono::seconds kWait{5};

  // `mqtt_version` is MQTTVERSION_3_1_1 or MQTTVERSION_5.
  PahoClient(const std::string& uri, const std::string& client_id, int mqtt_version);
  ~PahoClient();
  PahoClient(const PahoClient&) = delete;
  PahoClient& operator=(const PahoClient&) = delete;

  struct ConnectOptions {
    bool clean = true;  // clean session (3.1.1) or clean start (5.0)
    paho::properties properties;
    std::optional<paho::will_options> will;
    int keep_alive_s = 60;
    std::optional<paho::ssl_options> ssl;  // with an ssl:// uri
  };
  // Connects and returns the CONNACK; throws paho::exception on refusal.
  paho::connect_response Connect(const ConnectOptions& options);
  paho::connect_response Connect() { return Connect(ConnectOptions{}); }
  // The two halves of Connect, to connect several clients at once: Paho's
  // one receive thread notices a socket opened while it waits only after
  // its one-second poll, so connecting clients one after the other costs
  // up to two seconds each, and together costs nothing.
  paho::token_ptr StartConnect(const ConnectOptions& options);
  static paho::connect_response FinishConnect(const paho::token_ptr& token);

  // SUBACK reason codes (granted QoS for 3.1.1).
  std::vector<paho::ReasonCode> Subscribe(const std::string& filter, int qos,
                                          const paho::subscribe_options& options = paho::subscribe_options(),
                                          const paho::properties& properties = paho::properties());
  std::vector<paho::ReasonCode> Unsubscribe(const std::vector<std::string>& filters);
  // Publishes and waits until the QoS exchange completes.
  void Publish(const std::string& topic, const std::string& payload, int qos, bool retain = false,
               const paho::properties& properties = paho::properties());
  void Publish(const paho::message_ptr& message);

  // The next message, or null after `timeout`.
  paho::const_message_ptr Next(std::chrono::milliseconds timeout = kWait);
  // Up to `count` messages, waiting at most `timeout` overall.
  std::vector<paho::const_message_ptr> Take(size_t count, std::chrono::milliseconds timeout = kWait);

  // A normal DISCONNECT (5.0: with `reason`).
  void Disconnect(paho::ReasonCode reason = paho::ReasonCode::NORMAL_DISCONNECTION);
  // Waits until the connection is gone (lost, or a DISCONNECT from the server).
  bool WaitDisconnected(std::chrono::milliseconds timeout = kWait);
  // The reason code of a DISCONNECT the server sent (5.0), if one came.
  std::optional<int> server_disconnect_reason() const;

  paho::async_client& client() { return client_; }
  const std::string& client_id() const { return client_id_; }

 private:
  void OnMessage(paho::const_message_ptr message);
  void OnGone(std::optional<int> reason);

  std::string client_id_;
  int version_;
  paho::async_client client_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<paho::const_message_ptr> messages_;
  bool gone_ = false;
  std::optional<int> disconnect_reason_;
};

// A v5 property list in one expression.
paho::properties Props(std::initializer_list<paho::property> list);
// All values of a repeatable property (user properties as "key=value").
std::vector<std::string> UserProperties(const paho::properties& properties);
std::vector<uint32_t> SubscriptionIds(const paho::properties& properties);

}  // namespace estuary::conformance
