#pragma once
// The AMQP 1.0 message bytes estuary-bench sends and reads, without Proton
// message objects (a queued proton::message costs kilobytes; a benchmark
// client must not spend its time encoding and decoding them).
//
// Sending: a bare message of one data section (AMQP 1.0 part 3.2.6), the
// payload as its binary: DataSectionPrefix(size) followed by the payload.
// Receiving: FindBody walks the sections of an encoded message (header,
// annotations, properties, application-properties, ...) and returns the
// first data section's bytes, or an amqp-value that is a binary or a string.
// Pure functions of bytes.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace estuary::bench {

// 0x00 0x53 0x75 (descriptor: data) then vbin8 (0xa0, size < 256) or
// vbin32 (0xb0, big-endian size).
std::string DataSectionPrefix(size_t body_size);

// The body of an encoded message; nullopt when the bytes are malformed or
// truncated, or the message has no data section and no binary or string
// amqp-value.
std::optional<std::string_view> FindBody(std::string_view message);

}  // namespace estuary::bench
