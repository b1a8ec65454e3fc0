#pragma once
// The byte codec every wire and disk format is written with: fixed-width
// integers in a stated byte order, and a writer and a fail-soft reader
// built on them. Each format keeps its own byte order (the inter-node
// frames and the shard store are big-endian; the raft records, the
// metadata state, membership and Bitcask little-endian: docs/internode.md,
// docs/bitcask_format.md), so the order is a template argument, never a
// guess.
//
//   Load<Order, T>(at) / Store<Order, T>(at, v)   T at a raw address
//   Append<Order, T>(out, v)                      T onto a std::string or
//                                                 std::vector<uint8_t>
//   ByteWriter<Order>   appends fields to a string it owns
//   ByteReader<Order>   reads fields off the front of a view; the first
//                       short or malformed read marks it bad, and every
//                       read after that returns zero or empty
//
// One load or store and a byte swap per integer (no loop per byte); all
// inline, header-only. Pure: no allocation except the writer's string.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace estuary::base {

template <typename T>
constexpr T ByteSwap(T value) {
  static_assert(std::is_integral_v<T>);
  using U = std::make_unsigned_t<T>;
  const auto u = static_cast<U>(value);
  if constexpr (sizeof(T) == 1) {
    return value;
  } else if constexpr (sizeof(T) == 2) {
    return static_cast<T>(__builtin_bswap16(u));
  } else if constexpr (sizeof(T) == 4) {
    return static_cast<T>(__builtin_bswap32(u));
  } else {
    static_assert(sizeof(T) == 8);
    return static_cast<T>(__builtin_bswap64(u));
  }
}

// `value` converted between host order and `Order` (its own inverse).
template <std::endian Order, typename T>
constexpr T ToOrder(T value) {
  if constexpr (Order == std::endian::native) {
    return value;
  } else {
    return ByteSwap(value);
  }
}

template <std::endian Order, typename T>
T Load(const void* at) {
  T value;
  std::memcpy(&value, at, sizeof value);
  return ToOrder<Order>(value);
}

template <std::endian Order, typename T>
void Store(void* at, T value) {
  value = ToOrder<Order>(value);
  std::memcpy(at, &value, sizeof value);
}

// Appends sizeof(T) bytes to a std::string or a std::vector<uint8_t>.
template <std::endian Order, typename T, typename Buffer>
void Append(Buffer& out, T value) {
  char bytes[sizeof(T)];
  Store<Order>(bytes, value);
  if constexpr (std::is_same_v<Buffer, std::string>) {
    out.append(bytes, sizeof bytes);
  } else {
    const auto* first = reinterpret_cast<const typename Buffer::value_type*>(bytes);
    out.insert(out.end(), first, first + sizeof bytes);
  }
}

// The names call sites read best with.
template <typename T>
T LoadBig(const void* at) {
  return Load<std::endian::big, T>(at);
}
template <typename T>
T LoadLittle(const void* at) {
  return Load<std::endian::little, T>(at);
}
template <typename T>
void StoreBig(void* at, T value) {
  Store<std::endian::big>(at, value);
}
template <typename T>
void StoreLittle(void* at, T value) {
  Store<std::endian::little>(at, value);
}
template <typename T, typename Buffer>
void AppendBig(Buffer& out, T value) {
  Append<std::endian::big>(out, value);
}
template <typename T, typename Buffer>
void AppendLittle(Buffer& out, T value) {
  Append<std::endian::little>(out, value);
}

// Appends fields to a string it owns (or one handed to it to reuse its
// capacity). Bytes() is a u32 length then the bytes; Bytes16() a u16
// length (the caller keeps the bytes within 65,535).
template <std::endian Order>
class ByteWriter {
 public:
  ByteWriter() = default;
  explicit ByteWriter(std::string&& reuse) : out_(std::move(reuse)) {}

  void U8(uint8_t value) { out_.push_back(static_cast<char>(value)); }
  void U16(uint16_t value) { Append<Order>(out_, value); }
  void U32(uint32_t value) { Append<Order>(out_, value); }
  void U64(uint64_t value) { Append<Order>(out_, value); }
  void Raw(std::string_view bytes) { out_.append(bytes); }
  void Bytes(std::string_view bytes) {
    U32(static_cast<uint32_t>(bytes.size()));
    out_.append(bytes);
  }
  void Bytes(const std::vector<uint8_t>& bytes) {
    Bytes(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  }
  void Bytes16(std::string_view bytes) {
    U16(static_cast<uint16_t>(bytes.size()));
    out_.append(bytes);
  }

  std::string& str() { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

// Reads fields off the front of `bytes` (which must outlive the views it
// returns). A read past the end, or Fail() (a field the caller found
// malformed), marks the reader bad: from then on every read returns zero
// or an empty view, and ok() is false.
template <std::endian Order>
class ByteReader {
 public:
  explicit ByteReader(std::string_view bytes) : in_(bytes) {}

  uint8_t U8() { return Fixed<uint8_t>(); }
  uint16_t U16() { return Fixed<uint16_t>(); }
  uint32_t U32() { return Fixed<uint32_t>(); }
  uint64_t U64() { return Fixed<uint64_t>(); }
  bool Bool() {  // 0 or 1; anything else is malformed
    const uint8_t value = U8();
    if (value > 1) Fail();
    return value == 1;
  }
  std::string_view Raw(size_t size) {
    if (in_.size() < size) return Fail(), std::string_view{};
    const std::string_view out = in_.substr(0, size);
    in_.remove_prefix(size);
    return out;
  }
  std::string_view Bytes() { return Raw(U32()); }    // a u32 length, then the bytes
  std::string_view Bytes16() { return Raw(U16()); }  // a u16 length, then the bytes
  std::vector<uint8_t> ByteVector() {
    const std::string_view bytes = Bytes();
    return {bytes.begin(), bytes.end()};
  }
  // A u32 count of items each at least `min_item_bytes` long: more than
  // the bytes left can hold is malformed (a hostile count allocates nothing).
  uint32_t Count(size_t min_item_bytes) {
    const uint32_t count = U32();
    if (min_item_bytes > 0 && count > in_.size() / min_item_bytes) return Fail(), 0;
    return count;
  }

  void Fail() {
    ok_ = false;
    in_ = {};
  }
  bool ok() const { return ok_; }
  bool done() const { return ok_ && in_.empty(); }  // every byte read, none bad
  std::string_view rest() const { return in_; }

 private:
  template <typename T>
  T Fixed() {
    if (in_.size() < sizeof(T)) return Fail(), T{0};
    const T value = Load<Order, T>(in_.data());
    in_.remove_prefix(sizeof(T));
    return value;
  }

  std::string_view in_;
  bool ok_ = true;
};

using BigEndianWriter = ByteWriter<std::endian::big>;
using BigEndianReader = ByteReader<std::endian::big>;
using LittleEndianWriter = ByteWriter<std::endian::little>;
using LittleEndianReader = ByteReader<std::endian::little>;

}  // namespace estuary::base
