#include "frontends/mqtt/codec/wire_writer.h"

namespace estuary::mqtt {

void WireWriter::Byte(uint8_t value) {
  ++size_;
  if (out_ != nullptr) out_->push_back(static_cast<char>(value));
}

void WireWriter::TwoByteInteger(uint16_t value) {
  Byte(static_cast<uint8_t>(value >> 8));
  Byte(static_cast<uint8_t>(value));
}

void WireWriter::FourByteInteger(uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) {
    Byte(static_cast<uint8_t>(value >> shift));
  }
}

void WireWriter::VariableByteInteger(uint32_t value) {
  do {
    auto byte = static_cast<uint8_t>(value & 0x7F);
    value >>= 7;
    if (value != 0) byte |= 0x80;
    Byte(byte);
  } while (value != 0);
}

void WireWriter::String(std::string_view text) {
  TwoByteInteger(static_cast<uint16_t>(text.size()));
  Bytes(text);
}

void WireWriter::Bytes(std::string_view bytes) {
  size_ += bytes.size();
  if (out_ != nullptr) out_->append(bytes);
}

size_t VariableByteIntegerSize(uint32_t value) {
  if (value < 128) return 1;
  if (value < 16'384) return 2;
  if (value < 2'097'152) return 3;
  return 4;
}

}  // namespace estuary::mqtt
