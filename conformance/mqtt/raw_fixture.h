#pragma once
// Fixtures and byte builders for the raw-socket tests: exact bytes on the
// wire, for what a client library would never send. RawV311 and RawV5 name
// the protocol version of their tests (coverage.py reads the suite name).
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "conformance/mqtt/broker_fixture.h"
#include "frontends/mqtt/codec/encoder.h"

namespace estuary::conformance {

using mqtt::ProtocolVersion;
using mqtt::ReasonCode;

// --- bytes -----------------------------------------------------------------
inline std::string Bytes(std::initializer_list<int> values) {
  std::string out;
  for (int value : values) out.push_back(static_cast<char>(value));
  return out;
}

inline std::string VarInt(uint32_t value) {
  std::string out;
  do {
    uint8_t byte = value % 128;
    value /= 128;
    if (value > 0) byte |= 0x80;
    out.push_back(static_cast<char>(byte));
  } while (value > 0);
  return out;
}

// A UTF-8 string or binary field: two-byte length, then the bytes.
inline std::string Str(std::string_view text) {
  std::string out = Bytes({static_cast<int>(text.size() >> 8), static_cast<int>(text.size() & 0xFF)});
  out.append(text);
  return out;
}

// A whole packet: first byte, remaining length, body.
inline std::string Frame(uint8_t first_byte, std::string_view body) {
  std::string out(1, static_cast<char>(first_byte));
  out += VarInt(static_cast<uint32_t>(body.size()));
  out.append(body);
  return out;
}

inline std::string Encode(const mqtt::Packet& packet, ProtocolVersion version) {
  std::string out;
  mqtt::EncodePacket(packet, version, out);
  return out;
}

// A CONNECT body (variable header and payload) built field by field, for
// CONNECTs the encoder would refuse to make.
inline std::string ConnectBody(ProtocolVersion version, uint8_t flags, const std::string& payload,
                               uint16_t keep_alive = 60, std::string_view name = "MQTT", int level = -1) {
  std::string body = Str(name);
  body.push_back(static_cast<char>(level >= 0 ? level : static_cast<int>(version)));
  body.push_back(static_cast<char>(flags));
  body += Bytes({keep_alive >> 8, keep_alive & 0xFF});
  if (version == ProtocolVersion::kV5) body += VarInt(0);  // no properties
  return body + payload;
}

inline mqtt::ConnectPacket MakeConnect(const std::string& client_id, ProtocolVersion version,
                                       bool clean_start = true) {
  mqtt::ConnectPacket connect;
  connect.protocol_name = version == ProtocolVersion::kV31 ? "MQIsdp" : "MQTT";
  connect.version = version;
  connect.client_id = client_id;
  connect.clean_start = clean_start;
  connect.keep_alive = 60;
  return connect;
}

// --- fixtures ----------------------------------------------------------------
class RawFixture : public BrokerFixture {
 protected:
  explicit RawFixture(ProtocolVersion version) : version_(version) {}

  ProtocolVersion version() const { return version_; }
  std::unique_ptr<RawClient> Open() { return OpenRaw(version_); }
  std::unique_ptr<RawClient> Connect(const std::string& client_id, bool clean_start = true,
                                     mqtt::Properties properties = {}, uint16_t keep_alive = 60) {
    return ConnectRaw(client_id, version_, clean_start, std::move(properties), keep_alive);
  }
  std::unique_ptr<RawClient> Subscriber(const std::string& filter, uint8_t qos = 1) {
    return SubscribeRaw(Unique("sub"), filter, qos, version_);
  }

  // A connected client sends `bytes`; the server must close the connection,
  // in 5.0 after a DISCONNECT whose reason is one of `reasons`, in 3.1.1
  // without a word. Then another client must still be served.
  void ExpectRejected(const std::string& bytes, std::vector<ReasonCode> reasons);
  // `bytes` (a CONNECT) sent on a fresh connection gets no CONNACK, only a
  // close; or, when `refusal` is set, a CONNACK with that reason and
  // session present 0, then a close.
  void ExpectConnectRefused(const std::string& bytes, std::optional<ReasonCode> refusal = std::nullopt);
  // The first packet `subscriber` gets is a PUBLISH on `marker`: nothing
  // came before it. The caller publishes the marker after the event.
  void ExpectMarkerFirst(RawClient& subscriber, const std::string& marker);

 private:
  ProtocolVersion version_;
};

class RawV311 : public RawFixture {
 protected:
  RawV311() : RawFixture(ProtocolVersion::kV311) {}
};

class RawV5 : public RawFixture {
 protected:
  RawV5() : RawFixture(ProtocolVersion::kV5) {}
};

}  // namespace estuary::conformance
