#include "cluster-core/links/frame.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace estuary::cluster::wire {
namespace {

constexpr size_t kMaxAddressBytes = 255;
constexpr std::string_view kMacLabel = "estuary-link-auth-v1";

void PutU16(std::string& out, uint16_t v) {
  out.push_back(static_cast<char>(v >> 8));
  out.push_back(static_cast<char>(v & 0xFF));
}

void PutU32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xFF));
}

uint16_t GetU16(std::string_view in, size_t at) {
  return static_cast<uint16_t>((static_cast<uint8_t>(in[at]) << 8) | static_cast<uint8_t>(in[at + 1]));
}

uint32_t GetU32(std::string_view in, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(in[at + i]);
  return v;
}

}  // namespace

void AppendFrame(std::string& out, uint8_t type, std::string_view body) {
  const auto length = static_cast<uint32_t>(body.size() + 1);
  const char header[kHeaderBytes] = {static_cast<char>(length >> 24), static_cast<char>(length >> 16),
                                     static_cast<char>(length >> 8), static_cast<char>(length),
                                     static_cast<char>(type)};
  out.append(header, kHeaderBytes);
  out.append(body);
}

std::string EncodeHello(const Hello& hello) {
  std::string out;
  PutU32(out, hello.magic);
  out.push_back(static_cast<char>(hello.major));
  out.push_back(static_cast<char>(hello.minor));
  PutU16(out, hello.node);
  std::string_view address = hello.address;
  if (address.size() > kMaxAddressBytes) address = address.substr(0, kMaxAddressBytes);
  PutU16(out, static_cast<uint16_t>(address.size()));
  out.append(address);
  out.append(reinterpret_cast<const char*>(hello.nonce.data()), hello.nonce.size());
  return out;
}

// Bytes after the nonce are ignored: a later minor version may add fields.
std::optional<Hello> DecodeHello(std::string_view body) {
  constexpr size_t kFixed = 4 + 1 + 1 + 2 + 2;
  if (body.size() < kFixed) return std::nullopt;
  Hello hello;
  hello.magic = GetU32(body, 0);
  hello.major = static_cast<uint8_t>(body[4]);
  hello.minor = static_cast<uint8_t>(body[5]);
  hello.node = GetU16(body, 6);
  size_t address_size = GetU16(body, 8);
  if (address_size > kMaxAddressBytes || body.size() < kFixed + address_size + kNonceBytes) return std::nullopt;
  hello.address.assign(body.substr(kFixed, address_size));
  std::memcpy(hello.nonce.data(), body.data() + kFixed + address_size, kNonceBytes);
  return hello;
}

Mac ComputeMac(std::string_view secret, Role role, const Nonce& dialer_nonce, const Nonce& acceptor_nonce,
               NodeId dialer, NodeId acceptor) {
  std::string input(kMacLabel);
  input.push_back(static_cast<char>(role));
  input.append(reinterpret_cast<const char*>(dialer_nonce.data()), dialer_nonce.size());
  input.append(reinterpret_cast<const char*>(acceptor_nonce.data()), acceptor_nonce.size());
  PutU16(input, dialer);
  PutU16(input, acceptor);
  Mac mac{};
  unsigned int length = 0;
  const unsigned char* done =
      HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac.data(), &length);
  if (done == nullptr || length != kMacBytes) std::abort();  // OpenSSL without SHA-256: cannot run
  return mac;
}

bool MacEquals(const Mac& a, std::string_view b) {
  if (b.size() != a.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Nonce RandomNonce() {
  Nonce nonce{};
  if (RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) != 1) std::abort();  // no entropy: cannot run
  return nonce;
}

FrameReader::Status FrameReader::Parse(std::string_view in, Frame& frame, size_t& size) const {
  if (in.size() < 4) return Status::kNeedMore;
  const uint32_t length = GetU32(in, 0);
  if (length == 0) return Status::kEmptyFrame;
  if (length > max_frame_) return Status::kOversize;
  if (in.size() < 4 + static_cast<size_t>(length)) return Status::kNeedMore;
  frame.type = static_cast<uint8_t>(in[4]);
  frame.body = in.substr(kHeaderBytes, length - 1);
  size = 4 + static_cast<size_t>(length);
  return Status::kFrame;
}

FrameReader::Status FrameReader::TopUp(std::string_view& in) {
  auto move = [&](size_t n) {
    n = std::min(n, in.size());
    buffer_.append(in.data(), n);
    in.remove_prefix(n);
  };
  if (buffered() < 4) move(4 - buffered());
  if (buffered() < 4) return Status::kNeedMore;
  const uint32_t length = GetU32(std::string_view(buffer_).substr(consumed_), 0);
  if (length == 0) return Status::kEmptyFrame;
  if (length > max_frame_) return Status::kOversize;
  const size_t whole = 4 + static_cast<size_t>(length);
  if (buffered() < whole) move(whole - buffered());
  return buffered() < whole ? Status::kNeedMore : Status::kFrame;
}

void FrameReader::Compact() {
  if (consumed_ == 0) return;
  buffer_.erase(0, consumed_);
  consumed_ = 0;
  // One multi-MiB frame must not pin its buffer on an idle link.
  if (buffer_.empty() && buffer_.capacity() > (1u << 20)) std::string().swap(buffer_);
}

void FrameReader::Feed(std::string_view bytes) {
  Compact();
  buffer_.append(bytes);
}

FrameReader::Status FrameReader::Next(Frame& frame) {
  size_t size = 0;
  const Status status = Parse(std::string_view(buffer_).substr(consumed_), frame, size);
  if (status == Status::kFrame) consumed_ += size;  // the view stays valid until the next Feed() or Read()
  return status;
}

}  // namespace estuary::cluster::wire
