#pragma once
// MqttClient: one MQTT connection of estuary-bench.
//
// Connects (optionally from a chosen source address), sends CONNECT, waits
// for CONNACK, subscribes when given filters and waits for SUBACK, then
// publishes what its owner asks and runs both directions of the QoS 1 and
// QoS 2 flows (PUBACK; PUBREC/PUBREL/PUBCOMP). Bytes are written through the
// connection's batched output buffer, so a burst of publishes in one loop
// iteration becomes one write.
//
// Threading and ownership: created with Create() and held by shared_ptr by
// its Worker; lives on the Worker's loop thread. Callbacks registered with
// io hold a weak_ptr, so a destroyed client is simply not called. Handlers
// run on the loop thread; on_failed is called at most once, and never after
// Disconnect() or destruction.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "frontends/mqtt/codec/packet.h"
#include "io/tls/tls_session.h"
#include "io/uv/tcp.h"
#include "tools/bench/bench_client.h"

namespace estuary::bench {

class MqttClient final : public BenchClient, public std::enable_shared_from_this<MqttClient> {
 public:
  struct Config {
    io::Endpoint broker;
    std::string local_address;  // source IPv4 address; empty: the kernel picks
    mqtt::ProtocolVersion version = mqtt::ProtocolVersion::kV311;
    std::string client_id;
    uint16_t keepalive_s = 60;
    std::vector<std::string> filters;  // subscribe to these once connected
    int subscribe_qos = 0;
    // Above 0: a persistent session (MQTT 5: this session expiry; 3.1.1:
    // clean session 0), so the broker keeps and stores its deliveries.
    uint32_t session_expiry_s = 0;
    size_t max_queued_bytes = 1 << 20;  // high watermark; low is half
    // MQTT over TLS when set: the handshake runs before CONNECT, and every
    // loop iteration's output is encrypted in one pass.
    std::shared_ptr<ssl_ctx_st> tls;
    std::string tls_error;  // set: the TLS context could not be built; Start() fails with it
    std::string tls_server_name;
    // --tls-resume: the worker's ticket slot (offered, and refilled with
    // each new ticket) and its count of resumed handshakes; null: full
    // handshakes only.
    std::shared_ptr<ssl_session_st>* tls_ticket = nullptr;
    std::atomic<uint32_t>* tls_resumed = nullptr;
  };
  using Handlers = BenchClient::Handlers;

  static std::shared_ptr<MqttClient> Create(io::UvLoop& loop, Config config, Handlers handlers);
  ~MqttClient() override;
  MqttClient(const MqttClient&) = delete;
  MqttClient& operator=(const MqttClient&) = delete;

  void Start() override;
  // `fields` carries topic, QoS and packet id; its payload member is ignored.
  void Publish(const mqtt::PublishPacket& fields, std::string_view payload) override;
  void Ping() override;
  // Sends DISCONNECT and closes after flushing. No handler is called after.
  void Disconnect() override;

  bool ready() const override { return state_ == State::kReady; }
  bool open() const override;  // the socket is not closed yet
  bool blocked() const override;  // above the socket's high watermark
  // The broker's Receive Maximum (MQTT 5 CONNACK), else 65535.
  uint16_t server_receive_maximum() const override { return server_receive_maximum_; }

 private:
  enum class State { kIdle, kConnecting, kAwaitingConnack, kAwaitingSuback, kReady, kClosed };

  MqttClient(io::UvLoop& loop, Config config, Handlers handlers);
  void StartConnection(std::shared_ptr<io::TcpConnection> connection);
  std::shared_ptr<io::TcpConnection> ConnectFromLocalAddress();
  void OnConnected(int status);
  void SendConnect();
  void OnCiphertext(std::string_view bytes);
  void OnData(std::string_view bytes);
  // Where encoders append: the socket's buffer, or (TLS) plaintext to encrypt.
  std::string& Output();
  void MarkDirty();
  void Encrypt();
  size_t ParseFrames(std::string_view bytes, int64_t arrival_ns);
  void Dispatch(mqtt::Packet& packet, int64_t arrival_ns);
  void OnConnack(const mqtt::ConnackPacket& connack);
  void OnSuback(const mqtt::SubackPacket& suback);
  void OnPublish(const mqtt::PublishPacket& publish, int64_t arrival_ns);
  void OnAck(const mqtt::AckPacket& ack);
  void OnClose(int status);
  void Send(const mqtt::Packet& packet);
  void SendAck(mqtt::PacketType type, uint16_t packet_id);
  void Fail(const std::string& error);

  io::UvLoop& loop_;
  Config config_;
  Handlers handlers_;
  std::shared_ptr<io::TcpConnection> connection_;
  std::unique_ptr<io::TlsSession> tls_;
  bool ticket_taken_ = false;  // --tls-resume: this connection's ticket is in the slot
  std::string plaintext_out_;  // TLS: encoded, not yet encrypted
  bool encrypt_posted_ = false;
  State state_ = State::kIdle;
  bool socket_closed_ = false;  // the connection's on_close has run
  std::string input_;  // bytes of an incomplete packet
  std::vector<bool> awaiting_pubrel_;  // QoS 2 ids received, PUBREL not yet
  uint16_t server_receive_maximum_ = 65535;
};

}  // namespace estuary::bench
