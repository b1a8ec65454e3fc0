#include "frontends/mqtt/codec/wire_reader.h"

#include "model/topic.h"

namespace estuary::mqtt {

void WireReader::Fail(ReasonCode reason, std::string message) {
  Fail(DecodeError{reason, std::move(message), std::nullopt});
}

void WireReader::Fail(DecodeError error) {
  if (failed_) return;
  failed_ = true;
  error_ = std::move(error);
  if (version_hint_) error_.version_hint = version_hint_;
  position_ = data_.size();
}

void WireReader::SetVersionHint(ProtocolVersion version) {
  version_hint_ = version;
  if (failed_) error_.version_hint = version;
}

bool WireReader::Need(size_t count, const char* what) {
  if (failed_) return false;
  if (remaining() >= count) return true;
  Fail(ReasonCode::kMalformedPacket, std::string("truncated ") + what);
  return false;
}

uint8_t WireReader::Byte() {
  if (!Need(1, "byte")) return 0;
  return static_cast<uint8_t>(data_[position_++]);
}

uint16_t WireReader::TwoByteInteger() {
  if (!Need(2, "two byte integer")) return 0;
  const auto high = static_cast<uint8_t>(data_[position_]);
  const auto low = static_cast<uint8_t>(data_[position_ + 1]);
  position_ += 2;
  return static_cast<uint16_t>(high << 8 | low);
}

uint32_t WireReader::FourByteInteger() {
  if (!Need(4, "four byte integer")) return 0;
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) {
    value = value << 8 | static_cast<uint8_t>(data_[position_++]);
  }
  return value;
}

uint32_t WireReader::VariableByteInteger() {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) {
    if (!Need(1, "variable byte integer")) return 0;
    const auto byte = static_cast<uint8_t>(data_[position_++]);
    value |= static_cast<uint32_t>(byte & 0x7F) << (7 * i);
    if ((byte & 0x80) == 0) {
      if (byte == 0 && i > 0) {
        Fail(ReasonCode::kMalformedPacket, "variable byte integer not minimally encoded");
        return 0;
      }
      return value;
    }
  }
  Fail(ReasonCode::kMalformedPacket, "variable byte integer longer than 4 bytes");
  return 0;
}

std::string_view WireReader::Bytes(size_t count) {
  if (!Need(count, "field")) return {};
  std::string_view bytes = data_.substr(position_, count);
  position_ += count;
  return bytes;
}

std::string_view WireReader::Rest() {
  std::string_view rest = data_.substr(position_);
  position_ = data_.size();
  return rest;
}

std::string WireReader::Utf8String() {
  const uint16_t length = TwoByteInteger();
  const std::string_view text = Bytes(length);
  if (!ok()) return {};
  if (!IsValidMqttUtf8(text)) {
    Fail(ReasonCode::kMalformedPacket, "ill-formed UTF-8 string");
    return {};
  }
  return std::string(text);
}

std::string WireReader::BinaryData() {
  const uint16_t length = TwoByteInteger();
  return std::string(Bytes(length));
}

}  // namespace estuary::mqtt
