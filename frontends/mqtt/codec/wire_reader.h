#pragma once
// Reads MQTT wire primitives (§1.5) from a byte range. Internal to the codec.
//
// The reader keeps the first error it meets ("sticky"): after a failure every
// read returns a zero value and consumes nothing, and remaining() is 0, so a
// decoder can read a whole packet and check ok() once at the end. Only the
// first Fail() is kept; later ones are ignored.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "frontends/mqtt/codec/decoder.h"

namespace estuary::mqtt {

class WireReader {
 public:
  explicit WireReader(std::string_view data) : data_(data) {}
  explicit WireReader(std::string&&) = delete;  // would dangle

  uint8_t Byte();
  uint16_t TwoByteInteger();
  uint32_t FourByteInteger();
  // At most four bytes, minimally encoded [MQTT-1.5.5-1]; else Malformed.
  uint32_t VariableByteInteger();
  // A length-prefixed string checked with IsValidMqttUtf8; else Malformed.
  std::string Utf8String();
  // Length-prefixed binary data.
  std::string BinaryData();
  // The next `count` bytes, or Malformed when fewer remain.
  std::string_view Bytes(size_t count);
  // Everything left.
  std::string_view Rest();

  size_t remaining() const { return data_.size() - position_; }
  bool empty() const { return remaining() == 0; }
  bool ok() const { return !failed_; }
  const DecodeError& error() const { return error_; }
  DecodeError TakeError() { return std::move(error_); }

  void Fail(ReasonCode reason, std::string message);
  void Fail(DecodeError error);
  // Adds the protocol version a CONNECT announced to the kept error (or the
  // one still to come), so a session can answer in the right format.
  void SetVersionHint(ProtocolVersion version);

 private:
  bool Need(size_t count, const char* what);

  std::string_view data_;
  size_t position_ = 0;
  bool failed_ = false;
  DecodeError error_;
  std::optional<ProtocolVersion> version_hint_;
};

}  // namespace estuary::mqtt
