#pragma once
// RawClient: a blocking MQTT client over a plain socket, for tests that need
// exact bytes on the wire (malformed packets, protocol violations) or a
// client that a library would not let them be. Every read waits on a
// deadline, never a sleep. Test support only.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "frontends/mqtt/codec/packet.h"

namespace estuary::testing {

class RawClient {
 public:
  RawClient() = default;
  ~RawClient();
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  // Connects the socket (no MQTT yet). False on failure.
  bool Open(const std::string& host, uint16_t port);
  void SendBytes(std::string_view bytes);
  void Send(const mqtt::Packet& packet);
  // The next packet, or nullopt when the deadline passes or the server
  // closed the connection (see closed()).
  std::optional<mqtt::Packet> Receive(std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // True once the server closed the connection (EOF or reset) — waits up to
  // `timeout` for it, discarding packets meanwhile into `last_discarded`.
  bool WaitClosed(std::chrono::milliseconds timeout = std::chrono::seconds(5));
  bool closed() const { return closed_; }
  void Close();

  // CONNECT then CONNACK; returns the CONNACK (reason set on failure).
  std::optional<mqtt::ConnackPacket> Connect(const std::string& client_id, bool clean_start = true,
                                             mqtt::Properties properties = {}, uint16_t keep_alive = 60);

  mqtt::ProtocolVersion version = mqtt::ProtocolVersion::kV5;
  std::optional<mqtt::Packet> last_discarded;

 private:
  bool ReadMore(std::chrono::steady_clock::time_point deadline);
  int fd_ = -1;
  std::string buffer_;
  bool closed_ = false;
};

// Blocking HTTP GET on loopback: returns the status code and body.
struct HttpResult {
  int status = 0;
  std::string body;
};
HttpResult HttpGet(const std::string& host, uint16_t port, const std::string& path);

}  // namespace estuary::testing
