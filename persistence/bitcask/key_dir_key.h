#pragma once
// KeyDirKey: a key of the Bitcask key directory. Keys up to kInlineBytes
// (28) live inside its 32 bytes; longer ones in one heap block of exactly
// their length. A std::string holds 15 bytes inline in the same 32 bytes, so
// queue keys (a prefix and a 64-bit sequence number, about 20 bytes) each
// cost a second allocation: 144 heap bytes per key against 96 with this.
// Ordered and compared as bytes through its string_view.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>

namespace estuary::persistence::bitcask {

class KeyDirKey {
 public:
  static constexpr size_t kInlineBytes = 28;

  KeyDirKey() = default;
  explicit KeyDirKey(std::string_view key) { Assign(key); }
  KeyDirKey(const KeyDirKey& other) { Assign(other.view()); }
  KeyDirKey& operator=(const KeyDirKey& other) {
    if (this != &other) {
      Release();
      Assign(other.view());
    }
    return *this;
  }
  ~KeyDirKey() { Release(); }

  size_t size() const { return size_; }
  const char* data() const { return size_ <= kInlineBytes ? bytes_ : HeapPointer(); }
  std::string_view view() const { return std::string_view(data(), size_); }
  operator std::string_view() const { return view(); }  // NOLINT: used as a view

 private:
  char* HeapPointer() const {
    char* pointer;
    std::memcpy(&pointer, bytes_, sizeof(pointer));
    return pointer;
  }
  void Assign(std::string_view key) {
    size_ = static_cast<uint32_t>(key.size());
    if (key.size() <= kInlineBytes) {
      if (!key.empty()) std::memcpy(bytes_, key.data(), key.size());
      return;
    }
    char* pointer = static_cast<char*>(std::malloc(key.size()));
    if (pointer == nullptr) throw std::bad_alloc();
    std::memcpy(pointer, key.data(), key.size());
    std::memcpy(bytes_, &pointer, sizeof(pointer));
  }
  void Release() {
    if (size_ > kInlineBytes) std::free(HeapPointer());
    size_ = 0;
  }

  uint32_t size_ = 0;
  char bytes_[kInlineBytes];
};
static_assert(sizeof(KeyDirKey) == 32);

// Bytewise order over anything viewable as bytes (keys, strings, views).
struct KeyDirLess {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const { return a < b; }
};

}  // namespace estuary::persistence::bitcask
