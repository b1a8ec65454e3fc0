#pragma once
// RawClient: a blocking MQTT client over a plain socket, for tests that need
// exact bytes on the wire (malformed packets, protocol violations) or a
// client that a library would not let them be. Every read waits on a
// deadline, never a sleep. Test support only.
#include <chrono>
#include <cstdint>
#include <deque>
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
  // Puts packets back: Receive returns them, oldest first, before reading
  // the socket again. For helpers that skip over packets they do not want.
  void PutBack(mqtt::Packet packet) { held_.push_back(std::move(packet)); }
  void Close();

  // CONNECT then CONNACK; returns the CONNACK (reason set on failure).
  std::optional<mqtt::ConnackPacket> Connect(const std::string& client_id, bool clean_start = true,
                                             mqtt::Properties properties = {}, uint16_t keep_alive = 60);
  // Sends `connect` as given (its own version field; `version` is set from
  // it) and returns the CONNACK, or nullopt if something else or nothing came.
  std::optional<mqtt::ConnackPacket> Connect(const mqtt::ConnectPacket& connect);

  // The next packet if it is a T; nullopt on timeout, close, or another
  // packet type (kept in `last_unexpected`).
  template <typename T>
  std::optional<T> ReceiveAs(std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    auto packet = Receive(timeout);
    if (!packet) return std::nullopt;
    if (auto* typed = std::get_if<T>(&*packet)) return std::move(*typed);
    last_unexpected = std::move(packet);
    return std::nullopt;
  }

  mqtt::ProtocolVersion version = mqtt::ProtocolVersion::kV5;
  std::optional<mqtt::Packet> last_discarded;
  std::optional<mqtt::Packet> last_unexpected;

 private:
  bool ReadMore(std::chrono::steady_clock::time_point deadline);
  int fd_ = -1;
  std::string buffer_;
  std::deque<mqtt::Packet> held_;
  bool closed_ = false;
};

// A blocking TCP connection to an IPv4 address with TCP_NODELAY set;
// returns the socket, or -1.
int ConnectTcp(const std::string& host, uint16_t port);

// One blocking HTTP/1.1 request (Connection: close, empty body) on a fresh
// connection: the status code and body, or status 0 and no body when no
// complete reply (the connection closed, or Content-Length bytes of body)
// came within `timeout`.
struct HttpResult {
  int status = 0;
  std::string body;
};
HttpResult HttpRequest(const std::string& host, uint16_t port, const std::string& method, const std::string& path,
                       std::chrono::milliseconds timeout = std::chrono::seconds(5));
// The admin token (estuaryd --admin-token-file) that HttpRequest, HttpGet
// and AdminGet send as `Authorization: Bearer` from now on; "" (the
// default) sends none. For the whole test process: a test that starts
// nodes with a token sets it and clears it when done (AdminTokenScope).
void SetAdminToken(std::string token);
class AdminTokenScope {
 public:
  explicit AdminTokenScope(std::string token) { SetAdminToken(std::move(token)); }
  ~AdminTokenScope() { SetAdminToken({}); }
  AdminTokenScope(const AdminTokenScope&) = delete;
  AdminTokenScope& operator=(const AdminTokenScope&) = delete;
};
inline HttpResult HttpGet(const std::string& host, uint16_t port, const std::string& path) {
  return HttpRequest(host, port, "GET", path);
}

}  // namespace estuary::testing
