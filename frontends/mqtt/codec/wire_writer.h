#pragma once
// Writes MQTT wire primitives (§1.5). Internal to the codec.
//
// A writer made without an output only counts bytes: encoders run the same
// code once to size a packet (the remaining length precedes the body) and
// once to write it, so the two can never disagree.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace estuary::mqtt {

class WireWriter {
 public:
  WireWriter() = default;                        // counts only
  explicit WireWriter(std::string& out) : out_(&out) {}

  void Byte(uint8_t value);
  void TwoByteInteger(uint16_t value);
  void FourByteInteger(uint32_t value);
  void VariableByteInteger(uint32_t value);  // value < 2^28
  // Two-byte length prefix then the bytes; callers keep text <= 65535 bytes.
  void String(std::string_view text);
  void Bytes(std::string_view bytes);

  size_t size() const { return size_; }
  bool counting() const { return out_ == nullptr; }

 private:
  std::string* out_ = nullptr;
  size_t size_ = 0;
};

inline constexpr uint32_t kMaxVariableByteInteger = 268'435'455;

size_t VariableByteIntegerSize(uint32_t value);

}  // namespace estuary::mqtt
